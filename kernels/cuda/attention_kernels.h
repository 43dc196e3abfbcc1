// Launchers for the paged KV cache: WriteKv, and our own SIMT causal grouped-query attention:
// a split-K ("flash-decoding") kernel for one-token rows plus a tiled online-softmax kernel for
// prompt tiles. The backend's default attention is FlashInfer's (flashinfer/); these serve the
// shapes it does not (README.md). Plain C++ (see device_types.h); the work lists come from the
// step (step_metadata.h), the split plan from attention_plan.h.
//
//   const AttentionPlan plan =
//       PlanAttention(num_heads, pool, step.num_decode, step.max_decode_context, num_sms);
//   scratch.resize(plan.scratch_floats);
//   TPK_LAUNCH(LaunchPagedAttention(q, num_heads, {.scale = 0.125f, .window = 4096}, pool, step,
//                                   plan, scratch, out, s));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// Stores bf16 k_new / v_new [rows, num_kv_heads, head_dim] at each row's position through its
// sequence's block table, converted to the pool's type (fp8: value / scale, RNE, saturating).
// Rows no sequence covers, and padding rows, are skipped.
LaunchResult LaunchWriteKv(const void* k_new, const void* v_new, const DeviceKvPool& pool,
                           const DeviceStep& step, void* stream);

// How one layer scores its keys (Backend::AttentionParams in device terms).
struct AttentionScores {
  float scale = 1.0f;    // scores = scale * q.k
  int64_t window = 0;    // > 0: a query at p sees keys max(0, p - window + 1)..p
  float softcap = 0.0f;  // > 0: scores = softcap * tanh(scores / softcap) before the softmax
};

// out (bf16 [rows, num_heads, head_dim]) = causal softmax(scores) v per query head (KV head
// h / group) for every row of the step's sequences (zeros for padding rows), the scores and the
// keys each row sees as `scores` says (attention_math.h); q bf16 like out. `scratch` holds
// plan.scratch_floats floats. cudaErrorInvalidValue for a negative window or cap.
// REQUIRES: AttentionFits; plan from PlanAttention for this step.
LaunchResult LaunchPagedAttention(const void* q, int64_t num_heads,
                                  const AttentionScores& scores, const DeviceKvPool& pool,
                                  const DeviceStep& step, const AttentionPlan& plan,
                                  float* scratch, void* out, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_
