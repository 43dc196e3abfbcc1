// AVX2 + FMA + F16C activation quantization, the Q8_0 dots, the row-group dots of the other
// 32-value GGML blocks (kernels_avx2_rows.inc, with AVX2's int8 dots) and the f32/f16/bf16 dots
// (the K-quant dots are in kernels_avx2_kquant.cc). The file is compiled for that target via the
// pragma below, so the rest of the binary stays portable; Avx2CpuKernels() must only be used
// after DetectCpuIsa() says the CPU has these extensions.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "formats/dtype.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve {
namespace avx2_internal {
namespace {

float RoundThroughF16(float f) { return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)); }

// Sum of adjacent byte products in groups of 4 -> 8 floats. `u` is read as unsigned bytes,
// `s` as signed; |u * s| pairs stay below int16 saturation for our value ranges.
__m256 MulSumU8I8(__m256i u, __m256i s) {
  const __m256i pairs = _mm256_maddubs_epi16(u, s);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

}  // namespace

void QuantizeQ8(const float* x, int64_t k, Q8Block* out) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + 8 * i);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float max_abs = _mm_cvtss_f32(m);
    const __m256 id = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
    __m256i q32[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], id),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      q32[i] = _mm256_cvtps_epi32(r);
    }
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q32[0], q32[1]),
                                   _mm256_add_epi32(q32[2], q32[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_hadd_epi32(s4, s4);
    s4 = _mm_hadd_epi32(s4, s4);
    // Packing works per 128-bit lane; the permute restores element order.
    const __m256i q16a = _mm256_packs_epi32(q32[0], q32[1]);
    const __m256i q16b = _mm256_packs_epi32(q32[2], q32[3]);
    __m256i q8 = _mm256_packs_epi16(q16a, q16b);
    q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), q8);
    out[b].d = RoundThroughF16(max_abs / 127.0f);
    out[b].sum = _mm_cvtsi128_si32(s4);
    out[b].s = RoundThroughF16(out[b].d * static_cast<float>(out[b].sum));
  }
}

namespace {

// The row-group kernels (kernels_avx2_rows.inc) with AVX2's int8 dots: a product of a level
// (<= 15) and an activation (|q| <= 128) pair-summed is at most 3840 in magnitude, eight such
// pairs 30720, so the int16 sums of all eight 4-byte groups cannot saturate and one vpmaddwd
// widens them.
__attribute__((always_inline)) inline __m256i BlockDot4Bit(const __m256i (&levels)[8],
                                                           const int8_t* q);
// Levels <= 31: a pair sum reaches 7936, so four groups share an int16 sum (31744), not eight.
__attribute__((always_inline)) inline __m256i BlockDot5Bit(const __m256i (&levels)[8],
                                                           const int8_t* q);

#include "kernels/cpu/kernels_avx2_rows.inc"

__m256i BlockDot4Bit(const __m256i (&levels)[8], const int8_t* q) {
  __m256i pairs = _mm256_maddubs_epi16(levels[0], _mm256_set1_epi32(Load32(q)));
#pragma GCC unroll 7
  for (int c = 1; c < 8; ++c) {
    pairs = _mm256_add_epi16(pairs,
                             _mm256_maddubs_epi16(levels[c], _mm256_set1_epi32(Load32(q + 4 * c))));
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

__m256i BlockDot5Bit(const __m256i (&levels)[8], const int8_t* q) {
  __m256i pairs[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    pairs[h] = _mm256_maddubs_epi16(levels[4 * h], _mm256_set1_epi32(Load32(q + 16 * h)));
#pragma GCC unroll 3
    for (int c = 4 * h + 1; c < 4 * h + 4; ++c) {
      pairs[h] = _mm256_add_epi16(
          pairs[h], _mm256_maddubs_epi16(levels[c], _mm256_set1_epi32(Load32(q + 4 * c))));
    }
  }
  const __m256i ones = _mm256_set1_epi16(1);
  return _mm256_add_epi32(_mm256_madd_epi16(pairs[0], ones), _mm256_madd_epi16(pairs[1], ones));
}

// Q8_0, one weight row per call (the row groups lose to it on DRAM-streamed matrices at m = 1:
// docs/PERFORMANCE.md). Batch invariance: the N-row kernel sums exactly as its one-row (decode)
// twin, so a row's result does not depend on how many rows share the call (which depends on the
// other requests in the step). Even blocks go to one accumulator and odd blocks
// to another (the twin's two FMA chains), and the two are added before the horizontal sum.
template <int NX>
void DotQ8_0N(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  __m256 acc[2][NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
  auto block_into = [&](int64_t b, __m256* a) __attribute__((always_inline)) {
    const uint8_t* block = w + b * 34;
    const float dw = LoadF16(block);
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
    const __m256i abs_w = _mm256_sign_epi8(qw, qw);
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      // |w| * (x with w's sign) == w * x, in the unsigned-by-signed form maddubs takes.
      const __m256 p = MulSumU8I8(abs_w, _mm256_sign_epi8(LoadQ(x[j][b]), qw));
      a[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j][b].d), p, a[j]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    block_into(b, acc[0]);
    block_into(b + 1, acc[1]);
  }
  if (b < num_blocks) block_into(b, acc[0]);
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) out[j] = HorizontalSum(_mm256_add_ps(acc[0][j], acc[1][j]));
}

void DotQ8_0One(const uint8_t* w, const Q8Block* x, int64_t num_blocks, float* out) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    const uint8_t* b0 = w + b * 34;
    const uint8_t* b1 = b0 + 34;
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
    const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b1 + 2));
    const __m256 p0 = MulSumU8I8(_mm256_sign_epi8(q0, q0), _mm256_sign_epi8(LoadQ(x[b]), q0));
    const __m256 p1 =
        MulSumU8I8(_mm256_sign_epi8(q1, q1), _mm256_sign_epi8(LoadQ(x[b + 1]), q1));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b0) * x[b].d), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b1) * x[b + 1].d), p1, acc1);
  }
  for (; b < num_blocks; ++b) {
    const uint8_t* b0 = w + b * 34;
    const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 2));
    const __m256 p0 = MulSumU8I8(_mm256_sign_epi8(q0, q0), _mm256_sign_epi8(LoadQ(x[b]), q0));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b0) * x[b].d), p0, acc0);
  }
  *out = HorizontalSum(_mm256_add_ps(acc0, acc1));
}

}  // namespace

// One activation row takes the decode twin (the same floats, see above).
void DotQ8_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  if (num_x == 1) return DotQ8_0One(w, x[0], nb, out);
  DispatchRows(num_x, [&](auto nx) { DotQ8_0N<decltype(nx)::value>(w, x, nb, out); });
}

void DotF32(const float* w, const float* const* x, int num_x, int64_t n, float* out) {
  DotRow<F32Lanes>(w, x, num_x, n, out);
}
void DotF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  DotRow<F16Lanes>(w, x, num_x, n, out);
}
void DotBF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  DotRow<BF16Lanes>(w, x, num_x, n, out);
}

// The plain table; Avx2CpuKernels() (kernels_bounds.cc) hands it out, under ASan wrapped.
const CpuKernels& Avx2Table() {
  static const CpuKernels kernels = {
      .quantize_q8 = avx2_internal::QuantizeQ8,
      .dot_q8_0 = avx2_internal::DotQ8_0,
      .dot_q4_0 = avx2_internal::DotQ4_0Rows,
      .dot_q4_1 = avx2_internal::DotQ4_1Rows,
      .dot_q5_0 = avx2_internal::DotQ5_0Rows,
      .dot_q5_1 = avx2_internal::DotQ5_1Rows,
      .dot_q4_K = avx2_internal::DotQ4_K,
      .dot_q5_K = avx2_internal::DotQ5_K,
      .dot_q6_K = avx2_internal::DotQ6_K,
      .dot_int4 = avx2_internal::DotInt4,
      .dot_fp8 = avx2_internal::DotFp8,
      .dot_f32 = avx2_internal::DotF32,
      .dot_f16 = avx2_internal::DotF16,
      .dot_bf16 = avx2_internal::DotBF16,
      .f16_to_f32 = avx2_internal::F16ToF32Row,
      .bf16_to_f32 = avx2_internal::BF16ToF32Row,
      .f32_to_f16 = avx2_internal::F32ToF16Row,
      .rms_norm = avx2_internal::RmsNorm,
      .silu_mul = avx2_internal::SiluMul,
      .gelu_tanh_mul = avx2_internal::GeluTanhMul,
      .add = avx2_internal::Add,
      .axpy = avx2_internal::Axpy,
      .scale = avx2_internal::Scale,
      .exp_sub_sum = avx2_internal::ExpSubSum,
      .attn_scores = avx2_internal::AttnScores,
      .attn_accumulate = avx2_internal::AttnAccumulate,
      .attn_scores_f16 = avx2_internal::AttnScoresF16,
      .attn_accumulate_f16 = avx2_internal::AttnAccumulateF16,
  };
  return kernels;
}

// kAvx2's table with the int8 dots of the row-group kernels as vpdpbusd (kernels_avx2_vnni.cc).
const CpuKernels& Avx512VnniTable() {
  static const CpuKernels kernels = [] {
    CpuKernels k = Avx2Table();
    k.dot_q4_0 = DotQ4_0RowsVnni;
    k.dot_q4_1 = DotQ4_1RowsVnni;
    k.dot_q5_0 = DotQ5_0RowsVnni;
    k.dot_q5_1 = DotQ5_1RowsVnni;
    return k;
  }();
  return kernels;
}

}  // namespace avx2_internal
}  // namespace tpserve

#pragma GCC pop_options

#endif  // defined(__x86_64__)
