#include "worker/kv_cache.h"

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(KvCacheTest, BytesAndLayerViews) {
  const KvCacheShape shape{3, 10, 16, 2, 64};
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(shape);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const int64_t pool_floats = 10 * 16 * 2 * 64;
  EXPECT_EQ((*cache)->bytes(), 3 * 2 * pool_floats * 4);
  EXPECT_EQ(KvCache::BytesFor(shape), (*cache)->bytes());
  EXPECT_EQ((*cache)->capacity_tokens(), 160);
  const KvPoolView l0 = (*cache)->layer(0), l2 = (*cache)->layer(2);
  EXPECT_EQ(l0.v - l0.k, pool_floats);
  EXPECT_EQ(l2.k - l0.k, 4 * pool_floats);
  EXPECT_EQ(l2.num_blocks, 10);
  EXPECT_EQ(l2.block_size_tokens, 16);
  EXPECT_EQ(l2.num_kv_heads, 2);
  EXPECT_EQ(l2.head_dim, 64);
  // The last float of the last pool is addressable (the allocation covers it).
  l2.v[pool_floats - 1] = 1.0f;
  EXPECT_EQ(l2.v[pool_floats - 1], 1.0f);
}

TEST(KvCacheTest, RejectsNonPositiveFieldsAndOverflow) {
  absl::StatusOr<std::unique_ptr<KvCache>> bad = KvCache::Create({2, 0, 16, 2, 64});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("num_blocks = 0"), std::string::npos) << bad.status();
  const KvCacheShape huge{1LL << 20, 1LL << 20, 1LL << 20, 8, 128};
  EXPECT_FALSE(KvCache::BytesFor(huge).has_value());
  EXPECT_EQ(KvCache::Create(huge).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
