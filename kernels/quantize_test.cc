#include "kernels/quantize.h"

#include <cmath>
#include <cstring>
#include <random>

#include "formats/dtype.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

std::vector<float> RandomRow(int n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RoundTrip(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(RowBytes(t, x.size()).value());
  QuantizeRow(t, x.data(), q.data(), x.size());
  std::vector<float> y(x.size());
  DequantizeRow(t, q.data(), y.data(), x.size());
  return y;
}

float BlockRange(const std::vector<float>& x, int b, bool span) {
  float lo = x[32 * b], hi = x[32 * b], amax = 0;
  for (int j = 0; j < 32; ++j) {
    lo = std::min(lo, x[32 * b + j]);
    hi = std::max(hi, x[32 * b + j]);
    amax = std::max(amax, std::fabs(x[32 * b + j]));
  }
  return span ? hi - lo : amax;
}

// Each scheme's worst case is half a quantization step (plus fp16 rounding of the scale),
// except at Q4_0's clipped extreme.
TEST(QuantizeTest, GgmlRoundTripsWithinHalfAStep) {
  const std::vector<float> x = RandomRow(256, 1, 2.0f);
  const std::vector<float> q8 = RoundTrip(DType::kQ8_0, x);
  const std::vector<float> q40 = RoundTrip(DType::kQ4_0, x);
  const std::vector<float> q41 = RoundTrip(DType::kQ4_1, x);
  for (int b = 0; b < 8; ++b) {
    const float step8 = BlockRange(x, b, false) / 127.0f;
    const float step40 = BlockRange(x, b, false) / 8.0f;
    const float step41 = BlockRange(x, b, true) / 15.0f;
    for (int j = 0; j < 32; ++j) {
      const int i = 32 * b + j;
      EXPECT_LE(std::fabs(q8[i] - x[i]), 0.51f * step8 + 1e-3f * std::fabs(x[i])) << i;
      // Q4_0 maps the extreme to -8; the opposite extreme can only reach +7: one full step.
      EXPECT_LE(std::fabs(q40[i] - x[i]), 1.01f * step40 + 1e-3f * std::fabs(x[i])) << i;
      EXPECT_LE(std::fabs(q41[i] - x[i]), 0.51f * step41 + 1e-3f * std::fabs(x[i])) << i;
    }
  }
}

TEST(QuantizeTest, Q4_1NibbleOrderIsLowThenHigh) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16);  // min 0, max 15 -> d = 1
  std::vector<uint8_t> q(20);
  QuantizeRow(DType::kQ4_1, x.data(), q.data(), 32);
  // Byte j holds element j (low nibble) and element j + 16 (high nibble): both equal j.
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[4 + j], j | (j << 4)) << j;
}

TEST(QuantizeTest, FloatTypesRoundToNearest) {
  const std::vector<float> x = RandomRow(64, 2, 3.0f);
  const std::vector<float> f16 = RoundTrip(DType::kF16, x);
  const std::vector<float> bf16 = RoundTrip(DType::kBF16, x);
  const std::vector<float> f8 = RoundTrip(DType::kF8E4M3, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::fabs(f16[i] - x[i]), std::ldexp(std::fabs(x[i]), -11)) << i;
    EXPECT_LE(std::fabs(bf16[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
    // E4M3 has 3 mantissa bits; values here are above its subnormal range or tiny.
    EXPECT_LE(std::fabs(f8[i] - x[i]), std::max(std::ldexp(std::fabs(x[i]), -4), 1.0f / 512))
        << i;
  }
}

TEST(QuantizeTest, F8E4M3EncodesEveryFiniteValueExactlyAndSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // the NaN codes
    const float v = F8E4M3ToF32(static_cast<uint8_t>(c));
    if (c == 0x80) continue;  // -0 encodes as 0x80 or 0x00, both fine
    EXPECT_EQ(F32ToF8E4M3(v), c) << c;
  }
  EXPECT_EQ(F8E4M3ToF32(F32ToF8E4M3(1000.0f)), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(F32ToF8E4M3(-1000.0f)), -448.0f);
}

TEST(QuantizeTest, QuantizeMatrixLaysOutRowsBackToBack) {
  const std::vector<float> x = RandomRow(3 * 64, 3, 1.0f);
  const std::vector<uint8_t> m = QuantizeMatrix(DType::kQ8_0, x.data(), 3, 64);
  ASSERT_EQ(m.size(), 3u * 68u);
  std::vector<uint8_t> row(68);
  QuantizeRow(DType::kQ8_0, x.data() + 128, row.data(), 64);
  EXPECT_EQ(std::memcmp(m.data() + 136, row.data(), 68), 0);
}

}  // namespace
}  // namespace tpserve
