#include "kernels/quantize.h"

#include <algorithm>
#include <array>
#include <limits>
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

// A row of `super_blocks` * 256 values with the hard cases planted: a zero sub-block, a
// constant negative one, an all-positive one, one 1e3 times larger than the rest and one 1e-6
// times smaller.
std::vector<float> KQuantTestRow(int super_blocks, uint32_t seed) {
  std::vector<float> x = RandomRow(256 * super_blocks, seed, 1.0f);
  std::fill(x.begin(), x.begin() + 32, 0.0f);
  std::fill(x.begin() + 32, x.begin() + 64, -3.5f);
  for (int i = 64; i < 96; ++i) x[i] = std::fabs(x[i]) + 0.5f;
  for (int i = 256; i < 288; ++i) x[i] *= 1e3f;
  for (int i = 320; i < 352; ++i) x[i] *= 1e-6f;
  return x;
}

// The bound stated in quantize.h, computed from x alone: half the sub-block's step, where the
// step is at most (span + dmin) / L + d for the super-block's dmin and d.
std::vector<float> ScaleMinBound(const std::vector<float>& x, int levels) {
  std::vector<float> bound(x.size());
  const double fp16_up = 1.0 + std::ldexp(1.0, -10);
  for (size_t sb = 0; sb < x.size() / 256; ++sb) {
    double lo[8], hi[8], r = 0;
    for (int j = 0; j < 8; ++j) {
      const float* v = x.data() + 256 * sb + 32 * j;
      lo[j] = std::min(0.0f, *std::min_element(v, v + 32));
      hi[j] = *std::max_element(v, v + 32);
      r = std::max(r, std::max(hi[j], 0.0) - lo[j]);
    }
    const double dmin = r / 63 * fp16_up;
    const double d = (r + dmin) / (63.0 * levels) * fp16_up;
    for (int j = 0; j < 8; ++j) {
      const double step = (hi[j] - lo[j] + dmin) / levels + d;
      for (int i = 0; i < 32; ++i) {
        // Slack for f32 rounding in the encoder's divisions and the decoder's subtraction.
        bound[256 * sb + 32 * j + i] = static_cast<float>(0.5 * step * 1.0001 + 1e-6 * r);
      }
    }
  }
  return bound;
}

std::vector<float> Q6KBound(const std::vector<float>& x) {
  std::vector<float> bound(x.size());
  for (size_t sb = 0; sb < x.size() / 256; ++sb) {
    double amax[16], max_amax = 0;
    for (int s = 0; s < 16; ++s) {
      amax[s] = 0;
      for (int i = 0; i < 16; ++i) amax[s] = std::max<double>(amax[s], std::fabs(x[256 * sb + 16 * s + i]));
      max_amax = std::max(max_amax, amax[s]);
    }
    const double d = max_amax / (31.0 * 127) * (1.0 + std::ldexp(1.0, -10));
    for (int s = 0; s < 16; ++s) {
      const double step = amax[s] / 31 + d;
      for (int i = 0; i < 16; ++i) {
        bound[256 * sb + 16 * s + i] = static_cast<float>(0.5 * step * 1.0001 + 1e-6 * max_amax);
      }
    }
  }
  return bound;
}

TEST(QuantizeTest, KQuantsRoundTripWithinTheStatedBound) {
  const std::vector<float> x = KQuantTestRow(3, 11);
  struct Case {
    DType t;
    std::vector<float> bound;
  };
  const Case cases[] = {{DType::kQ4_K, ScaleMinBound(x, 15)},
                        {DType::kQ5_K, ScaleMinBound(x, 31)},
                        {DType::kQ6_K, Q6KBound(x)}};
  for (const Case& c : cases) {
    const std::vector<float> y = RoundTrip(c.t, x);
    double max_ratio = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_LE(std::fabs(y[i] - x[i]), c.bound[i]) << DTypeName(c.t) << " " << i << " x=" << x[i];
      max_ratio = std::max<double>(max_ratio, std::fabs(y[i] - x[i]) / c.bound[i]);
    }
    // A zero sub-block comes back exactly (q = 0 and an offset of 0).
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << DTypeName(c.t);
    // The bound is tight enough to mean something: some value uses most of it.
    EXPECT_GT(max_ratio, 0.5) << DTypeName(c.t);
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

TEST(QuantizeTest, I32RoundsAwayFromZeroAndSaturates) {
  const std::vector<float> x = {2.5f, -2.5f, 7.0f, 3e9f, -3e9f, std::nanf("")};
  std::vector<int32_t> q(x.size());
  QuantizeRow(DType::kI32, x.data(), q.data(), x.size());
  EXPECT_EQ(q, (std::vector<int32_t>{3, -3, 7, 2147483647, -2147483647 - 1, 0}));
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

// The definition F32ToF8E4M3 must meet: the nearest of the finite E4M3 values, ties to the
// even code, saturating at +-448, NaN to 0x7F; found by searching the decoded values.
uint8_t NearestF8E4M3BySearch(float f) {
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(f), 448.0f);
  std::array<float, 127> table;
  for (int c = 0; c < 127; ++c) table[c] = F8E4M3ToF32(static_cast<uint8_t>(c));
  int code = static_cast<int>(std::lower_bound(table.begin(), table.end(), a) - table.begin());
  if (code > 0) {
    const float above = table[code] - a, below = a - table[code - 1];
    if (below < above || (below == above && (code - 1) % 2 == 0)) --code;
  }
  return sign | static_cast<uint8_t>(code);
}

TEST(QuantizeTest, F8E4M3EncoderMatchesTheNearestEvenSearch) {
  std::vector<float> probes = {0.0f, -0.0f, 448.0f, 464.0f, 480.0f, 1e30f, -1e-30f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::denorm_min()};
  // Every code, every midpoint between neighbours, and one float step either side of both.
  for (int c = 0; c < 127; ++c) {
    const float v = F8E4M3ToF32(static_cast<uint8_t>(c));
    const float next = c < 126 ? F8E4M3ToF32(static_cast<uint8_t>(c + 1)) : 480.0f;
    const float mid = 0.5f * (v + next);
    for (float x : {v, mid}) {
      for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, 1e9f)}) {
        probes.push_back(y);
        probes.push_back(-y);
      }
    }
  }
  for (float x : probes) {
    ASSERT_EQ(F32ToF8E4M3(x), NearestF8E4M3BySearch(x)) << x;
  }
  // And a stride through every float bit pattern (NaNs included).
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 65521) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, 4);
    ASSERT_EQ(F32ToF8E4M3(x), NearestF8E4M3BySearch(x)) << std::hex << b;
  }
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
