// The prepared int4 layout's formulas (prepared_layout.h): a bijection with a working inverse,
// each thread's wgmma fragment in 8 consecutive nibbles, column chunks as contiguous blocks,
// and the signed codes and f32 offsets that reproduce (code - zero) * scale exactly.
#include "kernels/cuda/mixed_gemm/prepared_layout.h"

#include <cmath>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"

namespace tpserve::cuda::mixed_gemm {
namespace {

TEST(PreparedInt4Index, IsABijectionAndPositionInvertsIt) {
  const int64_t n = 48, k = 96;
  std::vector<int> hits(n * k, 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const int64_t e = PreparedInt4Index(n, r, c);
      ASSERT_GE(e, 0);
      ASSERT_LT(e, n * k);
      ++hits[e];
      int64_t row = -1, col = -1;
      PreparedInt4Position(n, e, &row, &col);
      EXPECT_EQ(row, r);
      EXPECT_EQ(col, c);
    }
  }
  for (int64_t e = 0; e < n * k; ++e) EXPECT_EQ(hits[e], 1) << "element " << e;
}

// Lane 0 of the wgmma A fragment (m64nNk16, 16-bit) holds rows 0 and 8 x columns 0, 1, 8, 9;
// lane 5 (group 1, thread 1 of it) rows 1 and 9 x columns 2, 3, 10, 11: in the fragment's
// register order (a0..a7 = (r, c), (r, c+1), (r+8, c), (r+8, c+1), then columns + 8).
TEST(PreparedInt4Index, EachLanesFragmentIsEightConsecutiveNibbles) {
  const int64_t n = 16;
  const int64_t lane0[8][2] = {{0, 0}, {0, 1}, {8, 0}, {8, 1}, {0, 8}, {0, 9}, {8, 8}, {8, 9}};
  const int64_t lane5[8][2] = {{1, 2}, {1, 3}, {9, 2}, {9, 3}, {1, 10}, {1, 11}, {9, 10}, {9, 11}};
  for (int v = 0; v < 8; ++v) {
    EXPECT_EQ(PreparedInt4Index(n, lane0[v][0], lane0[v][1]), v);
    EXPECT_EQ(PreparedInt4Index(n, lane5[v][0], lane5[v][1]), 8 * 5 + v);
  }
}

TEST(PreparedInt4Index, AtomsRunDownTheRowsSoColumnChunksAreContiguous) {
  const int64_t n = 64, k = 256, kc = 64;
  EXPECT_EQ(PreparedInt4Index(n, 16, 0), 256);           // the next atom down
  EXPECT_EQ(PreparedInt4Index(n, 0, 16), 256 * n / 16);  // the next atom across
  for (int64_t c = 0; c < k / kc; ++c) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = 0; j < kc; ++j) {
        ASSERT_EQ(PreparedInt4Index(n, r, c * kc + j), c * n * kc + PreparedInt4Index(n, r, j));
      }
    }
  }
}

TEST(SignedNibble, HoldsCodeMinusEightAndComesBack) {
  for (uint32_t code = 0; code < 16; ++code) {
    EXPECT_EQ(SignedValue(SignedNibble(code)), static_cast<int32_t>(code) - 8);
    EXPECT_EQ(UnsignedCode(SignedNibble(code)), code);
  }
}

// Integer zero points (AWQ 0..15, GPTQ v1 1..16): fma(code - 8, s, (8 - zero) * s) is
// (code - zero) * s exactly, for scales across the f16 range.
TEST(Int4Offset, ReproducesTheReferenceValueExactlyForIntegerZeros) {
  for (float scale : {1.0f, 0.0009765625f, 3.0517578e-05f, 0.0123f, 7.5f, 1000.0f}) {
    const float s = F16ToF32(F32ToF16(scale));
    for (int zero = 0; zero <= 16; ++zero) {
      const float offset = Int4Offset(static_cast<float>(zero), s);
      for (int code = 0; code < 16; ++code) {
        const float reference = (static_cast<float>(code) - static_cast<float>(zero)) * s;
        EXPECT_EQ(std::fma(static_cast<float>(code - 8), s, offset), reference)
            << "scale " << s << " zero " << zero << " code " << code;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda::mixed_gemm
