// Internal to the CPU backend: the AVX2 kernels split over three files (dot products and
// quantization in kernels_avx2.cc, K-quant dot products in kernels_avx2_kquant.cc, vector and
// attention kernels in kernels_avx2_vector.cc).
// Every function here requires AVX2 + FMA + F16C; only Avx2CpuKernels() hands them out.
//
//   avx2_internal::DotF32(k_row, q_heads, 3, 64, dots);
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CPU_KERNELS_AVX2_INTERNAL_H_
#define TPSERVE_KERNELS_CPU_KERNELS_AVX2_INTERNAL_H_

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {

inline float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i LoadQ(const Q8Block& b) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.q));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// kernels_avx2.cc
void QuantizeQ8(const float* x, int64_t k, Q8Block* out);
void DotQ8_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ4_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ4_1(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotF32(const float* w, const float* const* x, int num_x, int64_t n, float* out);

// kernels_avx2_kquant.cc
void DotQ4_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ5_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ6_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);

// kernels_avx2_vector.cc
void F16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* out);
void Axpy(float a, const float* x, int64_t n, float* y);
void Scale(float a, int64_t n, float* y);
float ExpSubSum(float* x, int64_t n, float max);
void AttnScores(const float* const* q, int num_q, const float* k, int64_t stride, int64_t count,
                int64_t head_dim, float scale, float* scores, int64_t scores_stride);
void AttnAccumulate(const float* p, const float* v, int64_t stride, int64_t count,
                    int64_t head_dim, float* out);

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)

#endif  // TPSERVE_KERNELS_CPU_KERNELS_AVX2_INTERNAL_H_
