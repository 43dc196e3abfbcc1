#include "planner/roofline.h"

#include <cmath>

#include "absl/status/statusor.h"
#include "model/sharding.h"
#include "model/step_buffers.h"

namespace tpserve {
namespace {

// Bytes one rank of a stage reads per decode step: all its weights except the embedding
// table, of which a step reads only `concurrency` rows (unless the LM head is tied to it), and
// except the experts no token of the step is routed to: with `concurrency` tokens each taking
// top_k of E experts, spread evenly, an expert is read with probability
// 1 - (1 - top_k / E)^concurrency.
int64_t WeightBytesRead(const ModelSpec& c, const StageShards& stage, int64_t concurrency) {
  int64_t bytes = stage.weight_bytes_per_rank;
  const RoleShard* embedding = stage.Find(TensorRole::kEmbedding);
  const RoleShard* lm_head = stage.Find(TensorRole::kLmHead);
  const bool tied_here = lm_head != nullptr && lm_head->tied_to_embedding;
  if (embedding != nullptr && !tied_here) bytes -= embedding->bytes_per_rank;
  if (!c.moe.enabled()) return bytes;
  const double unread = 1.0 - c.ExpertReadFraction(concurrency);
  for (TensorRole role : {TensorRole::kExpertGate, TensorRole::kExpertUp,
                          TensorRole::kExpertDown}) {
    if (const RoleShard* r = stage.Find(role)) {
      bytes -= static_cast<int64_t>(static_cast<double>(r->bytes_per_rank) * unread);
    }
  }
  return bytes;
}

// MoE layers whose feed-forward ends in the expert-parallel exchange (0 without it).
int64_t ExpertParallelLayers(const PlanInputs& in) {
  if (!in.expert_parallel || in.tp <= 1) return 0;
  int64_t n = 0;
  for (int64_t l = 0; l < in.model.num_layers; ++l) n += in.model.IsMoeLayer(l) ? 1 : 0;
  return n;
}

void EstimatePrefill(const MemoryPlan& plan, Roofline& r) {
  const PlanInputs& in = plan.inputs;
  const ModelSpec& c = in.model;
  const double p = static_cast<double>(r.prompt_tokens);
  r.prefill_flops = 2.0 * static_cast<double>(c.NumActiveLinearParameters()) * p +
                    2.0 * static_cast<double>(c.vocab_size) * c.hidden_size +
                    2.0 * c.num_layers * c.num_heads * c.head_dim * p * p;
  r.prefill_compute_s = r.prefill_flops / (in.tp * r.peak_flops * r.prefill_efficiency);
  const double bw = r.link_bandwidth_bytes_per_s, lat = r.link_latency_s;
  const double one =
      Reduction(in) == TpReduction::kDeterministic
          ? RingAllGatherSeconds(r.reduction_chunks * r.prompt_tokens * c.hidden_size * 4, in.tp,
                                 bw, lat)
          : RingAllReduceSeconds(r.prompt_tokens * c.hidden_size *
                                     PlainElementBytes(in.activation_dtype),
                                 in.tp, bw, lat);
  const int64_t ep_layers = ExpertParallelLayers(in);
  r.prefill_allreduce_s =
      static_cast<double>(2 * c.num_layers - ep_layers) * one +
      static_cast<double>(ep_layers) *
          ExpertParallelSeconds(in, r.prompt_tokens, r.reduction_chunks, bw, lat);
  r.prefill_s = r.prefill_compute_s + r.prefill_allreduce_s;
}

}  // namespace

int64_t ExpertAllToAllBytesPerRank(const PlanInputs& in, int64_t tokens, int64_t chunks) {
  const int64_t w = in.tp;
  if (w <= 1 || !in.model.moe.enabled()) return 0;
  const int64_t slot_bytes = chunks * in.model.hidden_size * 4;
  // tokens * k slots, a 1/w share run on each rank, (w-1)/w of those for other ranks' rows.
  return tokens * in.model.moe.routing.top_k * (w - 1) * slot_bytes / (w * w);
}

double ExpertParallelSeconds(const PlanInputs& in, int64_t tokens, int64_t chunks,
                             double bandwidth_bytes_per_s, double latency_s) {
  if (in.tp <= 1) return 0;
  const int64_t rows = tokens * in.model.hidden_size * PlainElementBytes(in.activation_dtype);
  return latency_s +
         static_cast<double>(ExpertAllToAllBytesPerRank(in, tokens, chunks)) /
             bandwidth_bytes_per_s +
         RingAllGatherSeconds(rows, in.tp, bandwidth_bytes_per_s, latency_s);
}

double RingAllReduceSeconds(int64_t bytes, int ranks, double bandwidth_bytes_per_s,
                            double latency_s) {
  if (ranks <= 1) return 0;
  return latency_s + 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / bandwidth_bytes_per_s;
}

double RingAllGatherSeconds(int64_t bytes, int ranks, double bandwidth_bytes_per_s,
                            double latency_s) {
  if (ranks <= 1) return 0;
  return latency_s + static_cast<double>(ranks - 1) / ranks * static_cast<double>(bytes) /
                         bandwidth_bytes_per_s;
}

Roofline EstimateRoofline(const MemoryPlan& plan, const RooflineAssumptions& assumptions) {
  const PlanInputs& in = plan.inputs;
  const ModelSpec& c = in.model;
  Roofline r;
  r.memory_bandwidth_bytes_per_s = in.device.memory_bandwidth_bytes_per_s;
  r.peak_flops = in.device.peak_flops;
  r.prefill_efficiency = assumptions.prefill_efficiency;
  r.decode_efficiency = assumptions.decode_efficiency;
  r.link_bandwidth_bytes_per_s = in.device.interconnect.bandwidth_bytes_per_s;
  r.link_latency_s = in.device.interconnect.latency_s;
  r.concurrency =
      assumptions.concurrency > 0 ? assumptions.concurrency : in.target_concurrent_sequences;
  r.context_tokens =
      assumptions.context_tokens > 0 ? assumptions.context_tokens : in.max_context_tokens;
  r.prompt_tokens =
      assumptions.prompt_tokens > 0 ? assumptions.prompt_tokens : in.max_context_tokens;

  for (size_t s = 0; s < plan.stages.size(); ++s) {
    r.weight_bytes_read += WeightBytesRead(c, plan.sharding.stages[s], r.concurrency);
    r.kv_bytes_read += r.concurrency * r.context_tokens * plan.stages[s].kv_bytes_per_token;
  }
  r.memory_time_s =
      static_cast<double>(r.weight_bytes_read + r.kv_bytes_read) /
      (r.memory_bandwidth_bytes_per_s * r.decode_efficiency);
  const int64_t a = PlainElementBytes(in.activation_dtype);
  const int64_t hidden_bytes = r.concurrency * c.hidden_size * a;
  const bool deterministic = Reduction(in) == TpReduction::kDeterministic;
  r.reduction = deterministic ? "chunked all-gather" : "all-reduce";
  if (absl::StatusOr<ShardingPlan> rank0 =
          ShardingPlan::Create(c, in.weights, {0, in.tp, in.expert_parallel});
      rank0.ok()) {
    r.reduction_chunks =
        ReductionChunks(c, *rank0, in.weights, Reduction(in), in.deterministic_tp_chunks);
    r.logits_gather_bytes = in.tp * r.concurrency * rank0->vocab_rows_per_rank() * 4;
  }
  r.row_parallel_bytes =
      deterministic ? r.reduction_chunks * r.concurrency * c.hidden_size * 4 : hidden_bytes;
  if (in.tp > 1) {
    const double bw = r.link_bandwidth_bytes_per_s, lat = r.link_latency_s;
    // Per stage (stages run in turn): expert parallelism trades a MoE layer's down reduction
    // for its exchange.
    const int64_t ep_layers = ExpertParallelLayers(in) / in.pp;
    const int64_t row_parallel = 2 * c.num_layers / in.pp - ep_layers;
    r.collectives_per_step = in.pp * (row_parallel + 2 * ep_layers + 2);
    const double one = deterministic
                           ? RingAllGatherSeconds(r.row_parallel_bytes, in.tp, bw, lat)
                           : RingAllReduceSeconds(r.row_parallel_bytes, in.tp, bw, lat);
    if (ep_layers > 0) {
      r.expert_all_to_all_bytes =
          ExpertAllToAllBytesPerRank(in, r.concurrency, r.reduction_chunks);
    }
    r.collective_time_s =
        in.pp * (row_parallel * one +
                 ep_layers * ExpertParallelSeconds(in, r.concurrency, r.reduction_chunks, bw,
                                                   lat) +
                 RingAllReduceSeconds(hidden_bytes, in.tp, bw, lat) +
                 // The logits' gather to the sampling rank: its link takes the (tp-1)/tp of
                 // the payload the others send, what each link of a ring all-gather takes.
                 RingAllGatherSeconds(r.logits_gather_bytes, in.tp, bw, lat));
  }
  r.pipeline_time_s = (in.pp - 1) * (r.link_latency_s + static_cast<double>(hidden_bytes) /
                                                            r.link_bandwidth_bytes_per_s);
  r.decode_step_s = r.memory_time_s + r.collective_time_s + r.pipeline_time_s;
  r.tokens_per_s_per_user = 1.0 / r.decode_step_s;
  r.tokens_per_s_aggregate = r.concurrency / r.decode_step_s;
  EstimatePrefill(plan, r);
  return r;
}

}  // namespace tpserve
