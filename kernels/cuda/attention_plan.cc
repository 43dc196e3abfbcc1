#include "kernels/cuda/attention_plan.h"

#include <algorithm>

namespace tpserve::cuda {

int64_t KeysCap(int64_t group, int64_t head_dim) {
  for (int64_t cap : {1024, 512, 256, 128, 64, 32}) {
    if (DecodeLayout(group, head_dim, cap).bytes <= kDecodeSmemBudget) return cap;
  }
  return 0;
}

bool AttentionFits(int64_t num_heads, const DeviceKvPool& pool) {
  if (pool.head_dim < 1 || pool.head_dim > kMaxAttentionHeadDim || pool.num_kv_heads < 1 ||
      num_heads < 1 || num_heads % pool.num_kv_heads != 0 || pool.block_size < 1) {
    return false;
  }
  return KeysCap(num_heads / pool.num_kv_heads, pool.head_dim) > 0;
}

AttentionPlan PlanAttention(int64_t num_heads, const DeviceKvPool& pool, int64_t num_decode,
                            int64_t context_bound, int num_sms) {
  AttentionPlan plan;
  const int64_t group = num_heads / pool.num_kv_heads;
  plan.keys_per_split = static_cast<int32_t>(KeysCap(group, pool.head_dim));
  if (num_decode == 0 || context_bound <= 0) return plan;
  const int64_t context = context_bound;
  // Enough splits that no split holds more keys than shared memory, and, for few decode rows,
  // about two waves of blocks over the GPU, but never under 64 keys per split.
  const int64_t needed = (context + plan.keys_per_split - 1) / plan.keys_per_split;
  const int64_t blocks = num_decode * pool.num_kv_heads;
  const int64_t for_occupancy = (2 * static_cast<int64_t>(num_sms) + blocks - 1) / blocks;
  const int64_t most = std::max<int64_t>(1, (context + 63) / 64);
  plan.num_splits = static_cast<int32_t>(std::max(needed, std::min(for_occupancy, most)));
  if (plan.num_splits > 1) {
    plan.scratch_floats =
        num_decode * num_heads * plan.num_splits * (pool.head_dim + 2);
  }
  return plan;
}

int64_t MaxAttentionScratchBytes(int64_t num_heads, const DeviceKvPool& pool,
                                 int64_t max_decode_rows, int64_t max_context, int num_sms) {
  // Splits never shrink as the context grows, so the longest context is the worst; over the
  // row count the product rows x splits is not monotonic (fewer rows split more), so try all.
  int64_t most = 0;
  for (int64_t rows = 1; rows <= max_decode_rows; ++rows) {
    most = std::max(most, PlanAttention(num_heads, pool, rows, max_context, num_sms)
                              .scratch_floats);
  }
  return most * 4;
}

}  // namespace tpserve::cuda
