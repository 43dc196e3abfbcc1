// AVX2 + FMA + F16C activation quantization, the dots of the 32-value GGML blocks one weight row
// at a time and in row groups (kernels_avx2_rows.inc, with AVX2's int8 dots), the f32/f16/bf16
// dots (the K-quant dots are in kernels_avx2_kquant.cc). The file is compiled for that target via
// the pragma below, so the rest of the binary stays portable; Avx2CpuKernels() must only be
// used after DetectCpuIsa() says the CPU has these extensions.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>

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
// Q8_0's signed levels: vpmaddubsw multiplies |w| (as unsigned: -128 gives 128) by q with w's
// sign, whose pair sums (at most 2 * 128 * 128) cannot saturate; each 4-byte group is widened on
// its own.
struct Levels8Bit {
  __m256i abs[8];
  __m256i sign[8];
};
__attribute__((always_inline)) inline Levels8Bit Prepare8Bit(const __m256i (&levels)[8]) {
  Levels8Bit ready;
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    ready.abs[c] = _mm256_sign_epi8(levels[c], levels[c]);
    ready.sign[c] = levels[c];
  }
  return ready;
}
__attribute__((always_inline)) inline __m256i BlockDot8Bit(const Levels8Bit& levels,
                                                           const int8_t* q, int32_t sum);

#include "kernels/cpu/kernels_avx2_rows.inc"

__m256i BlockDot8Bit(const Levels8Bit& levels, const int8_t* q, int32_t /*sum*/) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sums = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i signed_q =
        _mm256_sign_epi8(_mm256_set1_epi32(Load32(q + 4 * c)), levels.sign[c]);
    sums = _mm256_add_epi32(
        sums, _mm256_madd_epi16(_mm256_maddubs_epi16(levels.abs[c], signed_q), ones));
  }
  return sums;
}

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

// The per-row kernels of the 32-value blocks (CpuKernels::dot_q4_0 ... dot_q5_1; Q8_0 below):
// one weight row per call, for rows too long for the row groups (cpu_matmul.cc).
template <int NX>
void DotQ4_0N(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  __m256 acc[NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = w + b * 18;
    const float dw = LoadF16(block);
    const __m256i qw = _mm256_sub_epi8(UnpackNibbles(block + 2), _mm256_set1_epi8(8));
    const __m256i abs_w = _mm256_sign_epi8(qw, qw);
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const __m256 p = MulSumU8I8(abs_w, _mm256_sign_epi8(LoadQ(x[j][b]), qw));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j][b].d), p, acc[j]);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) out[j] = HorizontalSum(acc[j]);
}

template <int NX>
void DotQ4_1N(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  __m256 acc[2][NX];
  float offsets[2][NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    offsets[0][j] = offsets[1][j] = 0.0f;
  }
  auto block_into = [&](int64_t b, __m256* a, float* off) __attribute__((always_inline)) {
    const uint8_t* block = w + b * 20;
    const float dw = LoadF16(block);
    const float mw = LoadF16(block + 2);
    const __m256i qw = UnpackNibbles(block + 4);  // 0..15, already unsigned
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const __m256 p = MulSumU8I8(qw, LoadQ(x[j][b]));
      a[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j][b].d), p, a[j]);
      off[j] = std::fma(mw, x[j][b].s, off[j]);  // fused, as DotQ4_1One's lane 1
    }
  };
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    block_into(b, acc[0], offsets[0]);
    block_into(b + 1, acc[1], offsets[1]);
  }
  if (b < num_blocks) block_into(b, acc[0], offsets[0]);
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    out[j] = HorizontalSum(_mm256_add_ps(acc[0][j], acc[1][j])) + (offsets[0][j] + offsets[1][j]);
  }
}

// Single activation row (decode): two blocks per iteration with separate accumulators, so
// the FMA latency chains overlap. A block's two f16 scalars (d, m) widen together and meet the
// activation block's (d, s) in one multiply-add: lane 0 is the block's scale d * x.d, lane 1
// accumulates the offsets m * x.s (the same fused operations, in the same order, as one
// scalar each: the floats do not change).
__attribute__((always_inline)) inline __m128 LoadDm(const uint8_t* block) {
  uint32_t dm;
  std::memcpy(&dm, block, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm)));
}
__attribute__((always_inline)) inline __m128 LoadDs(const Q8Block& x) {
  // d and s are two adjacent floats, 4-byte aligned: an unaligned 64-bit load (loadl_epi64
  // is declared unaligned; _mm_load_sd of a double* would claim 8-byte alignment).
  return _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(&x.d)));
}

void DotQ4_1One(const uint8_t* w, const Q8Block* x, int64_t num_blocks, float* out) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  // Lane 1: offsets. Lane 0 is a scratch product, cleared before the final sum.
  __m128 off0 = _mm_setzero_ps(), off1 = _mm_setzero_ps();
  const __m128 lane1 = _mm_castsi128_ps(_mm_setr_epi32(0, -1, 0, 0));
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    const uint8_t* b0 = w + b * 20;
    const uint8_t* b1 = b0 + 20;
    const __m256 p0 = MulSumU8I8(UnpackNibbles(b0 + 4), LoadQ(x[b]));
    const __m256 p1 = MulSumU8I8(UnpackNibbles(b1 + 4), LoadQ(x[b + 1]));
    const __m128 dm0 = LoadDm(b0), ds0 = LoadDs(x[b]);
    const __m128 dm1 = LoadDm(b1), ds1 = LoadDs(x[b + 1]);
    acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_mul_ps(dm0, ds0)), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_mul_ps(dm1, ds1)), p1, acc1);
    off0 = _mm_fmadd_ps(dm0, _mm_and_ps(ds0, lane1), off0);
    off1 = _mm_fmadd_ps(dm1, _mm_and_ps(ds1, lane1), off1);
  }
  for (; b < num_blocks; ++b) {
    const uint8_t* b0 = w + b * 20;
    const __m256 p0 = MulSumU8I8(UnpackNibbles(b0 + 4), LoadQ(x[b]));
    const __m128 dm0 = LoadDm(b0), ds0 = LoadDs(x[b]);
    acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_mul_ps(dm0, ds0)), p0, acc0);
    off0 = _mm_fmadd_ps(dm0, _mm_and_ps(ds0, lane1), off0);
  }
  const float offsets = _mm_cvtss_f32(_mm_shuffle_ps(off0, off0, 1)) +
                        _mm_cvtss_f32(_mm_shuffle_ps(off1, off1, 1));
  *out = HorizontalSum(_mm256_add_ps(acc0, acc1)) + offsets;
}

// Bit i of qh -> byte i of the result: 0x10 where the bit is set, 0 elsewhere (the fifth bit
// of Q5 element i, in UnpackNibbles' element order).
__m256i FifthBits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                       3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// One Q5 block's 32 levels: 0..31 for Q5_1, q - 16 (signed) for Q5_0.
template <bool kWithMin>
__m256i Q5Levels(const uint8_t* block) {
  const uint8_t* qh_bytes = block + (kWithMin ? 4 : 2);
  const __m256i q = _mm256_or_si256(UnpackNibbles(qh_bytes + 4), FifthBits(qh_bytes));
  return kWithMin ? q : _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}

// sum(level * qx) per lane pair group: unsigned levels directly, signed ones by moving their
// sign onto the activations (as Q8_0).
template <bool kWithMin>
__m256 Q5Products(__m256i levels, __m256i qx) {
  if (kWithMin) return MulSumU8I8(levels, qx);
  return MulSumU8I8(_mm256_sign_epi8(levels, levels), _mm256_sign_epi8(qx, levels));
}

template <bool kWithMin, int NX>
void DotQ5N(const uint8_t* w, const Q8Block* const* x, int64_t num_blocks, float* out) {
  constexpr int kBlockBytes = kWithMin ? 24 : 22;
  __m256 acc[2][NX];
  float offsets[2][NX];
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    acc[0][j] = acc[1][j] = _mm256_setzero_ps();
    offsets[0][j] = offsets[1][j] = 0.0f;
  }
  auto block_into = [&](int64_t b, __m256* a, float* off) __attribute__((always_inline)) {
    const uint8_t* block = w + b * kBlockBytes;
    const float dw = LoadF16(block);
    const __m256i levels = Q5Levels<kWithMin>(block);
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) {
      const __m256 p = Q5Products<kWithMin>(levels, LoadQ(x[j][b]));
      a[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * x[j][b].d), p, a[j]);
      if (kWithMin) off[j] = std::fma(LoadF16(block + 2), x[j][b].s, off[j]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    block_into(b, acc[0], offsets[0]);
    block_into(b + 1, acc[1], offsets[1]);
  }
  if (b < num_blocks) block_into(b, acc[0], offsets[0]);
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    out[j] = HorizontalSum(_mm256_add_ps(acc[0][j], acc[1][j])) + (offsets[0][j] + offsets[1][j]);
  }
}

// Single activation row (decode): two blocks per iteration with separate accumulators.
template <bool kWithMin>
void DotQ5One(const uint8_t* w, const Q8Block* x, int64_t num_blocks, float* out) {
  constexpr int kBlockBytes = kWithMin ? 24 : 22;
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  float off0 = 0.0f, off1 = 0.0f;
  int64_t b = 0;
  for (; b + 2 <= num_blocks; b += 2) {
    const uint8_t* b0 = w + b * kBlockBytes;
    const uint8_t* b1 = b0 + kBlockBytes;
    const __m256 p0 = Q5Products<kWithMin>(Q5Levels<kWithMin>(b0), LoadQ(x[b]));
    const __m256 p1 = Q5Products<kWithMin>(Q5Levels<kWithMin>(b1), LoadQ(x[b + 1]));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b0) * x[b].d), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b1) * x[b + 1].d), p1, acc1);
    if (kWithMin) {
      off0 = std::fma(LoadF16(b0 + 2), x[b].s, off0);
      off1 = std::fma(LoadF16(b1 + 2), x[b + 1].s, off1);
    }
  }
  for (; b < num_blocks; ++b) {
    const uint8_t* b0 = w + b * kBlockBytes;
    const __m256 p0 = Q5Products<kWithMin>(Q5Levels<kWithMin>(b0), LoadQ(x[b]));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(LoadF16(b0) * x[b].d), p0, acc0);
    if (kWithMin) off0 = std::fma(LoadF16(b0 + 2), x[b].s, off0);
  }
  *out = HorizontalSum(_mm256_add_ps(acc0, acc1)) + (off0 + off1);
}

template <int NX>
void DotQ5_0N(const uint8_t* w, const Q8Block* const* x, int64_t nb, float* out) {
  DotQ5N<false, NX>(w, x, nb, out);
}
template <int NX>
void DotQ5_1N(const uint8_t* w, const Q8Block* const* x, int64_t nb, float* out) {
  DotQ5N<true, NX>(w, x, nb, out);
}

// Q8_0, one weight row per call (its row groups lost to it on DRAM-streamed matrices at m = 1:
// docs/PERFORMANCE.md). Batch invariance, here and above: every N-row kernel that has a one-row
// (decode) twin sums exactly as that twin does, so a row's result does not depend on how many
// rows share the call (which depends on the other requests in the step). Even blocks go to one
// accumulator and odd blocks to another (the twin's two FMA chains), and the two are added
// before the horizontal sum.
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

// One activation row takes the decode twin where there is one (the same floats, see above).
#define TP_DOT_ROWS(FN) \
  DispatchRows(num_x, [&](auto nx) { FN<decltype(nx)::value>(w, x, nb, out); })

void DotQ8_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  if (num_x == 1) return DotQ8_0One(w, x[0], nb, out);
  TP_DOT_ROWS(DotQ8_0N);
}
void DotQ4_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  TP_DOT_ROWS(DotQ4_0N);
}
void DotQ4_1(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  if (num_x == 1) return DotQ4_1One(w, x[0], nb, out);
  TP_DOT_ROWS(DotQ4_1N);
}
void DotQ5_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  if (num_x == 1) return DotQ5One<false>(w, x[0], nb, out);
  TP_DOT_ROWS(DotQ5_0N);
}
void DotQ5_1(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out) {
  if (num_x == 1) return DotQ5One<true>(w, x[0], nb, out);
  TP_DOT_ROWS(DotQ5_1N);
}
#undef TP_DOT_ROWS

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
      .dot_q4_0 = avx2_internal::DotQ4_0,
      .dot_q4_1 = avx2_internal::DotQ4_1,
      .dot_q5_0 = avx2_internal::DotQ5_0,
      .dot_q5_1 = avx2_internal::DotQ5_1,
      .dot_q4_0_rows = avx2_internal::DotNibbleRows<4, false>,
      .dot_q4_1_rows = avx2_internal::DotNibbleRows<4, true>,
      .dot_q5_0_rows = avx2_internal::DotNibbleRows<5, false>,
      .dot_q5_1_rows = avx2_internal::DotNibbleRows<5, true>,
      .dot_q8_0_rows = avx2_internal::DotQ8_0Rows,
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
    k.dot_q4_0_rows = DotNibbleRowsVnni<4, false>;
    k.dot_q4_1_rows = DotNibbleRowsVnni<4, true>;
    k.dot_q5_0_rows = DotNibbleRowsVnni<5, false>;
    k.dot_q5_1_rows = DotNibbleRowsVnni<5, true>;
    k.dot_q8_0_rows = DotQ8_0RowsVnni;
    return k;
  }();
  return kernels;
}

}  // namespace avx2_internal
}  // namespace tpserve

#pragma GCC pop_options

#endif  // defined(__x86_64__)
