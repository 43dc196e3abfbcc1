#include "coordinator/block_manager.h"

#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

void ExpectInvariant(const BlockManager& m) {
  EXPECT_EQ(m.num_free_blocks() + m.num_used_blocks(), m.num_blocks());
}

// Tokens first..first+n-1.
std::vector<int32_t> Range(int32_t first, int32_t n) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back(first + i);
  return ids;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What the scheduler does for a new sequence whose whole prompt then runs in one step: take the
// cached prefix, allocate the rest, mark everything computed. Returns the cached token count.
int64_t RunPrompt(BlockManager& m, int64_t seq_id, const std::vector<int32_t>& prompt) {
  const PrefixMatch hit = m.MatchPrefix(prompt);
  absl::Status s = m.Admit(seq_id, hit, static_cast<int64_t>(prompt.size()) - hit.num_tokens);
  EXPECT_TRUE(s.ok()) << s;
  m.MarkComputed(seq_id, prompt);
  return hit.num_tokens;
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
    if (m.CanGrow(seq, 3 * seq + 1)) {
      ASSERT_TRUE(m.Grow(seq, 3 * seq + 1).ok());
    }
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

TEST(PrefixCache, SharedPrefixHitsThroughTheHashChain) {
  BlockManager m(/*num_blocks=*/16, /*block_size_tokens=*/4);
  const std::vector<int32_t> system = Range(100, 12);  // 3 full blocks
  EXPECT_EQ(RunPrompt(m, 1, Concat(system, Range(500, 2))), 0);
  EXPECT_EQ(RunPrompt(m, 2, Concat(system, Range(600, 5))), 12);
  const std::vector<int32_t>& t1 = m.BlockTable(1);
  const std::vector<int32_t>& t2 = m.BlockTable(2);
  ASSERT_EQ(t2.size(), 5u);
  EXPECT_EQ(std::vector<int32_t>(t2.begin(), t2.begin() + 3),
            std::vector<int32_t>(t1.begin(), t1.begin() + 3));
  EXPECT_NE(t2[3], t1[3]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.RefCount(t1[i]), 2) << i;
  EXPECT_EQ(m.RefCount(t1[3]), 1);
  EXPECT_EQ(m.NumTokens(2), 17);
  EXPECT_EQ(m.num_used_blocks(), 4 + 2);
}

TEST(PrefixCache, OneDifferentTokenEndsTheMatchForEveryLaterBlock) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = Range(100, 13);
  RunPrompt(m, 1, prompt);
  std::vector<int32_t> first_differs = prompt;
  first_differs[1] = 7;
  EXPECT_EQ(m.MatchPrefix(first_differs).num_tokens, 0);
  // Blocks 2 and 3 hold the same tokens as the cached ones, but after another block 1: the key
  // chains the whole prefix, so they miss.
  std::vector<int32_t> second_differs = prompt;
  second_differs[5] = 7;
  const PrefixMatch hit = m.MatchPrefix(second_differs);
  EXPECT_EQ(hit.num_tokens, 4);
  ASSERT_EQ(hit.blocks.size(), 1u);
  EXPECT_EQ(hit.blocks[0], m.BlockTable(1)[0]);
  EXPECT_EQ(m.MatchPrefix(prompt).num_tokens, 12);
}

TEST(PrefixCache, APartialTailBlockIsNeverShared) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = Range(100, 14);  // 3 full blocks + 2 tokens
  RunPrompt(m, 1, prompt);
  // A longer prompt that continues the same tokens still matches only the 3 full blocks.
  const std::vector<int32_t> longer = Range(100, 20);
  EXPECT_EQ(RunPrompt(m, 2, longer), 12);
  EXPECT_NE(m.BlockTable(2)[3], m.BlockTable(1)[3]);
  EXPECT_EQ(m.RefCount(m.BlockTable(1)[3]), 1);
}

TEST(PrefixCache, AtLeastOneTokenIsLeftToCompute) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = Range(100, 12);  // exactly 3 full blocks, all cached
  RunPrompt(m, 1, prompt);
  // floor((12 - 1) / 4) = 2 blocks: the last block is computed again, so the sequence writes
  // the KV of token 11 into a block of its own and gets its logits.
  EXPECT_EQ(m.MatchPrefix(prompt).num_tokens, 8);
  EXPECT_EQ(m.MatchPrefix(Range(100, 13)).num_tokens, 12);
  EXPECT_EQ(m.MatchPrefix(Range(100, 4)).num_tokens, 0);
  EXPECT_EQ(m.MatchPrefix(Range(100, 5)).num_tokens, 4);
  EXPECT_EQ(m.MatchPrefix({}).num_tokens, 0);
}

TEST(PrefixCache, ReferenceCountsKeepSharedBlocksUntilTheLastSequenceLeaves) {
  BlockManager m(16, 4);
  const std::vector<int32_t> prompt = Range(100, 10);  // 2 full blocks + 2 tokens
  RunPrompt(m, 1, prompt);
  RunPrompt(m, 2, prompt);
  const std::vector<int32_t> shared(m.BlockTable(1).begin(), m.BlockTable(1).begin() + 2);
  EXPECT_EQ(m.num_used_blocks(), 4);
  m.Free(1);
  EXPECT_EQ(m.RefCount(shared[0]), 1);
  EXPECT_EQ(m.RefCount(shared[1]), 1);
  EXPECT_EQ(m.num_used_blocks(), 3);  // seq 1's private tail block is free again
  EXPECT_EQ(m.num_cached_blocks(), 0);
  m.Free(2);
  EXPECT_EQ(m.RefCount(shared[0]), 0);
  EXPECT_EQ(m.num_cached_blocks(), 2);  // the shared blocks, evictable, still hold their KV
  EXPECT_EQ(m.num_free_blocks(), 16);
  EXPECT_EQ(RunPrompt(m, 3, prompt), 8);
  EXPECT_EQ(m.BlockTable(3)[0], shared[0]);
  EXPECT_EQ(m.num_cached_blocks(), 0);
}

TEST(PrefixCache, EvictsLeastRecentlyReleasedTailFirstAndDropsTheKey) {
  BlockManager m(6, 4);
  const std::vector<int32_t> x = Range(100, 9), y = Range(200, 9);  // 2 full blocks + 1 each
  RunPrompt(m, 1, x);  // blocks 0 1 2 (LIFO free list hands out 0 first)
  RunPrompt(m, 2, y);  // blocks 3 4 5
  ASSERT_EQ(m.BlockTable(1), (std::vector<int32_t>{0, 1, 2}));
  ASSERT_EQ(m.BlockTable(2), (std::vector<int32_t>{3, 4, 5}));
  m.Free(1);  // LRU: 1 0   free: 2
  m.Free(2);  // LRU: 1 0 4 3   free: 2 5
  EXPECT_EQ(m.num_cached_blocks(), 4);
  ASSERT_TRUE(m.Grow(3, 12).ok());  // free blocks 5 and 2 first, then x's tail
  EXPECT_EQ(m.BlockTable(3), (std::vector<int32_t>{5, 2, 1}));
  EXPECT_EQ(m.MatchPrefix(x).num_tokens, 4);  // x's head survives its evicted tail
  ASSERT_TRUE(m.Grow(3, 4).ok());
  EXPECT_EQ(m.BlockTable(3).back(), 0);
  EXPECT_EQ(m.MatchPrefix(x).num_tokens, 0);  // block 0's key went with it
  EXPECT_EQ(m.MatchPrefix(y).num_tokens, 8);
  EXPECT_EQ(m.num_cached_blocks(), 2);
  ExpectInvariant(m);
}

TEST(PrefixCache, RevivedBlocksStopCountingAsFree) {
  BlockManager m(4, 4);
  RunPrompt(m, 1, Range(100, 9));  // 2 cached blocks once freed
  m.Free(1);
  EXPECT_EQ(m.num_free_blocks(), 4);
  // 8 cached tokens + 9 more need 3 new blocks: 4 blocks count as free, but reviving the 2
  // cached ones leaves 2.
  const std::vector<int32_t> prompt = Range(100, 17);
  const PrefixMatch hit = m.MatchPrefix(prompt);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_FALSE(m.CanAdmit(hit, 9));
  absl::Status s = m.Admit(2, hit, 9);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "KV cache: sequence 2 needs 3 more blocks of 4 tokens after 2 cached ones, 4 of 4 "
            "are free");
  EXPECT_FALSE(m.Contains(2));
  EXPECT_EQ(m.num_cached_blocks(), 2);
  EXPECT_TRUE(m.CanAdmit(hit, 8));  // 2 new blocks
  ExpectInvariant(m);
}

TEST(PrefixCache, OffMeansNoMatchesAndNothingCached) {
  BlockManager m(8, 4, /*enable_prefix_caching=*/false);
  RunPrompt(m, 1, Range(100, 9));
  EXPECT_EQ(m.MatchPrefix(Range(100, 9)).num_tokens, 0);
  m.Free(1);
  EXPECT_EQ(m.num_cached_blocks(), 0);
  EXPECT_EQ(m.num_free_blocks(), 8);
}

// Sequences sharing prefixes come and go; after every call the blocks referenced by live tables,
// counted from the tables, plus the free ones make up the cache, and each block's reference
// count is the number of tables that hold it.
TEST(PrefixCache, CountsMatchTheTablesUnderChurn) {
  BlockManager m(40, 4);
  std::set<int64_t> live;
  auto check = [&](int64_t step) {
    std::map<int32_t, int32_t> refs;
    for (int64_t id : live) {
      for (int32_t b : m.BlockTable(id)) ++refs[b];
    }
    EXPECT_EQ(static_cast<int32_t>(refs.size()) + m.num_free_blocks(), m.num_blocks())
        << "step " << step;
    for (const auto& [b, n] : refs) EXPECT_EQ(m.RefCount(b), n) << "block " << b;
  };
  for (int64_t id = 0; id < 60; ++id) {
    // Three system prompts of 8, 12 and 16 tokens, then a suffix of 1..7 tokens of this id.
    std::vector<int32_t> prompt =
        Concat(Range(1000 * (1 + id % 3), 8 + 4 * (id % 3)), Range(10000 + 10 * id, 1 + id % 7));
    const PrefixMatch hit = m.MatchPrefix(prompt);
    const int64_t n = static_cast<int64_t>(prompt.size()) - hit.num_tokens;
    if (m.CanAdmit(hit, n)) {
      ASSERT_TRUE(m.Admit(id, hit, n).ok());
      m.MarkComputed(id, prompt);
      live.insert(id);
      if (id >= 6) {
        EXPECT_GT(hit.num_tokens, 0) << "id " << id;
      }
    }
    check(id);
    if (id % 2 == 0 && !live.empty()) {  // free the oldest
      m.Free(*live.begin());
      live.erase(live.begin());
      check(id);
    }
  }
}

TEST(BlockManager, ShrinkFreesTheRejectedTailAndKeepsTheCache) {
  BlockManager m(/*num_blocks=*/8, /*block_size_tokens=*/4);
  const std::vector<int32_t> prompt = Range(100, 8);  // two full blocks
  EXPECT_EQ(RunPrompt(m, 1, prompt), 0);
  // Room for a decode token and 7 drafted ones: positions 8..15, two more blocks.
  ASSERT_TRUE(m.Grow(1, 8).ok());
  EXPECT_EQ(m.BlockTable(1).size(), 4u);
  EXPECT_EQ(m.num_free_blocks(), 4);
  // Two of the drafts were accepted: 8 + 1 + 2 tokens stay, the fourth block goes.
  m.Shrink(1, 11);
  EXPECT_EQ(m.NumTokens(1), 11);
  EXPECT_EQ(m.BlockTable(1).size(), 3u);
  EXPECT_EQ(m.num_free_blocks(), 5);
  EXPECT_EQ(m.num_cached_blocks(), 0);
  ExpectInvariant(m);
  // Growing or shrinking to the same size changes nothing; a larger "shrink" is a no-op.
  m.Shrink(1, 11);
  m.Shrink(1, 40);
  EXPECT_EQ(m.BlockTable(1).size(), 3u);
  // The registered prompt blocks survive a shrink below them.
  m.Shrink(1, 2);
  EXPECT_EQ(m.NumTokens(1), 8);
  EXPECT_EQ(m.BlockTable(1).size(), 2u);
  ExpectInvariant(m);
  m.Free(1);
  EXPECT_EQ(m.num_free_blocks(), 8);
  EXPECT_EQ(m.num_cached_blocks(), 2);
  EXPECT_EQ(m.MatchPrefix(Concat(prompt, {7})).num_tokens, 8);
  ExpectInvariant(m);
}

// Data-parallel attention's partitions: each sequence's blocks all in its partition, numbered
// across partitions; a full partition refuses while another has room; a prefix cached in one
// partition is not found from another.
TEST(BlockManager, PartitionsKeepEachSequenceAndItsPrefixInOnePool) {
  BlockManager m(/*num_blocks=*/8, /*block_size_tokens=*/4, true, /*num_partitions=*/2);
  EXPECT_EQ(m.num_partitions(), 2);
  EXPECT_EQ(m.blocks_per_partition(), 4);
  const std::vector<int32_t> prompt = Range(100, 9);  // 3 blocks, 2 of them full
  PrefixMatch in1 = m.MatchPrefix(prompt, 1);
  EXPECT_EQ(in1.partition, 1);
  ASSERT_TRUE(m.Admit(1, in1, 9).ok());
  m.MarkComputed(1, prompt);
  for (int32_t b : m.BlockTable(1)) {
    EXPECT_EQ(m.PartitionOfBlock(b), 1) << b;
    EXPECT_GE(b, 4);
    EXPECT_EQ(m.LocalBlock(b), b - 4);
  }
  EXPECT_EQ(m.PartitionOf(1), 1);
  EXPECT_EQ(m.num_free_blocks(1), 1);
  EXPECT_EQ(m.num_free_blocks(0), 4);
  ExpectInvariant(m);
  // Partition 1 has one block left: two more (9 + 8 tokens need 5) do not fit there, though
  // partition 0 has four.
  EXPECT_FALSE(m.CanGrow(1, 8));
  const absl::Status full = m.Grow(1, 8);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("1 of 4 of its partition 1 are free"), std::string::npos)
      << full;
  // The cached prefix is partition 1's: found there, not in partition 0.
  EXPECT_EQ(m.MatchPrefix(prompt, 1).num_tokens, 8);
  EXPECT_EQ(m.MatchPrefix(prompt, 0).num_tokens, 0);
  PrefixMatch in0 = m.MatchPrefix(prompt, 0);
  ASSERT_TRUE(m.Admit(2, in0, 9).ok());
  for (int32_t b : m.BlockTable(2)) EXPECT_EQ(m.PartitionOfBlock(b), 0) << b;
  m.Free(1);
  m.Free(2);
  EXPECT_EQ(m.num_free_blocks(), 8);
  EXPECT_EQ(m.num_cached_blocks(), 2);  // partition 1's two registered blocks
  ExpectInvariant(m);
}

}  // namespace
}  // namespace tpserve
