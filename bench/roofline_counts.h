// The work a Llama step must do, counted once for the GPU benchmark's rooflines: floating-point
// operations of a prefill, and the fewest bytes a decode step must read from device memory.
//
//   double flops = PrefillFlops(config, 2048, /*logit_rows=*/1);          // ~2.97e13 for 8B
//   double bytes = DecodeBytesRead(config, footprint.weight_bytes_by_role,
//                                  {.batch = 1, .context_tokens = 1024, .kv_elem_bytes = 2});
//
// Conventions (what docs/PERFORMANCE.md quotes):
//   prefill FLOPs = 2 * linear_params * tokens            (q, k, v, o, gate, up, down; a MoE
//                                                          layer's router, top-k experts and
//                                                          shared expert instead of the MLP:
//                                                          ModelSpec::NumActiveLinearParameters)
//                 + 2 * vocab * hidden * logit_rows        (the LM head, only rows with logits)
//                 + 4 * layers * heads * head_dim * tokens * (tokens + 1) / 2
//                                                          (causal QK^T and PV, each query
//                                                           against itself and the ones before)
//   decode bytes  = every weight byte but the embedding table (of the experts, the share the
//                   batch's tokens choose: ModelSpec::ExpertReadFraction), + one embedding row
//                   per sequence,
//                 + per sequence and layer, K and V of every position it attends to
//                 (activations, KV writes and logits are left out: under 0.1% at these shapes).
// Thread-safe: pure functions.
#ifndef TPSERVE_BENCH_ROOFLINE_COUNTS_H_
#define TPSERVE_BENCH_ROOFLINE_COUNTS_H_

#include <array>
#include <cstdint>

#include "model/config.h"
#include "model/weight_formats.h"

namespace tpserve {

// Prefill of one sequence of `tokens` tokens from position 0, `logit_rows` rows of logits.
double PrefillFlops(const ModelSpec& config, int64_t tokens, int64_t logit_rows);

struct DecodeShape {
  int64_t batch = 1;           // sequences, one new token each
  int64_t context_tokens = 0;  // positions each new token attends to (its own included)
  int64_t kv_elem_bytes = 2;   // bytes per K or V element in the cache
};

// `role_bytes`: the bytes the rank holds per tensor role (MemoryFootprint::weight_bytes_by_role).
double DecodeBytesRead(const ModelSpec& config,
                       const std::array<int64_t, kNumTensorRoles>& role_bytes,
                       const DecodeShape& shape);

}  // namespace tpserve

#endif  // TPSERVE_BENCH_ROOFLINE_COUNTS_H_
