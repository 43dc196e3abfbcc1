#include "coordinator/block_manager.h"

#include <set>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

void ExpectInvariant(const BlockManager& m) {
  EXPECT_EQ(m.num_free_blocks() + m.num_used_blocks(), m.num_blocks());
}

TEST(BlockManager, GrowsBlockByBlockAndFreesEverything) {
  BlockManager m(/*num_blocks=*/4, /*block_size_tokens=*/16);
  ASSERT_TRUE(m.Grow(7, 17).ok());  // 2 blocks
  EXPECT_EQ(m.BlockTable(7).size(), 2u);
  EXPECT_EQ(m.num_free_blocks(), 2);
  ASSERT_TRUE(m.Grow(7, 15).ok());  // 32 tokens: still 2 blocks
  EXPECT_EQ(m.BlockTable(7).size(), 2u);
  ASSERT_TRUE(m.Grow(7, 1).ok());  // 33 tokens: 3 blocks
  EXPECT_EQ(m.BlockTable(7).size(), 3u);
  EXPECT_EQ(m.NumTokens(7), 33);
  ExpectInvariant(m);
  m.Free(7);
  EXPECT_EQ(m.num_free_blocks(), 4);
  EXPECT_FALSE(m.Contains(7));
  m.Free(7);  // double free of a cancelled sequence is harmless
  EXPECT_EQ(m.num_free_blocks(), 4);
}

TEST(BlockManager, RefusesWhatDoesNotFitAndChangesNothing) {
  BlockManager m(3, 4);
  ASSERT_TRUE(m.Grow(1, 8).ok());
  absl::Status s = m.Grow(2, 5);  // needs 2, 1 free
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "KV cache: sequence 2 needs 2 more blocks of 4 tokens, 1 of 3 are free");
  EXPECT_FALSE(m.Contains(2));
  EXPECT_EQ(m.num_free_blocks(), 1);
  EXPECT_TRUE(m.CanGrow(2, 4));
  ExpectInvariant(m);
}

TEST(BlockManager, NoBlockIsEverOwnedTwice) {
  BlockManager m(64, 8);
  for (int64_t seq = 0; seq < 20; ++seq) {
    if (m.CanGrow(seq, 3 * seq + 1)) ASSERT_TRUE(m.Grow(seq, 3 * seq + 1).ok());
    if (seq % 3 == 0) m.Free(seq / 2);
    std::set<int32_t> owned;
    size_t total = 0;
    for (int64_t s = 0; s <= seq; ++s) {
      for (int32_t b : m.BlockTable(s)) {
        owned.insert(b);
        ++total;
      }
    }
    EXPECT_EQ(owned.size(), total) << "after step " << seq;
    EXPECT_EQ(static_cast<int32_t>(total), m.num_used_blocks());
    ExpectInvariant(m);
  }
}

}  // namespace
}  // namespace tpserve
