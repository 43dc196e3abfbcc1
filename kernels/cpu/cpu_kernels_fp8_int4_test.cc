// The fp8 (W8A32) and int4-group (W4A8) dot kernels: every e4m3 code decoded exactly, the AVX2
// table against the scalar reference on odd sizes and 1..kMaxDotRows rows, and both tables
// against f64 dots of the dequantized weights within the error each scheme allows.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tpserve {
namespace {

using parity_test::Random;

std::vector<const CpuKernels*> SupportedTables() {
  std::vector<const CpuKernels*> tables = {&ScalarCpuKernels()};
  if (CpuSupportsIsa(CpuIsa::kAvx2)) tables.push_back(&CpuKernelsFor(CpuIsa::kAvx2));
  return tables;
}

bool IsFp8NaN(uint8_t code) { return (code & 0x7F) == 0x7F; }

// Random e4m3 codes over the whole range (subnormals, zeros of both signs), NaN codes excluded.
std::vector<uint8_t> RandomFp8Codes(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> codes(n);
  for (uint8_t& c : codes) {
    do c = static_cast<uint8_t>(rng()); while (IsFp8NaN(c));
  }
  return codes;
}

struct Rows {
  std::vector<std::vector<float>> x;  // [kMaxDotRows][n]
  const float* ptr[kMaxDotRows];
};

Rows RandomRows(int64_t n, uint32_t seed) {
  Rows r;
  for (int j = 0; j < kMaxDotRows; ++j) r.x.push_back(Random(n, seed + j, 1.0f + j));
  for (int j = 0; j < kMaxDotRows; ++j) r.ptr[j] = r.x[j].data();
  return r;
}

// Every non-NaN code, alone in a row against a one-hot activation, comes back as exactly
// F8E4M3ToF32(code) times the (power-of-two) scale: subnormals and -0 included, through the
// vector body (first 16 columns) and the zero-padded tail (the rest of the 254 columns).
TEST(CpuFp8KernelTest, DecodesEveryCodeExactly) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    if (!IsFp8NaN(static_cast<uint8_t>(c))) codes.push_back(static_cast<uint8_t>(c));
  }
  const int64_t n = static_cast<int64_t>(codes.size());  // 254
  const float scale = 0.25f;
  for (const CpuKernels* ks : SupportedTables()) {
    for (int64_t col = 0; col < n; ++col) {
      std::vector<float> one_hot(n, 0.0f);
      one_hot[col] = 1.0f;
      const float* rows[kMaxDotRows];
      std::fill(rows, rows + kMaxDotRows, one_hot.data());
      for (int64_t tile_cols : {n, int64_t{128}}) {
        const float scales[2] = {scale, scale};
        float got[kMaxDotRows];
        ks->dot_fp8(codes.data(), scales, tile_cols, rows, kMaxDotRows, n, got);
        for (int j = 0; j < kMaxDotRows; ++j) {
          EXPECT_EQ(got[j], F8E4M3ToF32(codes[col]) * scale)
              << "code 0x" << std::hex << int{codes[col]} << std::dec
              << " tile_cols=" << tile_cols;
        }
      }
    }
  }
}

// Against the f64 dot of the dequantized weights, only f32 rounding remains: at most (n + 2)
// roundings of partial sums, each within 2^-24 of the sum of |products| (the classical bound for
// recursive summation; blocked and pairwise orders are tighter), plus one per scale multiply.
TEST(CpuFp8KernelTest, DotsMatchF64UpToSummationErrorAndAgreeAcrossTables) {
  for (int64_t n : {1, 7, 16, 33, 128, 200, 384, 1000}) {
    const std::vector<uint8_t> w = RandomFp8Codes(n, 10 + n);
    const Rows x = RandomRows(n, 20 + n);
    for (int64_t tile_cols : {n, int64_t{128}}) {
      const int64_t tiles = (n + tile_cols - 1) / tile_cols;
      std::vector<float> scales(tiles);
      for (int64_t t = 0; t < tiles; ++t) scales[t] = 0.003f * (1.0f + 0.37f * t);
      for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
        float want[kMaxDotRows];
        ScalarCpuKernels().dot_fp8(w.data(), scales.data(), tile_cols, x.ptr, num_x, n, want);
        for (const CpuKernels* ks : SupportedTables()) {
          float got[kMaxDotRows];
          ks->dot_fp8(w.data(), scales.data(), tile_cols, x.ptr, num_x, n, got);
          for (int j = 0; j < num_x; ++j) {
            double exact = 0, magnitude = 0;
            for (int64_t c = 0; c < n; ++c) {
              const double p = double{F8E4M3ToF32(w[c])} * scales[c / tile_cols] * x.x[j][c];
              exact += p;
              magnitude += std::fabs(p);
            }
            const std::string where = "n=" + std::to_string(n) +
                                      " tile_cols=" + std::to_string(tile_cols) +
                                      " num_x=" + std::to_string(num_x) + " row " +
                                      std::to_string(j);
            EXPECT_LE(std::fabs(got[j] - exact), (n + 2) * std::ldexp(magnitude, -24)) << where;
            EXPECT_LE(std::fabs(got[j] - want[j]), 2 * (n + 2) * std::ldexp(magnitude, -24))
                << where;
          }
        }
      }
    }
  }
}

// One int4 weight row: packed codes (16 bytes per 32 columns) and f16 scale / zero per group.
struct Int4Row {
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales, zeros;
  std::vector<float> dequantized;  // (code - zero) * scale, column order
};

// Random codes 0..15, scales of both signs, zero points 0..15 (integers, as the encoders
// write), or, with fractional_zeros, any f16 in [0, 15].
Int4Row RandomInt4Row(int64_t n, int64_t group, uint32_t seed, bool fractional_zeros) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 15.0f);
  Int4Row r;
  r.codes.resize(n / 2);
  for (uint8_t& b : r.codes) b = static_cast<uint8_t>(rng());
  const std::vector<float> s = Random(n / group, seed + 1, 0.01f);
  for (int64_t g = 0; g < n / group; ++g) {
    r.scales.push_back(F32ToF16(s[g]));
    const float z = fractional_zeros ? uniform(rng) : static_cast<float>(rng() % 16);
    r.zeros.push_back(F32ToF16(z));
  }
  r.dequantized.resize(n);
  for (int64_t c = 0; c < n; ++c) {
    const uint8_t byte = r.codes[(c / 32) * 16 + c % 16];
    const int code = c % 32 < 16 ? byte & 0x0F : byte >> 4;
    r.dequantized[c] =
        (code - F16ToF32(r.zeros[c / group])) * F16ToF32(r.scales[c / group]);
  }
  return r;
}

// Against the f64 dot of the dequantized weights with the unquantized activations, the only
// rounding beyond f32 error is the 8-bit activation rounding the GGML types also carry:
// |x - d * q| <= max|x| * (1/254 + 2^-11) per block of 32 (half a step, plus the f16 rounding of
// d times |q| <= 127), weighted by sum |w| over the block. Against the same dot with the
// activations as quantized (d * q) only f32 rounding remains (1e-6 of sum |w * d * q|: the
// integer parts are exact, so a few roundings per 32 columns).
// Batch invariance: a row's dot is the same float whether it shares the call with 0..3 other
// rows or not (the AVX2 table once summed a lone row in another order: a decode step's single
// row then differed in the last bits from the same row inside a prefill or a batch).
TEST(CpuFp8KernelTest, ARowsDotDoesNotDependOnTheRowsBesideIt) {
  for (int64_t n : {16, 33, 64, 200, 1000}) {
    const std::vector<uint8_t> w = RandomFp8Codes(n, 30 + n);
    const Rows x = RandomRows(n, 40 + n);
    const float scales[8] = {0.003f, 0.004f, 0.005f, 0.006f, 0.007f, 0.008f, 0.009f, 0.01f};
    for (const CpuKernels* ks : SupportedTables()) {
      float alone[kMaxDotRows];
      for (int j = 0; j < kMaxDotRows; ++j) {
        ks->dot_fp8(w.data(), scales, 128, &x.ptr[j], 1, n, &alone[j]);
      }
      for (int num_x = 2; num_x <= kMaxDotRows; ++num_x) {
        float together[kMaxDotRows];
        ks->dot_fp8(w.data(), scales, 128, x.ptr, num_x, n, together);
        for (int j = 0; j < num_x; ++j) {
          EXPECT_EQ(together[j], alone[j]) << "n=" << n << " num_x=" << num_x << " row " << j;
        }
      }
    }
  }
}

TEST(CpuInt4KernelTest, DotsStayWithinTheActivationRoundingAndAgreeAcrossTables) {
  for (int64_t group : {32, 64, 96, 128, 256}) {
    for (int64_t groups : {1, 2, 3, 5}) {
      const int64_t n = group * groups, chunks = n / 32;
      const std::vector<float> xs = Random(kMaxDotRows * n, 30 + n);
      for (bool fractional_zeros : {false, true}) {
        const Int4Row w = RandomInt4Row(n, group, 40 + n + group, fractional_zeros);
        for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
          std::vector<std::vector<Q8Block>> blocks(num_x, std::vector<Q8Block>(chunks));
          const Q8Block* rows[kMaxDotRows];
          for (int j = 0; j < num_x; ++j) {
            ScalarCpuKernels().quantize_q8(xs.data() + j * n, n, blocks[j].data());
            rows[j] = blocks[j].data();
          }
          float want[kMaxDotRows];
          ScalarCpuKernels().dot_int4(w.codes.data(), w.scales.data(), w.zeros.data(), group,
                                      rows, num_x, chunks, want);
          for (const CpuKernels* ks : SupportedTables()) {
            float got[kMaxDotRows];
            ks->dot_int4(w.codes.data(), w.scales.data(), w.zeros.data(), group, rows, num_x,
                         chunks, got);
            for (int j = 0; j < num_x; ++j) {
              double exact = 0, bound = 0, magnitude = 0, exact_q = 0, magnitude_q = 0;
              for (int64_t b = 0; b < chunks; ++b) {
                double amax = 0, w_abs = 0;
                for (int i = 0; i < 32; ++i) {
                  const double wi = w.dequantized[32 * b + i], xi = xs[j * n + 32 * b + i];
                  const double xq = double{blocks[j][b].d} * blocks[j][b].q[i];
                  exact += wi * xi;
                  magnitude += std::fabs(wi * xi);
                  exact_q += wi * xq;
                  magnitude_q += std::fabs(wi * xq);
                  amax = std::max(amax, std::fabs(xi));
                  w_abs += std::fabs(wi);
                }
                bound += amax * (1.0 / 254 + std::ldexp(1.0, -11)) * w_abs;
              }
              const std::string where =
                  "group=" + std::to_string(group) + " n=" + std::to_string(n) +
                  " fractional_zeros=" + std::to_string(fractional_zeros) +
                  " num_x=" + std::to_string(num_x) + " row " + std::to_string(j);
              EXPECT_LE(std::fabs(got[j] - exact), 1.001 * bound + 1e-5 * magnitude) << where;
              EXPECT_LE(std::fabs(got[j] - exact_q), 1e-6 * magnitude_q) << where;
              EXPECT_LE(std::fabs(got[j] - want[j]), 1e-6 * magnitude_q) << where;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
