#include "kernels/cuda/mla_plan.h"

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cuda/step_metadata.h"
#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

TEST(MlaPlan, LatentPoolIsOneHeadOf576) {
  EXPECT_TRUE(IsLatentPool(1, 576));
  EXPECT_FALSE(IsLatentPool(2, 576));  // not a latent entry per token
  EXPECT_FALSE(IsLatentPool(1, 512));  // no rope part: not what is instantiated
  EXPECT_FALSE(IsLatentPool(1, 128));
}

TEST(MlaPlan, ClusterFollowsTheAveragePackedQueryLength) {
  const std::vector<int32_t> decodes = {0, 1, 2, 3, 4};  // four one-row requests
  EXPECT_EQ(MlaClusterSize(decodes.data(), 4, 16), 1);   // 16 packed rows each
  EXPECT_EQ(MlaClusterSize(decodes.data(), 4, 64), 1);   // 64: not above 64
  EXPECT_EQ(MlaClusterSize(decodes.data(), 4, 128), 2);  // DeepSeek-V3 at TP 1
  const std::vector<int32_t> mixed = {0, 1, 9};          // (1 + 8) * 16 / 2 = 72
  EXPECT_EQ(MlaClusterSize(mixed.data(), 2, 16), 2);
}

TEST(MlaPlan, WorkBoundCountsTilesAndClusters) {
  // 16 heads: a decode row is 16 packed rows (one tile of 64 with cluster 1); a
  // 100-row prompt is 1,600 packed rows. Cluster 2 (average (16 + 1600) / 2 =
  // 808): tiles of 128, 1 + 13 = 14 tiles, plus 132 / 2 = 66 clusters.
  const std::vector<int32_t> qo = {0, 1, 101};
  EXPECT_EQ(MlaWorkBound(qo.data(), 2, 16, 132), 14 + 66);
  // Decodes only, 8 heads: cluster 1, one tile each, plus 132 clusters.
  const std::vector<int32_t> decodes = {0, 1, 2, 3};
  EXPECT_EQ(MlaWorkBound(decodes.data(), 3, 8, 132), 3 + 132);
  EXPECT_EQ(MlaWorkBound(decodes.data(), 0, 8, 132), 0);
}

TEST(MlaPlan, WorkBoundWithinLimitsCoversEveryBatch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t heads = std::vector<int64_t>{1, 8, 16, 32, 128}[rng() % 5];
    const int64_t sms = std::vector<int64_t>{66, 114, 132}[rng() % 3];
    const int64_t max_tokens = 1 + rng() % 4096, max_seqs = 1 + rng() % 256;
    const int64_t n = 1 + rng() % std::min(max_tokens, max_seqs);
    // n requests of at least one row each, at most max_tokens rows in all.
    std::vector<int32_t> qo = {0};
    int64_t left = max_tokens - n;
    for (int64_t b = 0; b < n; ++b) {
      const int64_t extra = left > 0 ? rng() % (left + 1) : 0;
      left -= extra;
      qo.push_back(qo.back() + 1 + static_cast<int32_t>(extra));
    }
    EXPECT_LE(MlaWorkBound(qo.data(), n, heads, sms),
              MlaWorkBoundWithin(max_tokens, max_seqs, heads, sms))
        << "heads " << heads << " sms " << sms << " tokens " << max_tokens;
  }
  // DeepSeek-V3: 128 heads at TP 1, an 8,192-token step of up to 256 sequences
  // on 132 SMs: 16,384 + 256 + 132 tiles and clusters at most, over MLAPlan's
  // 16,384.
  EXPECT_GT(MlaWorkBoundWithin(8192, 256, 128, 132), kMlaMaxWorks);
  // At TP 8 (16 heads) the same step fits: 2,048 + 256 + 132.
  EXPECT_EQ(MlaWorkBoundWithin(8192, 256, 16, 132), 2048 + 256 + 132);
}

TEST(MlaPlan, WorkspaceOnAnH100) {
  const MlaWorkspaceBytes w = MlaWorkspaceFor(132);
  // Eleven int arrays of 16,384 and five of 132, each padded by up to 15 bytes.
  EXPECT_EQ(w.int_bytes, 11 * (65536 + 15) + 5 * (528 + 15));
  // Partials: 2 x 132 x 64 rows of 512 bf16, and 2 x 132 x 64 f32 log-sum-exps.
  EXPECT_EQ(w.float_bytes, (2 * 8448 * 512 * 2 + 15) + (2 * 8448 * 4 + 15));
}

// The step's FlashInfer arrays, read as FlashInfer's MLA kernel reads them
// (page kv_indices[kv_indptr[b] + k / page], keys [0, kv_len - qo_len + i] for
// row i), give every row exactly the keys of its own sequence up to its own
// position, in its own blocks.
TEST(MlaPlan, StepArraysAddressEachRowsKeysInItsOwnBlocks) {
  constexpr int32_t kPage = 16;
  const std::vector<int32_t> table_a = {7, 3, 11}, table_b = {5}, table_c = {2, 9, 4, 8};
  // A decode at position 37, a prompt chunk of 20 rows from position 16, a
  // padding row, and a fresh 3-row prompt.
  const std::vector<AttentionSequence> seqs = {{0, 1, 37, table_a},
                                               {1, 20, 16, table_c},
                                               {21, 1, 0, {}, /*padding=*/true},
                                               {22, 3, 0, table_b}};
  std::vector<int32_t> positions = {37};
  for (int32_t i = 0; i < 20; ++i) positions.push_back(16 + i);
  positions.push_back(0);
  for (int32_t i = 0; i < 3; ++i) positions.push_back(i);
  const std::vector<int32_t> ids(positions.size(), 1);
  const PackedStep p = PackStep(StepInputs{ids, positions, seqs, {}});
  ASSERT_TRUE(p.counts.fi_rows_in_order);
  const int32_t *qo = p.words.data() + p.offset_fi_qo_indptr;
  const int32_t *kv_indptr = p.words.data() + p.offset_fi_kv_indptr;
  const int32_t *kv_len = p.words.data() + p.offset_fi_kv_len;
  const int32_t *pages = p.words.data() + p.offset_tables;
  ASSERT_EQ(p.counts.num_seqs, 4);
  for (int32_t b = 0; b < 4; ++b) {
    const AttentionSequence &s = seqs[b];
    const int32_t qo_len = qo[b + 1] - qo[b];
    ASSERT_EQ(qo[b], s.first_row);
    ASSERT_EQ(qo_len, s.num_query_tokens);
    if (s.padding) {  // one key on page 0 of its one-word table; the output is
                      // zeroed
      EXPECT_EQ(kv_len[b], 1);
      EXPECT_EQ(pages[kv_indptr[b]], 0);
      continue;
    }
    EXPECT_EQ(kv_len[b], s.start_position + s.num_query_tokens);
    for (int32_t i = 0; i < qo_len; ++i) {
      // The causal bound of row i is the row's own position.
      const int32_t last_key = kv_len[b] - qo_len + i;
      EXPECT_EQ(last_key, positions[s.first_row + i]);
      for (int32_t k = 0; k <= last_key; ++k) {
        ASSERT_EQ(pages[kv_indptr[b] + k / kPage], s.block_table[k / kPage])
            << "request " << b << " key " << k;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda
