// Launchers for the paged KV cache: WriteKv, and causal grouped-query attention as a split-K
// ("flash-decoding") kernel for one-token rows plus a tiled online-softmax kernel for prompt
// tiles. Plain C++ (see device_types.h); the work lists come from the step (step_metadata.h).
//
//   const AttentionPlan plan =
//       PlanAttention(num_heads, pool, step.num_decode, step.max_decode_context, num_sms);
//   scratch.resize(plan.scratch_floats);
//   TPK_LAUNCH(LaunchPagedAttention(q, num_heads, scale, pool, step, plan, scratch, out, s));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

inline constexpr int64_t kMaxAttentionHeadDim = 256;

// How the decode rows of a step are split along their keys.
struct AttentionPlan {
  int32_t num_splits = 1;      // key ranges per (decode row, KV head); 1: no combine pass
  int32_t keys_per_split = 0;  // most keys one split block holds (its shared-memory cap)
  int64_t scratch_floats = 0;  // f32 scratch the splits need (0 when num_splits == 1)
};

// Whether the kernels handle this shape: 1 <= head_dim <= kMaxAttentionHeadDim, num_heads a
// positive multiple of the pool's KV heads, and a KV group small enough for shared memory.
bool AttentionFits(int64_t num_heads, const DeviceKvPool& pool);

// The split plan for `num_decode` one-token rows of at most `context_bound` keys each (the
// step's max_decode_context, or a larger bound that keeps the plan fixed across steps, as a
// captured step needs). REQUIRES: AttentionFits. num_sms: the device's multiprocessors (splits
// fill them).
AttentionPlan PlanAttention(int64_t num_heads, const DeviceKvPool& pool, int64_t num_decode,
                            int64_t context_bound, int num_sms);

// Stores bf16 k_new / v_new [rows, num_kv_heads, head_dim] at each row's position through its
// sequence's block table, converted to the pool's type (fp8: value / scale, RNE, saturating).
// Rows no sequence covers, and padding rows, are skipped.
LaunchResult LaunchWriteKv(const void* k_new, const void* v_new, const DeviceKvPool& pool,
                           const DeviceStep& step, void* stream);

// out (bf16 [rows, num_heads, head_dim]) = causal softmax(scale * q.k) v per query head (KV
// head h / group) for every row of the step's sequences (zeros for padding rows); q bf16 like
// out. `scratch` holds
// plan.scratch_floats floats. REQUIRES: AttentionFits; plan from PlanAttention for this step.
LaunchResult LaunchPagedAttention(const void* q, int64_t num_heads, float scale,
                                  const DeviceKvPool& pool, const DeviceStep& step,
                                  const AttentionPlan& plan, float* scratch, void* out,
                                  void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ATTENTION_KERNELS_H_
