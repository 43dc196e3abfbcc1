// Host-side checks of the attention launch plan (no GPU needed): the split count keeps every
// split within the keys one block's shared memory holds, splits only as far as 64 keys per
// split, and sizes the scratch the combine pass reads; and the plans of the batches real steps
// make (//kernels/testing's RunStepBatchParity runs them on a GPU): Llama 3.1 405B's group of
// 16 query heads over one KV head at TP 8, and decodes first then a chunk in one step.
#include <algorithm>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/step_metadata.h"

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

// 128 query heads over 8 KV heads at TP 8: one KV head and 16 query heads of 128 per rank.
// A decode block holds the group's 16 queries (8 KiB), their scores for 1024 keys (64 KiB),
// the keys' slots (8 KiB) and the softmax stats (128 B): 82,048 bytes of the 96 KiB budget.
TEST(AttentionPlan, Llama405bAtTp8SixteenQueryHeadsOverOneKvHead) {
  const DeviceKvPool pool = Pool(1, 128);
  EXPECT_TRUE(AttentionFits(16, pool));
  EXPECT_EQ(DecodeLayout(16, 128, 1024).bytes, 82048);
  EXPECT_EQ(KeysCap(16, 128), 1024);
  // One decode of 32K keys: two waves of blocks over 132 multiprocessors, 125 keys a split.
  const AttentionPlan one = PlanAttention(16, pool, 1, 32768, 132);
  EXPECT_EQ(one.num_splits, 264);
  EXPECT_EQ(one.keys_per_split, 1024);
  EXPECT_EQ(one.scratch_floats, 16 * 264 * (128 + 2));
  // The most scratch over every step of up to 256 decode rows of 32K keys: 256 rows split into
  // 32 (the shared-memory floor), 256 x 16 heads x 32 x 130 floats.
  EXPECT_EQ(MaxAttentionScratchBytes(16, pool, 256, 32768, 132), int64_t{256} * 16 * 32 * 130 * 4);
}

std::vector<int32_t> Table(int64_t tokens, int32_t first) {
  std::vector<int32_t> t((tokens + 15) / 16);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Decodes first, then a chunk (the scheduler's order): the SIMT kernels get the three decodes
// (split for the longest context) and the chunk's two 32-row tiles; FlashInfer's request list
// starts with three one-row requests, the ones its plan sends to FA2 (flashinfer_attention.cc
// counts them from fi_qo_indptr), the 57-row chunk going to FA3.
TEST(AttentionPlan, DecodesFirstThenAChunkSplitIntoDecodeAndPrefillWork) {
  const std::vector<int32_t> a = Table(701, 0), b = Table(41, 100), c = Table(3001, 200),
                             d = Table(157, 400);
  const std::vector<AttentionSequence> seqs = {
      {0, 1, 700, a}, {1, 1, 40, b}, {2, 1, 3000, c}, {3, 57, 100, d}};
  const PackedStep p = PackStep(StepInputs{{}, {}, seqs, {}});
  const DeviceStep s = p.Resolve(p.words.data());
  ASSERT_TRUE(s.fi_rows_in_order);
  EXPECT_EQ(std::vector<int32_t>(s.fi_qo_indptr, s.fi_qo_indptr + 5),
            (std::vector<int32_t>{0, 1, 2, 3, 60}));
  EXPECT_EQ(std::vector<int32_t>(s.fi_kv_len, s.fi_kv_len + 4),
            (std::vector<int32_t>{701, 41, 3001, 157}));
  EXPECT_EQ(std::vector<int32_t>(s.decode_seqs, s.decode_seqs + s.num_decode),
            (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(s.max_decode_context, 3001);
  EXPECT_EQ(std::vector<int32_t>(s.prefill_tiles, s.prefill_tiles + 2 * s.num_prefill_tiles),
            (std::vector<int32_t>{3, 0, 3, 32}));
  // The decode rows' plan at 405B TP 8: 3 splits would do for shared memory, occupancy asks
  // for 88 a row, 64 keys a split caps it at 47.
  const AttentionPlan plan = PlanAttention(16, Pool(1, 128), s.num_decode, s.max_decode_context,
                                           132);
  EXPECT_EQ(plan.num_splits, 47);
  EXPECT_EQ(plan.scratch_floats, 3 * 16 * 47 * 130);
}

// A padding row among the decodes is a one-row request too (zeros out), so FA2 still takes
// the whole leading group: requests 0-2 one row each, then a chunk and a prompt.
TEST(AttentionPlan, APaddingRowAmongTheDecodesStaysInTheDecodeGroup) {
  const std::vector<int32_t> a = Table(41, 0), c = Table(1501, 10), d = Table(233, 200),
                             e = Table(7, 300);
  const std::vector<AttentionSequence> seqs = {
      {0, 1, 40, a}, {1, 1, 0, {}, true}, {2, 1, 1500, c}, {3, 33, 200, d}, {36, 7, 0, e}};
  const PackedStep p = PackStep(StepInputs{{}, {}, seqs, {}});
  const DeviceStep s = p.Resolve(p.words.data());
  ASSERT_TRUE(s.fi_rows_in_order);
  EXPECT_EQ(std::vector<int32_t>(s.fi_qo_indptr, s.fi_qo_indptr + 6),
            (std::vector<int32_t>{0, 1, 2, 3, 36, 43}));
  EXPECT_EQ(s.num_decode, 3);
  EXPECT_EQ(s.num_padding, 1);
  EXPECT_EQ(s.max_decode_context, 1501);  // the padding row's one key does not count
}

}  // namespace
}  // namespace tpserve::cuda
