#include "kernels/quantize_weights.h"

#include <cmath>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/weight_matrix.h"

namespace tpserve {
namespace {

using parity_test::Random;

std::vector<float> Dequantize(const WeightMatrix& w) {
  std::vector<float> out(w.rows * w.cols);
  for (int64_t r = 0; r < w.rows; ++r) DequantizeWeightRow(w, r, out.data() + r * w.cols);
  return out;
}

// Largest |a - b| relative to the largest |b| in each row.
double MaxRowRelativeError(const std::vector<float>& a, const std::vector<float>& b,
                           int64_t cols) {
  double worst = 0;
  for (size_t r = 0; r < a.size() / cols; ++r) {
    double amax = 0, err = 0;
    for (int64_t c = 0; c < cols; ++c) {
      amax = std::max(amax, std::fabs(double{b[r * cols + c]}));
      err = std::max(err, std::fabs(double{a[r * cols + c]} - b[r * cols + c]));
    }
    worst = std::max(worst, err / amax);
  }
  return worst;
}

TEST(QuantizeWeightsTest, RoundTripsWithinEachFormatsStep) {
  const int64_t rows = 300, cols = 384;  // 3 tile rows (the last partial), 3 tile columns
  const std::vector<float> w = Random(rows * cols, 1, 0.05f);
  // Bound per format, relative to the row's max |w|: half a step of the code grid.
  const std::pair<const char*, TensorFormat> cases[] = {
      {"fp8", TensorFormat::Of(FormatKind::kFp8PerChannel)},
      {"fp8-block", TensorFormat::Of(FormatKind::kFp8Block128)},
      {"int4-g32", TensorFormat::Int4(32)},
      {"int4-g128", TensorFormat::Int4(128)},
      {"bf16", TensorFormat::Of(FormatKind::kBF16)},
  };
  for (const auto& [name, f] : cases) {
    const HostMatrix q = QuantizeWeights(f, w.data(), rows, cols);
    const double err = MaxRowRelativeError(Dequantize(q.matrix), w, cols);
    // e4m3 keeps 3 mantissa bits: half an ulp is 1/16 of the value at most. int4 spreads a
    // group's range (at most 2 max|w|) over 15 steps: half a step is 1/15 of max|w|.
    const double bound = f.kind == FormatKind::kInt4Group ? 1.0 / 15 + 1e-3
                         : f.kind == FormatKind::kBF16    ? 1.0 / 256
                                                          : 1.0 / 16;
    EXPECT_LE(err, bound) << name;
    EXPECT_GT(err, 0.0) << name;  // it really was quantized
    // What the struct says it holds is what the plan's formula counts.
    EXPECT_EQ(WeightMatrixBytes(q.matrix), *MatrixBytes(f, rows, cols, name)) << name;
    EXPECT_EQ(static_cast<int64_t>(q.values.size() + q.scales.size() + q.zeros.size()),
              WeightMatrixBytes(q.matrix))
        << name;
  }
}

TEST(QuantizeWeightsTest, Int4ReproducesValuesOnItsGridExactly) {
  // Each group of 32: values s * (q - z) with z = 3 and q covering 0..15: the min is -3 s and
  // the max 12 s, so the scale comes back as exactly s and every value round-trips.
  const int64_t rows = 2, cols = 64;
  std::vector<float> w(rows * cols);
  const float scales[] = {0.5f, 0.125f, 2.0f, 0.25f};  // powers of two: exact in f16
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      w[r * cols + c] = scales[r * 2 + c / 32] * static_cast<float>((c * 7) % 16 - 3);
    }
  }
  const HostMatrix q = QuantizeWeights(TensorFormat::Int4(32), w.data(), rows, cols);
  EXPECT_EQ(Dequantize(q.matrix), w);
  // Column 17 of row 0 holds s * ((17 * 7) % 16 - 3) = 4 s: code 4 + zero point 3 = 7, in the
  // high nibble of byte 1 (GGML order: byte j holds columns j and j + 16).
  EXPECT_EQ(q.values[1] >> 4, 7);
  EXPECT_EQ(q.values[1] & 0x0F, 7 + 3 - 3);  // column 1: (7 % 16) - 3 = 4 -> code 7
  EXPECT_EQ(F16ToF32(reinterpret_cast<const uint16_t*>(q.zeros.data())[0]), 3.0f);
}

TEST(QuantizeWeightsTest, Fp8PerChannelScaleMapsTheRowMaxTo448) {
  const std::vector<float> w = {1.0f, -2.0f, 0.5f, 0.25f, 0.0f, 0.0f, 0.0f, 0.0f};
  const HostMatrix q = QuantizeWeights(TensorFormat::Of(FormatKind::kFp8PerChannel), w.data(),
                                       2, 4);
  const float* s = reinterpret_cast<const float*>(q.scales.data());
  EXPECT_EQ(s[0], 2.0f / 448.0f);
  EXPECT_EQ(s[1], 1.0f);  // an all-zero row keeps a harmless unit scale
  EXPECT_EQ(q.values[1], 0xFE);  // -448: sign bit and the largest finite code
  EXPECT_EQ(Dequantize(q.matrix)[1], -2.0f);
}

}  // namespace
}  // namespace tpserve
