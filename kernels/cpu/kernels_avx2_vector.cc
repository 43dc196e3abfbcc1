// AVX2 + FMA + F16C vector kernels: type conversions, RMSNorm, SwiGLU, exp, and the attention
// inner loops. Compiled for that target via the pragma below (see kernels_avx2.cc).
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>

#include "formats/dtype.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {
namespace {

// exp(x) to about 2 ulp: x = n ln2 + r with |r| <= ln2/2, degree-6 Taylor polynomial for
// exp(r), times 2^n built in the exponent bits. Inputs are clamped to the finite f32 range.
__m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 128]: 2^n for n = 128 overflows the exponent field, so split it in two halves.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  const __m256 s1 = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(half, _mm256_set1_epi32(127)), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(
      _mm256_add_epi32(_mm256_sub_epi32(ni, half), _mm256_set1_epi32(127)), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

}  // namespace

void F16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(wide));
  }
  for (; i < n; ++i) dst[i] = BF16ToF32(src[i]);
}

void F32ToF16Row(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(src + i);
    // vcvtps2ph rounds to nearest even as F32ToF16 does, but quiets NaNs: those (never in a
    // sane KV row) take the scalar rule.
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) {
      for (int64_t j = i; j < i + 8; ++j) dst[j] = F32ToF16(src[j]);
      continue;
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  // Squares rounded to f32, summed in f64 (as the scalar reference and llama.cpp do).
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm_mul_ps(v, v)));
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, acc);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp(_mm256_sub_ps(zero, g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c1 = _mm256_set1_ps(-2.0f * kSqrt2OverPi);
  const __m256 c3 = _mm256_set1_ps(0.044715f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    // -2u = -2 sqrt(2/pi) (g + 0.044715 g^3)
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(c3, g), _mm256_mul_ps(g, g), g);
    const __m256 e = Exp(_mm256_mul_ps(c1, inner));
    const __m256 gelu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + std::exp(-2.0f * u)) * up[i];
  }
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

void Axpy(float a, const float* x, int64_t n, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

void Scale(float a, int64_t n, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] *= a;
}

float ExpSubSum(float* x, int64_t n, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = HorizontalSum(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

void AttnScores(const float* const* q, int num_q, const float* k, int64_t stride, int64_t count,
                int64_t head_dim, float scale, float* scores, int64_t scores_stride) {
  AttnScoresRows<F32Lanes>(q, num_q, k, stride, count, head_dim, scale, scores, scores_stride);
}
void AttnScoresF16(const float* const* q, int num_q, const uint16_t* k, int64_t stride,
                   int64_t count, int64_t head_dim, float scale, float* scores,
                   int64_t scores_stride) {
  AttnScoresRows<F16Lanes>(q, num_q, k, stride, count, head_dim, scale, scores, scores_stride);
}

void AttnAccumulate(const float* const* p, int num_heads, const float* v, int64_t stride,
                    int64_t count, int64_t head_dim, float* const* out) {
  AttnAccumulateHeads<F32Lanes>(p, num_heads, v, stride, count, head_dim, out);
}
void AttnAccumulateF16(const float* const* p, int num_heads, const uint16_t* v, int64_t stride,
                       int64_t count, int64_t head_dim, float* const* out) {
  AttnAccumulateHeads<F16Lanes>(p, num_heads, v, stride, count, head_dim, out);
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
