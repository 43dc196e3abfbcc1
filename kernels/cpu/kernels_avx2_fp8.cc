// AVX2 dot products of fp8 e4m3 weight rows (per-channel or 128-column tile scales) with f32
// activations, W8A32: codes are decoded exactly and multiplied against the activations as
// they are, so only f32 summation error separates the result from the exact dot.
//
// Decoding: an e4m3 byte shifted into the top of a 16-bit lane and arithmetic-shifted right by
// one (sign kept in bit 15, the copy in bit 14 masked off) is the f16 encoding of the code's
// value times 2^-8: the exponent biases differ by 8 (7 vs 15), and e4m3 subnormals (exponent
// field 0) land on f16 subnormals with the same mantissa bits. F16C widens 8 lanes at a time;
// the 2^8 is folded into the scale. Measured on the dev machine (AMD EPYC, Zen 3) against
// _mm256_i32gather_ps on a 256-entry table: 1.5-3 vs 0.2 Gcodes/s per core, so the bit trick
// it is (docs/PERFORMANCE.md). The NaN codes 0x7F / 0xFF would decode as +-480; our encoder
// saturates to 448 and never writes them.
#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {
namespace {

constexpr float kDecodeScale = 256.0f;  // the decoded f16 values are code * 2^-8

// 16 e4m3 codes -> code * 2^-8 as 2 x 8 floats (elements 0..7 in lo, 8..15 in hi).
inline void DecodeFp8x16(const uint8_t* codes, __m256* lo, __m256* hi) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m128i zero = _mm_setzero_si128();
  const __m128i keep = _mm_set1_epi16(static_cast<int16_t>(0xBF80));  // sign, exponent, mantissa
  const __m128i h0 = _mm_and_si128(_mm_srai_epi16(_mm_unpacklo_epi8(zero, bytes), 1), keep);
  const __m128i h1 = _mm_and_si128(_mm_srai_epi16(_mm_unpackhi_epi8(zero, bytes), 1), keep);
  *lo = _mm256_cvtph_ps(h0);
  *hi = _mm256_cvtph_ps(h1);
}

// Per activation row, two accumulators (four at one row, i.e. decode, where the FMA latency
// chains would otherwise be the limit on long per-channel tiles).
template <int NX>
void DotFp8N(const uint8_t* w, const float* scales, int64_t tile_cols, const float* const* x,
             int64_t n, float* out) {
  // One 16-code group per step at every NX: a row's sums must not depend on how many rows
  // share the call (batch invariance: a decode step's single row against the same row inside a
  // batch); two groups for NX 1 alone summed in another order.
  constexpr int kGroups = 1;
  __m256 total[NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) total[j] = _mm256_setzero_ps();
  for (int64_t t0 = 0, t = 0; t0 < n; t0 += tile_cols, ++t) {
    const int64_t len = std::min(tile_cols, n - t0);
    const uint8_t* codes = w + t0;
    __m256 acc[NX][2 * kGroups];
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      for (int a = 0; a < 2 * kGroups; ++a) acc[j][a] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 16 * kGroups <= len; i += 16 * kGroups) {
#pragma GCC unroll 2
      for (int g = 0; g < kGroups; ++g) {
        __m256 lo, hi;
        DecodeFp8x16(codes + i + 16 * g, &lo, &hi);
#pragma GCC unroll 8
        for (int j = 0; j < NX; ++j) {
          const float* xj = x[j] + t0 + i + 16 * g;
          acc[j][2 * g] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(xj), acc[j][2 * g]);
          acc[j][2 * g + 1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xj + 8), acc[j][2 * g + 1]);
        }
      }
    }
    for (; i + 16 <= len; i += 16) {
      __m256 lo, hi;
      DecodeFp8x16(codes + i, &lo, &hi);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        const float* xj = x[j] + t0 + i;
        acc[j][0] = _mm256_fmadd_ps(lo, _mm256_loadu_ps(xj), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xj + 8), acc[j][1]);
      }
    }
    if (i < len) {  // the last 1..15 columns, through zero-padded copies (code 0 is +0)
      alignas(16) uint8_t tail_codes[16] = {};
      std::memcpy(tail_codes, codes + i, len - i);
      __m256 lo, hi;
      DecodeFp8x16(tail_codes, &lo, &hi);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        alignas(32) float tail_x[16] = {};
        std::memcpy(tail_x, x[j] + t0 + i, (len - i) * sizeof(float));
        acc[j][0] = _mm256_fmadd_ps(lo, _mm256_load_ps(tail_x), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(hi, _mm256_load_ps(tail_x + 8), acc[j][1]);
      }
    }
    const __m256 scale = _mm256_set1_ps(scales[t] * kDecodeScale);
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      __m256 tile_sum = _mm256_add_ps(acc[j][0], acc[j][1]);
      if constexpr (kGroups == 2) {
        tile_sum = _mm256_add_ps(tile_sum, _mm256_add_ps(acc[j][2], acc[j][3]));
      }
      total[j] = _mm256_fmadd_ps(scale, tile_sum, total[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) out[j] = HorizontalSum(total[j]);
}

}  // namespace

void DotFp8(const uint8_t* w, const float* scales, int64_t tile_cols, const float* const* x,
            int num_x, int64_t n, float* out) {
  DispatchRows(num_x, [&](auto nx) {
    DotFp8N<decltype(nx)::value>(w, scales, tile_cols, x, n, out);
  });
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
