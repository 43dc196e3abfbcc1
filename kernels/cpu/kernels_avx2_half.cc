// AVX2 + F16C dot products over 16-bit float rows (f16, bf16) against f32 vectors, each 8
// elements widened in registers where they are used instead of the whole row being copied to
// f32 first: weight rows (dot_f16, dot_bf16) and f16 KV cache rows (attn_scores_f16,
// attn_accumulate_f16). The loops mirror DotF32 (kernels_avx2.cc) and attn_scores /
// attn_accumulate (kernels_avx2_vector.cc) operation for operation, so the floats are the same
// as widening first.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {
namespace {

struct F16 {
  static __m256 Load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float Load1(uint16_t h) { return _cvtsh_ss(h); }
};

struct BF16 {
  static __m256 Load8(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float Load1(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

inline __m256 LoadF16x8(const uint16_t* p) { return F16::Load8(p); }

// DotF32N with the row in 16-bit floats.
template <typename Half, int NX>
void DotHalfN(const uint16_t* w, const float* const* x, int64_t n, float* out) {
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int j = 0; j < NX; ++j) acc[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 wv = Half::Load8(w + i);
#pragma GCC unroll 4
    for (int j = 0; j < NX; ++j) acc[j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i), acc[j]);
  }
  for (int j = 0; j < NX; ++j) {
    float sum = HorizontalSum(acc[j]);
    for (int64_t t = i; t < n; ++t) sum += Half::Load1(w[t]) * x[j][t];
    out[j] = sum;
  }
}

// DotF32One with the row in 16-bit floats: four independent accumulators.
template <typename Half>
void DotHalfOne(const uint16_t* w, const float* x, int64_t n, float* out) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int u = 0; u < 4; ++u) {
      acc[u] =
          _mm256_fmadd_ps(Half::Load8(w + i + 8 * u), _mm256_loadu_ps(x + i + 8 * u), acc[u]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    acc[0] = _mm256_fmadd_ps(Half::Load8(w + i), _mm256_loadu_ps(x + i), acc[0]);
  }
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]),
                                          _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += Half::Load1(w[i]) * x[i];
  *out = sum;
}

template <typename Half>
void DotHalf(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  switch (num_x) {
    case 1: DotHalfOne<Half>(w, x[0], n, out); break;
    case 2: DotHalfN<Half, 2>(w, x, n, out); break;
    case 3: DotHalfN<Half, 3>(w, x, n, out); break;
    default: DotHalfN<Half, 4>(w, x, n, out); break;
  }
}

}  // namespace

void DotF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  DotHalf<F16>(w, x, num_x, n, out);
}

void DotBF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  DotHalf<BF16>(w, x, num_x, n, out);
}

void AttnScoresF16(const float* const* q, int num_q, const uint16_t* k, int64_t stride,
                   int64_t count, int64_t head_dim, float scale, float* scores,
                   int64_t scores_stride) {
  float dots[kMaxDotRows];
  for (int64_t t = 0; t < count; ++t) {
    DotF16(k + t * stride, q, num_q, head_dim, dots);
    for (int h = 0; h < num_q; ++h) scores[h * scores_stride + t] = dots[h] * scale;
  }
}

void AttnAccumulateF16(const float* p, const uint16_t* v, int64_t stride, int64_t count,
                       int64_t head_dim, float* out) {
  int64_t d = 0;
  for (; d + 32 <= head_dim; d += 32) {
    __m256 acc[4];
    for (int u = 0; u < 4; ++u) acc[u] = _mm256_loadu_ps(out + d + 8 * u);
    for (int64_t t = 0; t < count; ++t) {
      const __m256 pt = _mm256_set1_ps(p[t]);
      const uint16_t* row = v + t * stride + d;
      for (int u = 0; u < 4; ++u) acc[u] = _mm256_fmadd_ps(pt, LoadF16x8(row + 8 * u), acc[u]);
    }
    for (int u = 0; u < 4; ++u) _mm256_storeu_ps(out + d + 8 * u, acc[u]);
  }
  for (; d + 8 <= head_dim; d += 8) {
    __m256 acc = _mm256_loadu_ps(out + d);
    for (int64_t t = 0; t < count; ++t) {
      acc = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), LoadF16x8(v + t * stride + d), acc);
    }
    _mm256_storeu_ps(out + d, acc);
  }
  for (; d < head_dim; ++d) {
    for (int64_t t = 0; t < count; ++t) out[d] += p[t] * _cvtsh_ss(v[t * stride + d]);
  }
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
