// AVX2 dot products of K-quant weight rows (Q4_K, Q5_K, Q6_K; layout: formats/k_quant.h) with
// Q8 activation blocks. Each super-block is unpacked once into eight 32-byte vectors of levels,
// one per 32-value sub-block, and multiplied against up to kMaxDotRows activation rows; the
// eight sub-block sums of a row land in the lanes of one vector, which takes the activation
// scales in one multiply-add. Every integer sum is exact (the same integers as the scalar
// reference); only the float operation order differs. Compiled for AVX2 + FMA + F16C via the
// pragma below.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "formats/k_quant.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {
namespace {

__m256i LoadU8x8AsI32(const uint8_t* p) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Levels 0..15 (Q4_K) or 0..31 (Q5_K) of the eight sub-blocks of one super-block.
template <bool kFiveBit>
void UnpackScaleMinLevels(const uint8_t* block, __m256i levels[8]) {
  constexpr int kQsOffset = kFiveBit ? kQ5_KQsOffset : kQ4_KQsOffset;
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  for (int g = 0; g < 4; ++g) {
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQsOffset + 32 * g));
    levels[2 * g] = _mm256_and_si256(raw, low_nibble);
    levels[2 * g + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low_nibble);
  }
  if constexpr (kFiveBit) {
    const __m256i high_bits =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kQ5_KQhOffset));
    const __m256i bit4 = _mm256_set1_epi8(0x10);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Bit j of each byte sits at bit 4 after shifting by 4 - j (the 16-bit shifts move
      // bits across the byte boundary, but never into bit 4 of the other byte for j <= 7).
      const __m256i aligned = j <= 4 ? _mm256_slli_epi16(high_bits, 4 - j)
                                     : _mm256_srli_epi16(high_bits, j - 4);
      levels[j] = _mm256_or_si256(levels[j], _mm256_and_si256(aligned, bit4));
    }
  }
}

template <int NX, bool kFiveBit>
void DotScaleMinKN(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  constexpr int kBlockBytes = kFiveBit ? kQ5_KBlockBytes : kQ4_KBlockBytes;
  __m256 acc[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = w + b * kBlockBytes;
    const __m256 d = _mm256_set1_ps(LoadF16(block));
    const __m256 dmin = _mm256_set1_ps(LoadF16(block + 2));
    uint8_t scales[8], mins[8];
    UnpackKScaleMins(block + kQ4_KScalesOffset, scales, mins);
    const __m256i scales32 = LoadU8x8AsI32(scales);
    const __m256i mins32 = LoadU8x8AsI32(mins);
    __m256i levels[8];
    UnpackScaleMinLevels<kFiveBit>(block, levels);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const Q8Block* xb = x[r] + 8 * b;
      const __m256i lo = HalfSums(
          DotU8I8(levels[0], LoadQ(xb[0])), DotU8I8(levels[1], LoadQ(xb[1])),
          DotU8I8(levels[2], LoadQ(xb[2])), DotU8I8(levels[3], LoadQ(xb[3])));
      const __m256i hi = HalfSums(
          DotU8I8(levels[4], LoadQ(xb[4])), DotU8I8(levels[5], LoadQ(xb[5])),
          DotU8I8(levels[6], LoadQ(xb[6])), DotU8I8(levels[7], LoadQ(xb[7])));
      // Lane j, exact integers: scale_j * sum(q * qx) (< 2^23) and min_j * sum(qx) (< 2^18).
      const __m256 dots = _mm256_cvtepi32_ps(_mm256_mullo_epi32(scales32, BlockSums(lo, hi)));
      const __m256 min_sums = _mm256_cvtepi32_ps(_mm256_mullo_epi32(mins32, BlockQSums(xb)));
      const __m256 per_block = _mm256_fmsub_ps(d, dots, _mm256_mul_ps(dmin, min_sums));
      acc[r] = _mm256_fmadd_ps(BlockScales(xb), per_block, acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) out[r] = HorizontalSum(acc[r]);
}

// Q6_K values minus 32 (-32..31) of one super-block, one vector per Q8 block j: half h = j / 4,
// quarter k = j % 4.
void UnpackQ6KValues(const uint8_t* block, __m256i values[8]) {
  const __m256i low_nibble = _mm256_set1_epi8(0x0F);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  const __m256i bias = _mm256_set1_epi8(32);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = block + kQ6_KQlOffset + 64 * h;
    const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
    const __m256i qh = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(block + kQ6_KQhOffset + 32 * h));
    const __m256i low[4] = {
        _mm256_and_si256(ql0, low_nibble), _mm256_and_si256(ql1, low_nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_nibble),
        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_nibble)};
    const __m256i high[4] = {
        _mm256_and_si256(qh, two_bits), _mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits),
        _mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits),
        _mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits)};
    for (int k = 0; k < 4; ++k) {
      const __m256i level = _mm256_or_si256(low[k], _mm256_slli_epi16(high[k], 4));
      values[4 * h + k] = _mm256_sub_epi8(level, bias);
    }
  }
}

// |v| * (qx with v's sign) == v * qx; activations never hold -128, so the sign flip is exact.
__m256i SignedDot(__m256i v, __m256i abs_v, __m256i qx) {
  return DotU8I8(abs_v, _mm256_sign_epi8(qx, v));
}

template <int NX>
void DotQ6_KN(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  __m256 acc[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = w + b * kQ6_KBlockBytes;
    const __m256 d = _mm256_set1_ps(LoadF16(block + kQ6_KDOffset));
    // The 16-value scales in HalfSums lane order: scale 2j (elements 0..15 of block j) in the
    // low half, 2j + 1 in the high half.
    const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQ6_KScalesOffset));
    const __m128i even_odd = _mm_shuffle_epi8(
        scales8, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    const __m256i scales_0123 = _mm256_cvtepi8_epi32(even_odd);
    const __m256i scales_4567 = _mm256_cvtepi8_epi32(_mm_srli_si128(even_odd, 8));
    __m256i values[8], abs_values[8];
    UnpackQ6KValues(block, values);
    for (int j = 0; j < 8; ++j) abs_values[j] = _mm256_sign_epi8(values[j], values[j]);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const Q8Block* xb = x[r] + 8 * b;
      __m256i dots[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) dots[j] = SignedDot(values[j], abs_values[j], LoadQ(xb[j]));
      // Scaled per 16 values, then the two halves of each block added: lane j is the exact
      // integer sum of block j (< 2^24).
      const __m256i lo = _mm256_mullo_epi32(scales_0123, HalfSums(dots[0], dots[1], dots[2], dots[3]));
      const __m256i hi = _mm256_mullo_epi32(scales_4567, HalfSums(dots[4], dots[5], dots[6], dots[7]));
      const __m256 block_dots = _mm256_cvtepi32_ps(BlockSums(lo, hi));
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(d, BlockScales(xb)), block_dots, acc[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) out[r] = HorizontalSum(acc[r]);
}

template <bool kFiveBit>
void DotScaleMinK(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DispatchRows(num_x,
               [&](auto nx) { DotScaleMinKN<decltype(nx)::value, kFiveBit>(w, x, nb, out); });
}

}  // namespace

void DotQ4_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DotScaleMinK<false>(w, x, num_x, nb, out);
}

void DotQ5_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DotScaleMinK<true>(w, x, num_x, nb, out);
}

void DotQ6_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DispatchRows(num_x, [&](auto nx) { DotQ6_KN<decltype(nx)::value>(w, x, nb, out); });
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
