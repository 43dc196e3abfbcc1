#include "worker/kv_cache.h"

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace tpserve {
namespace {

KvCacheShape Shape(int64_t layers, int64_t blocks, int64_t block_size, int64_t kv_heads,
                   int64_t head_dim, DType dtype) {
  KvCacheShape s;
  s.num_layers = layers;
  s.num_blocks = blocks;
  s.block_size_tokens = block_size;
  s.num_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.dtype = dtype;
  return s;
}

TEST(KvCacheTest, BytesAndLayerViewsForEveryDtype) {
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  const int64_t pool_elems = 10 * 16 * 2 * 64;
  for (const auto& [dtype, elem_bytes] : {std::pair{DType::kF32, 4}, std::pair{DType::kF16, 2},
                                          std::pair{DType::kBF16, 2},
                                          std::pair{DType::kF8E4M3, 1}}) {
    const KvCacheShape shape = Shape(3, 10, 16, 2, 64, dtype);
    absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(shape, backend);
    ASSERT_TRUE(cache.ok()) << cache.status();
    EXPECT_EQ((*cache)->bytes(), 3 * 2 * pool_elems * elem_bytes) << DTypeName(dtype);
    EXPECT_EQ(KvCache::BytesFor(shape), (*cache)->bytes());
    EXPECT_EQ((*cache)->capacity_tokens(), 160);
    const KvPoolView l0 = (*cache)->layer(0), l2 = (*cache)->layer(2);
    const auto* k0 = static_cast<uint8_t*>(l0.k);
    EXPECT_EQ(static_cast<uint8_t*>(l0.v) - k0, pool_elems * elem_bytes);
    EXPECT_EQ(static_cast<uint8_t*>(l2.k) - k0, 4 * pool_elems * elem_bytes);
    EXPECT_EQ(l2.dtype, dtype);
    EXPECT_EQ(l2.num_blocks, 10);
    EXPECT_EQ(l2.block_size_tokens, 16);
    EXPECT_EQ(l2.num_kv_heads, 2);
    EXPECT_EQ(l2.head_dim, 64);
    // The last byte of the last pool is addressable (the allocation covers it).
    uint8_t* last = static_cast<uint8_t*>(l2.v) + pool_elems * elem_bytes - 1;
    *last = 7;
    EXPECT_EQ(*last, 7);
  }
}

TEST(KvCacheTest, RejectsNonPositiveFieldsBadDtypesAndOverflow) {
  CpuBackend backend(CpuBackendOptions{.num_threads = 1});
  absl::StatusOr<std::unique_ptr<KvCache>> bad =
      KvCache::Create(Shape(2, 0, 16, 2, 64, DType::kF16), backend);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("num_blocks = 0"), std::string::npos) << bad.status();
  bad = KvCache::Create(Shape(2, 4, 16, 2, 64, DType::kQ4_0), backend);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("dtype Q4_0"), std::string::npos) << bad.status();
  KvCacheShape negative_scale = Shape(2, 4, 16, 2, 64, DType::kF8E4M3);
  negative_scale.k_scale = -1.0f;
  EXPECT_EQ(KvCache::Create(negative_scale, backend).status().code(),
            absl::StatusCode::kInvalidArgument);
  const KvCacheShape huge = Shape(1LL << 20, 1LL << 20, 1LL << 20, 8, 128, DType::kF16);
  EXPECT_FALSE(KvCache::BytesFor(huge).has_value());
  EXPECT_EQ(KvCache::Create(huge, backend).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
