// AVX2 dot products of K-quant weight rows (Q4_K, Q5_K, Q6_K; layout: formats/k_quant.h) with
// Q8 activation blocks. Each super-block is unpacked once into eight 32-byte vectors of levels,
// one per 32-value sub-block, and multiplied against up to kMaxDotRows activation rows. Every
// integer sum is exact (the same integers as the scalar reference); only the float
// accumulation order differs. Compiled for AVX2 + FMA + F16C via the pragma below.
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

static_assert(sizeof(Q8Block) % sizeof(float) == 0, "Q8Block fields are gathered as 32-bit words");

// Gather indices (in 32-bit words) of one field in 8 consecutive Q8Blocks. A function, not a
// global: a global's initializer would run AVX2 code at start-up on every CPU.
__m256i BlockStrideWords() {
  constexpr int kWords = sizeof(Q8Block) / sizeof(float);
  return _mm256_setr_epi32(0, kWords, 2 * kWords, 3 * kWords, 4 * kWords, 5 * kWords,
                           6 * kWords, 7 * kWords);
}

// 32 unsigned levels u times signed activations s, summed in pairs and then weighted by the
// 16-bit `scale16` lanes: 8 exact int32 partial sums. |u * s| pair sums stay below 2^15.
__m256i ScaledDotU8I8(__m256i u, __m256i s, __m256i scale16) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), scale16);
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
    const __m256i one = _mm256_set1_epi8(1);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Bit j of each byte, moved to bit 4; the 16-bit shifts never carry between bytes here.
      const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(high_bits, _mm_cvtsi32_si128(j)), one);
      levels[j] = _mm256_or_si256(levels[j], _mm256_slli_epi16(bit, 4));
    }
  }
}

template <int NX, bool kFiveBit>
void DotScaleMinKN(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  constexpr int kBlockBytes = kFiveBit ? kQ5_KBlockBytes : kQ4_KBlockBytes;
  __m256 acc[NX], acc_min[NX];
#pragma GCC unroll 4
  for (int r = 0; r < NX; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = w + b * kBlockBytes;
    const float d = LoadF16(block);
    const __m256 dmin = _mm256_set1_ps(LoadF16(block + 2));
    uint8_t scales[8], mins[8];
    UnpackKScaleMins(block + kQ4_KScalesOffset, scales, mins);
    __m256i levels[8];
    UnpackScaleMinLevels<kFiveBit>(block, levels);
    __m128i mins_u8;
    std::memcpy(&mins_u8, mins, 8);
    const __m256i mins32 = _mm256_cvtepu8_epi32(mins_u8);
#pragma GCC unroll 4
    for (int r = 0; r < NX; ++r) {
      const Q8Block* xb = x[r] + 8 * b;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        const __m256i p = ScaledDotU8I8(levels[j], LoadQ(xb[j]), _mm256_set1_epi16(scales[j]));
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb[j].d), _mm256_cvtepi32_ps(p), acc[r]);
      }
      // Lane j: dx_j * (min_j * sum_j), the integer product exact (< 2^18).
      const __m256 dx = _mm256_i32gather_ps(&xb->d, BlockStrideWords(), 4);
      const __m256i sums =
          _mm256_i32gather_epi32(reinterpret_cast<const int*>(&xb->sum), BlockStrideWords(), 4);
      const __m256 min_sums = _mm256_cvtepi32_ps(_mm256_mullo_epi32(mins32, sums));
      acc_min[r] = _mm256_fmadd_ps(dmin, _mm256_mul_ps(dx, min_sums), acc_min[r]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NX; ++r) out[r] = HorizontalSum(acc[r]) - HorizontalSum(acc_min[r]);
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

template <int NX>
void DotQ6_KN(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int r = 0; r < NX; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = w + b * kQ6_KBlockBytes;
    const float d = LoadF16(block + kQ6_KDOffset);
    const auto* scales = reinterpret_cast<const int8_t*>(block + kQ6_KScalesOffset);
    __m256i values[8], abs_values[8], scale16[8];
    UnpackQ6KValues(block, values);
    for (int j = 0; j < 8; ++j) {
      abs_values[j] = _mm256_sign_epi8(values[j], values[j]);
      // Elements 0..15 of the block (low 128-bit lane) use scale 2j, 16..31 scale 2j + 1.
      scale16[j] = _mm256_set_m128i(_mm_set1_epi16(scales[2 * j + 1]),
                                    _mm_set1_epi16(scales[2 * j]));
    }
#pragma GCC unroll 4
    for (int r = 0; r < NX; ++r) {
      const Q8Block* xb = x[r] + 8 * b;
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        // |v| * (qx with v's sign) == v * qx; activations never hold -128, so no overflow.
        const __m256i p = ScaledDotU8I8(abs_values[j], _mm256_sign_epi8(LoadQ(xb[j]), values[j]),
                                        scale16[j]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * xb[j].d), _mm256_cvtepi32_ps(p), acc[r]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < NX; ++r) out[r] = HorizontalSum(acc[r]);
}

template <bool kFiveBit>
void DotScaleMinK(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  switch (num_x) {
    case 1: return DotScaleMinKN<1, kFiveBit>(w, x, nb, out);
    case 2: return DotScaleMinKN<2, kFiveBit>(w, x, nb, out);
    case 3: return DotScaleMinKN<3, kFiveBit>(w, x, nb, out);
    default: return DotScaleMinKN<4, kFiveBit>(w, x, nb, out);
  }
}

}  // namespace

void DotQ4_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DotScaleMinK<false>(w, x, num_x, nb, out);
}

void DotQ5_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  DotScaleMinK<true>(w, x, num_x, nb, out);
}

void DotQ6_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  switch (num_x) {
    case 1: return DotQ6_KN<1>(w, x, nb, out);
    case 2: return DotQ6_KN<2>(w, x, nb, out);
    case 3: return DotQ6_KN<3>(w, x, nb, out);
    default: return DotQ6_KN<4>(w, x, nb, out);
  }
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
