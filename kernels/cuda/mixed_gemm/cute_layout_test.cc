// prepared_layout.h's formula against the layout object CUTLASS builds for the prepared int4
// operand (compute_memory_reordering_atom<bfloat16_t> tiled by cute::tile_to_shape, the exact
// object RunInt4* hands the kernel). Host code only: runs without a GPU.
#include "gtest/gtest.h"
#include "kernels/cuda/mixed_gemm/kernel_args.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"

namespace tpserve::cuda::mixed_gemm {
namespace {

TEST(CutlassInt4Layout, IsPreparedInt4Index) {
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{16, 16}, {48, 192}, {128, 256}}) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        ASSERT_EQ(CutlassInt4ElementIndex(n, k, r, c), PreparedInt4Index(n, r, c))
            << "n " << n << " k " << k << " row " << r << " col " << c;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda::mixed_gemm
