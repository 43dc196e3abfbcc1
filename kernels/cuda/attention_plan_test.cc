// Host-side checks of the attention launch plan (no GPU needed): the split count keeps every
// split within the keys one block's shared memory holds, splits only as far as 64 keys per
// split, and sizes the scratch the combine pass reads.
#include <algorithm>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_plan.h"

namespace tpserve::cuda {
namespace {

DeviceKvPool Pool(int64_t kv_heads, int64_t head_dim) {
  DeviceKvPool p;
  p.num_kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.block_size = 16;
  p.num_blocks = 1;
  return p;
}

TEST(AttentionPlan, SplitsNeverExceedTheSharedMemoryCap) {
  for (const auto& [heads, kv, hd] : {std::tuple{32, 8, 128}, std::tuple{9, 3, 64},
                                       std::tuple{5, 5, 80}, std::tuple{64, 1, 256}}) {
    const DeviceKvPool pool = Pool(kv, hd);
    ASSERT_TRUE(AttentionFits(heads, pool));
    for (int32_t decode : {1, 3, 64, 512}) {
      for (int32_t context : {1, 2, 63, 64, 65, 1000, 4096, 131072}) {
        const AttentionPlan plan = PlanAttention(heads, pool, decode, context, 132);
        ASSERT_GE(plan.num_splits, 1);
        ASSERT_GT(plan.keys_per_split, 0);
        const int64_t chunk = (context + plan.num_splits - 1) / plan.num_splits;
        EXPECT_LE(chunk, plan.keys_per_split) << heads << "/" << kv << " ctx " << context;
        // Splitting for occupancy stops at 64 keys per split (unless memory forces more).
        if (plan.num_splits > (context + plan.keys_per_split - 1) / plan.keys_per_split) {
          EXPECT_LE(plan.num_splits, std::max(1, (context + 63) / 64));
        }
        const int64_t want = plan.num_splits == 1
                                 ? 0
                                 : int64_t{decode} * heads * plan.num_splits * (hd + 2);
        EXPECT_EQ(plan.scratch_floats, want);
      }
    }
  }
}

TEST(AttentionPlan, OneLongDecodeRowFillsTheGpu) {
  const AttentionPlan plan = PlanAttention(32, Pool(8, 128), 1, 8192, 132);
  EXPECT_GE(plan.num_splits * 8, 132);  // at least one block per multiprocessor
}

TEST(AttentionPlan, ScratchBoundCoversEveryStepWithinTheLimits) {
  // The memory plan reserves MaxAttentionScratchBytes for the longest context; every step with
  // fewer rows or shorter contexts must fit in it (a context shorter than the bound never splits
  // more: checked here, not assumed).
  for (const auto& [heads, kv, hd] : {std::tuple{32, 8, 128}, std::tuple{9, 3, 64},
                                       std::tuple{5, 5, 80}, std::tuple{16, 1, 128}}) {
    const DeviceKvPool pool = Pool(kv, hd);
    const int64_t bound = MaxAttentionScratchBytes(heads, pool, 64, 8192, 132);
    int64_t largest = 0;
    for (int32_t decode = 1; decode <= 64; ++decode) {
      for (int32_t context = 1; context <= 8192; context += 37) {
        const int64_t bytes = PlanAttention(heads, pool, decode, context, 132).scratch_floats * 4;
        ASSERT_LE(bytes, bound) << heads << "/" << kv << " rows " << decode << " ctx " << context;
        largest = std::max(largest, bytes);
      }
    }
    EXPECT_GT(largest, 0);  // the loop reached splitting steps: the check above had teeth
  }
}

TEST(AttentionPlan, RefusesShapesTheKernelsDoNotHandle) {
  EXPECT_FALSE(AttentionFits(32, Pool(8, 257)));  // head_dim above 256
  EXPECT_FALSE(AttentionFits(30, Pool(8, 128)));  // heads not a multiple of KV heads
  EXPECT_FALSE(AttentionFits(32, Pool(0, 128)));
  EXPECT_TRUE(AttentionFits(5, Pool(5, 80)));
}

}  // namespace
}  // namespace tpserve::cuda
