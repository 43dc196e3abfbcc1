#include "planner/roofline.h"

namespace tpserve {
namespace {

// Bytes one rank of a stage reads per decode step: all its weights except the embedding
// table, of which a step reads only `concurrency` rows (unless the LM head is tied to it).
int64_t WeightBytesRead(const StageShards& stage) {
  int64_t bytes = stage.weight_bytes_per_rank;
  const RoleShard* embedding = stage.Find(TensorRole::kEmbedding);
  const RoleShard* lm_head = stage.Find(TensorRole::kLmHead);
  const bool tied_here = lm_head != nullptr && lm_head->tied_to_embedding;
  if (embedding != nullptr && !tied_here) bytes -= embedding->bytes_per_rank;
  return bytes;
}

// Elements of the per-layer projections (the matmuls a token goes through in every layer).
double LayerMatmulParams(const LlamaConfig& c) {
  double per_layer = 0;
  for (TensorRole role : {TensorRole::kQ, TensorRole::kK, TensorRole::kV, TensorRole::kO,
                          TensorRole::kGate, TensorRole::kUp, TensorRole::kDown}) {
    const auto shape = FullShape(c, role);
    per_layer += static_cast<double>(shape[0]) * static_cast<double>(shape[1]);
  }
  return per_layer * static_cast<double>(c.num_layers);
}

void EstimatePrefill(const MemoryPlan& plan, Roofline& r) {
  const PlanInputs& in = plan.inputs;
  const LlamaConfig& c = in.model;
  const double p = static_cast<double>(r.prompt_tokens);
  r.prefill_flops = 2.0 * LayerMatmulParams(c) * p +
                    2.0 * static_cast<double>(c.vocab_size) * c.hidden_size +
                    2.0 * c.num_layers * c.num_heads * c.head_dim * p * p;
  r.prefill_compute_s = r.prefill_flops / (in.tp * r.peak_flops * r.prefill_efficiency);
  const int64_t bytes = r.prompt_tokens * c.hidden_size * PlainElementBytes(in.activation_dtype);
  r.prefill_allreduce_s =
      2.0 * c.num_layers *
      RingAllReduceSeconds(bytes, in.tp, r.link_bandwidth_bytes_per_s, r.link_latency_s);
  r.prefill_s = r.prefill_compute_s + r.prefill_allreduce_s;
}

}  // namespace

double RingAllReduceSeconds(int64_t bytes, int ranks, double bandwidth_bytes_per_s,
                            double latency_s) {
  if (ranks <= 1) return 0;
  return latency_s + 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / bandwidth_bytes_per_s;
}

Roofline EstimateRoofline(const MemoryPlan& plan, const RooflineAssumptions& assumptions) {
  const PlanInputs& in = plan.inputs;
  const LlamaConfig& c = in.model;
  Roofline r;
  r.memory_bandwidth_bytes_per_s = in.device.memory_bandwidth_bytes_per_s;
  r.peak_flops = in.device.peak_flops;
  r.prefill_efficiency = assumptions.prefill_efficiency;
  r.link_bandwidth_bytes_per_s = in.device.interconnect.bandwidth_bytes_per_s;
  r.link_latency_s = in.device.interconnect.latency_s;
  r.concurrency =
      assumptions.concurrency > 0 ? assumptions.concurrency : in.target_concurrent_sequences;
  r.context_tokens =
      assumptions.context_tokens > 0 ? assumptions.context_tokens : in.max_context_tokens;
  r.prompt_tokens =
      assumptions.prompt_tokens > 0 ? assumptions.prompt_tokens : in.max_context_tokens;

  for (size_t s = 0; s < plan.stages.size(); ++s) {
    r.weight_bytes_read += WeightBytesRead(plan.sharding.stages[s]);
    r.kv_bytes_read += r.concurrency * r.context_tokens * plan.stages[s].kv_bytes_per_token;
  }
  r.memory_time_s =
      static_cast<double>(r.weight_bytes_read + r.kv_bytes_read) / r.memory_bandwidth_bytes_per_s;
  const int64_t a = PlainElementBytes(in.activation_dtype);
  r.allreduce_bytes = r.concurrency * c.hidden_size * a;
  r.allreduces_per_step = in.tp > 1 ? 2 * c.num_layers : 0;
  r.allreduce_time_s =
      r.allreduces_per_step * RingAllReduceSeconds(r.allreduce_bytes, in.tp,
                                                   r.link_bandwidth_bytes_per_s, r.link_latency_s);
  r.pipeline_time_s = (in.pp - 1) * (r.link_latency_s + static_cast<double>(r.allreduce_bytes) /
                                                            r.link_bandwidth_bytes_per_s);
  r.decode_step_s = r.memory_time_s + r.allreduce_time_s + r.pipeline_time_s;
  r.tokens_per_s_per_user = 1.0 / r.decode_step_s;
  r.tokens_per_s_aggregate = r.concurrency / r.decode_step_s;
  EstimatePrefill(plan, r);
  return r;
}

}  // namespace tpserve
