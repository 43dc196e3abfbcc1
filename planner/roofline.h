// Roofline speed estimate for a memory plan: how fast decode and prefill can be at best on
// the planned device, with every constant echoed in the result so the output shows its work.
//
//   Roofline r = EstimateRoofline(plan, RooflineAssumptions{});
//   printf("%.1f tok/s per user\n", r.tokens_per_s_per_user);
//
// Decode (one step = one token for each of `concurrency` users, stages run one after another):
//   bytes read per rank = weights on the rank (embedding lookups excluded)
//                       + concurrency * context * kv_bytes_per_token
//   step = sum over stages of bytes / (memory_bandwidth * decode_efficiency)
//        + collectives (tp > 1), each latency + its bytes' share over link_bandwidth:
//            2 * num_layers row-parallel reductions (o, down), the engine's mode:
//              all-reduce (default): ring, 2 (tp-1)/tp * concurrency * hidden * a bytes
//              --deterministic_tp: all-gather of C chunks of f32 partial sums,
//                                  (tp-1)/tp * C * concurrency * hidden * 4 bytes
//            with --expert_parallel, a MoE layer's down reduction is instead an all-to-all
//              of the slots' f32 outputs (each rank sends what it ran for the other ranks'
//              rows: concurrency * k * (tp-1)/tp^2 slots of C * hidden * 4 bytes, experts
//              evenly loaded), latency + those bytes over the link, then an all-gather of the
//              combined rows (concurrency * hidden * a)
//            1 all-reduce of the embedding rows (concurrency * hidden * a)
//            1 all-gather of the logits (concurrency * vocab_rows_per_rank * 4 per rank)
//        + (pp - 1) * (latency + concurrency * hidden * a / link_bandwidth)
// Prefill (one prompt of P tokens alone):
//   FLOPs = 2 * layer_params * P + 2 * vocab * hidden (logits of the last token only)
//         + 2 * num_layers * num_heads * head_dim * P^2 (causal QK^T and PV)
//   time  = FLOPs / (tp * peak_flops * prefill_efficiency) + 2 * num_layers row-parallel
//           reductions of P tokens (all-reduce of P * hidden * a bytes, or --deterministic_tp's
//           all-gather of C * P * hidden * 4; a MoE layer's expert-parallel all-to-all and
//           all-gather as in decode, for P tokens)
// Thread-safe: pure function.
#ifndef TPSERVE_PLANNER_ROOFLINE_H_
#define TPSERVE_PLANNER_ROOFLINE_H_

#include <cstdint>

#include "planner/memory_plan.h"

namespace tpserve {

struct RooflineAssumptions {
  // Fraction of peak FLOP/s a large prefill GEMM reaches; 0.5 is a typical serving-engine MFU.
  double prefill_efficiency = 0.5;
  // Fraction of the memory bandwidth decode's kernels reach (1 = the roofline). Measured, not
  // assumed: bench/model_bench prints it for one CPU rank as "= N%" of the DRAM ceiling.
  double decode_efficiency = 1.0;
  int64_t prompt_tokens = 0;   // 0: max_context_tokens
  int64_t context_tokens = 0;  // KV length each user reads per decode step; 0: max_context_tokens
  int64_t concurrency = 0;     // users decoding together; 0: target_concurrent_sequences
};

struct Roofline {
  // The constants used, echoed.
  double memory_bandwidth_bytes_per_s = 0;
  double peak_flops = 0;
  double prefill_efficiency = 0;
  double decode_efficiency = 0;
  double link_bandwidth_bytes_per_s = 0;
  double link_latency_s = 0;
  int64_t concurrency = 0;
  int64_t context_tokens = 0;
  int64_t prompt_tokens = 0;
  // Decode, per step.
  int64_t weight_bytes_read = 0;  // one rank, all stages summed
  int64_t kv_bytes_read = 0;      // one rank, all stages summed
  const char* reduction = "";        // "all-reduce" or "chunked all-gather"
  int64_t reduction_chunks = 1;      // C above (1 for all-reduce)
  int64_t collectives_per_step = 0;  // row-parallel reductions + embedding + logits
  int64_t row_parallel_bytes = 0;    // payload of one row-parallel reduction, all ranks
  int64_t logits_gather_bytes = 0;   // payload of the logits gather to the sampling rank
  // --expert_parallel: bytes one rank sends in a MoE layer's all-to-all (0 without it).
  int64_t expert_all_to_all_bytes = 0;
  double memory_time_s = 0;
  double collective_time_s = 0;
  double pipeline_time_s = 0;
  double decode_step_s = 0;
  double tokens_per_s_per_user = 0;
  double tokens_per_s_aggregate = 0;
  // Prefill.
  double prefill_flops = 0;  // all ranks together
  double prefill_compute_s = 0;
  double prefill_allreduce_s = 0;
  double prefill_s = 0;  // time to first token for one prompt alone
};

Roofline EstimateRoofline(const MemoryPlan& plan, const RooflineAssumptions& assumptions);

// A MoE layer's expert-parallel exchange for `tokens` tokens: the all-to-all in which each rank
// sends `AllToAllBytesPerRank` (latency + bytes / bandwidth: every rank sends and receives at
// once) and the all-gather of the combined rows (tokens * hidden * activation bytes).
int64_t ExpertAllToAllBytesPerRank(const PlanInputs& in, int64_t tokens, int64_t chunks);
double ExpertParallelSeconds(const PlanInputs& in, int64_t tokens, int64_t chunks,
                             double bandwidth_bytes_per_s, double latency_s);

// One ring all-reduce of `bytes` over `ranks`: latency + 2 (ranks-1)/ranks * bytes / bandwidth;
// 0 for a single rank.
double RingAllReduceSeconds(int64_t bytes, int ranks, double bandwidth_bytes_per_s,
                            double latency_s);
// One ring all-gather whose result has `bytes`: latency + (ranks-1)/ranks * bytes / bandwidth;
// 0 for a single rank.
double RingAllGatherSeconds(int64_t bytes, int ranks, double bandwidth_bytes_per_s,
                            double latency_s);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_ROOFLINE_H_
