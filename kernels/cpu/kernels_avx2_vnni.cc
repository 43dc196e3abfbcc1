// The row-group dot products (kernels_avx2_rows.inc) with AVX-512 VNNI's vpdpbusd on 256-bit
// registers (AVX512VL): one instruction for each 4-byte group's products and their sum where AVX2
// takes vpmaddubsw + vpaddw (kernels_avx2.cc). The integers are the same, so the floats are.
// Compiled for that target via the pragma below; only Avx512VnniCpuKernels() hands this out,
// after CpuSupportsIsa(CpuIsa::kAvx512Vnni). This file includes no header with inline code of
// the AVX2 files (kernels_avx2_internal.h), so no function compiled here for AVX-512 can stand in
// for one of theirs at link time.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")

namespace tpserve {
namespace avx2_internal {
namespace {

// Two chains of four, so consecutive vpdpbusd do not wait on each other.
__attribute__((always_inline)) inline __m256i BlockDot4Bit(const __m256i (&levels)[8],
                                                           const int8_t* q);
// vpdpbusd sums in int32, so levels up to 31 take the same path.
__attribute__((always_inline)) inline __m256i BlockDot5Bit(const __m256i (&levels)[8],
                                                           const int8_t* q) {
  return BlockDot4Bit(levels, q);
}


// Q8_0's signed levels as w + 128 (0..255, what vpdpbusd takes unsigned):
// sum((w + 128) * q) - 128 * sum(q), all exact in int32.
struct Levels8Bit {
  __m256i biased[8];
};
__attribute__((always_inline)) inline Levels8Bit Prepare8Bit(const __m256i (&levels)[8]) {
  Levels8Bit ready;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) ready.biased[c] = _mm256_xor_si256(levels[c], bias);
  return ready;
}
__attribute__((always_inline)) inline __m256i BlockDot8Bit(const Levels8Bit& levels,
                                                           const int8_t* q, int32_t sum);

#include "kernels/cpu/kernels_avx2_rows.inc"

__m256i BlockDot8Bit(const Levels8Bit& levels, const int8_t* q, int32_t sum) {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo = _mm256_dpbusd_epi32(lo, levels.biased[c], _mm256_set1_epi32(Load32(q + 4 * c)));
    hi = _mm256_dpbusd_epi32(hi, levels.biased[c + 4],
                             _mm256_set1_epi32(Load32(q + 16 + 4 * c)));
  }
  return _mm256_sub_epi32(_mm256_add_epi32(lo, hi), _mm256_set1_epi32(128 * sum));
}

__m256i BlockDot4Bit(const __m256i (&levels)[8], const int8_t* q) {
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo = _mm256_dpbusd_epi32(lo, levels[c], _mm256_set1_epi32(Load32(q + 4 * c)));
    hi = _mm256_dpbusd_epi32(hi, levels[c + 4], _mm256_set1_epi32(Load32(q + 16 + 4 * c)));
  }
  return _mm256_add_epi32(lo, hi);
}

}  // namespace

template <int kBits, bool kWithMin>
void DotNibbleRowsVnni(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                       const Q8Block* const* x, int num_x, int64_t num_blocks, float* out) {
  DotNibbleRows<kBits, kWithMin>(w, row_stride, block_stride, num_w, x, num_x, num_blocks, out);
}
void DotQ8_0RowsVnni(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                     const Q8Block* const* x, int num_x, int64_t num_blocks, float* out) {
  DotQ8_0Rows(w, row_stride, block_stride, num_w, x, num_x, num_blocks, out);
}
template void DotNibbleRowsVnni<4, false>(const uint8_t*, int64_t, int64_t, int,
                                          const Q8Block* const*, int, int64_t,
                                          float*);
template void DotNibbleRowsVnni<4, true>(const uint8_t*, int64_t, int64_t, int,
                                         const Q8Block* const*, int, int64_t,
                                         float*);
template void DotNibbleRowsVnni<5, false>(const uint8_t*, int64_t, int64_t, int,
                                          const Q8Block* const*, int, int64_t,
                                          float*);
template void DotNibbleRowsVnni<5, true>(const uint8_t*, int64_t, int64_t, int,
                                         const Q8Block* const*, int, int64_t,
                                         float*);

}  // namespace avx2_internal
}  // namespace tpserve

#pragma GCC pop_options

#endif  // defined(__x86_64__)
