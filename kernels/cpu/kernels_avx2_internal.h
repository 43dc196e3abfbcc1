// Internal to the CPU backend: the AVX2 kernels split over five files (dot products and
// quantization in kernels_avx2.cc, K-quant dot products in kernels_avx2_kquant.cc, int4 group
// and fp8 dot products in kernels_avx2_int4.cc and kernels_avx2_fp8.cc, vector and attention
// kernels in kernels_avx2_vector.cc), and the helpers they share, among them one dot product
// and one attention loop over rows of f32, f16 or bf16 elements.
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
#include <type_traits>

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

// 16 bytes of nibbles -> 32 bytes: elements 0..15 (low nibbles) then 16..31 (high nibbles).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 unsigned levels u times signed activations s: 8 exact int32 partial sums, lanes 0..3 from
// elements 0..15 and lanes 4..7 from elements 16..31. |u * s| pair sums stay below 2^15.
inline __m256i DotU8I8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// Partial sums of four blocks -> per 128-bit half, one lane per block:
// [v0 lo, v1 lo, v2 lo, v3 lo | v0 hi, v1 hi, v2 hi, v3 hi], lo/hi = elements 0..15 / 16..31.
inline __m256i HalfSums(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
}

// HalfSums of blocks 0..3 and 4..7 -> lane j: the whole sum of block j.
inline __m256i BlockSums(__m256i half_sums_0123, __m256i half_sums_4567) {
  return _mm256_add_epi32(_mm256_permute2x128_si256(half_sums_0123, half_sums_4567, 0x20),
                          _mm256_permute2x128_si256(half_sums_0123, half_sums_4567, 0x31));
}

// d and exact sum(q) of 8 consecutive activation blocks, lane j = block j.
inline __m256 BlockScales(const Q8Block* xb) {
  return _mm256_setr_ps(xb[0].d, xb[1].d, xb[2].d, xb[3].d, xb[4].d, xb[5].d, xb[6].d, xb[7].d);
}
inline __m256i BlockQSums(const Q8Block* xb) {
  return _mm256_setr_epi32(xb[0].sum, xb[1].sum, xb[2].sum, xb[3].sum, xb[4].sum, xb[5].sum,
                           xb[6].sum, xb[7].sum);
}

// Element types of the rows the f32-accumulating kernels read (weights, KV cache): Load8 widens
// 8 stored elements to f32 lanes, Load1 one element. f16 and bf16 are widened in registers
// where they are used, so a kernel over them does the f32 kernel's arithmetic exactly.
struct F32Lanes {
  using Elem = float;
  static __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
  static float Load1(float v) { return v; }
};
struct F16Lanes {
  using Elem = uint16_t;
  static __m256 Load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float Load1(uint16_t h) { return _cvtsh_ss(h); }
};
struct BF16Lanes {
  using Elem = uint16_t;
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

// Calls fn(std::integral_constant<int, N>{}) with N = num_x (1..kMaxDotRows): the kernels
// below are templates over the number of activation rows, so their accumulators are registers.
template <class Fn>
__attribute__((always_inline)) inline void DispatchRows(int num_x, Fn&& fn) {
  static_assert(kMaxDotRows == 8, "DispatchRows lists 1..8");
  switch (num_x) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    case 4: fn(std::integral_constant<int, 4>{}); break;
    case 5: fn(std::integral_constant<int, 5>{}); break;
    case 6: fn(std::integral_constant<int, 6>{}); break;
    case 7: fn(std::integral_constant<int, 7>{}); break;
    default: fn(std::integral_constant<int, 8>{}); break;
  }
}

// A row's dot product is four FMA chains over 32-element strides (chain u sums elements
// [i + 8u, i + 8u + 8) for i = 0, 32, ...; chain 0 then takes the remaining whole vectors),
// then HorizontalSum((c0 + c1) + (c2 + c3)), then the last n % 8 elements in order. Every
// kernel below sums exactly so, whatever number of activation rows share the call: a row's
// result does not depend on the rows beside it (batch invariance).
//
// DotChains runs chains [U0, U0 + U) of NX rows at once: NX * U accumulators in registers, and
// one widened weight vector per 8 elements for all NX rows. Passes of fewer chains let more
// rows share a weight load without spilling (16 ymm registers); the weight row, read once
// from memory by the first pass, is in L1 for the others.
template <typename L, int NX, int U0, int U>
__attribute__((always_inline)) inline void DotChains(const typename L::Elem* w,
                                                     const float* const* x, int64_t n,
                                                     __m256 (*chains)[NX]) {
  __m256 acc[U][NX];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) acc[u][j] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const __m256 wv = L::Load8(w + i + 8 * (U0 + u));
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        acc[u][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i + 8 * (U0 + u)), acc[u][j]);
      }
    }
  }
  if constexpr (U0 == 0) {
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = L::Load8(w + i);
#pragma GCC unroll 8
      for (int j = 0; j < NX; ++j) {
        acc[0][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i), acc[0][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u) {
#pragma GCC unroll 8
    for (int j = 0; j < NX; ++j) chains[U0 + u][j] = acc[u][j];
  }
}

// NX activation rows against one weight row, in passes of U chains (U = 4: one pass).
template <typename L, int NX, int U>
void DotRowN(const typename L::Elem* w, const float* const* x, int64_t n, float* out) {
  static_assert(4 % U == 0);
  __m256 chains[4][NX];
  DotChains<L, NX, 0, U>(w, x, n, chains);
  if constexpr (U <= 2) DotChains<L, NX, U, U>(w, x, n, chains);
  if constexpr (U == 1) {
    DotChains<L, NX, 2, 1>(w, x, n, chains);
    DotChains<L, NX, 3, 1>(w, x, n, chains);
  }
  const int64_t tail = n - n % 8;
#pragma GCC unroll 8
  for (int j = 0; j < NX; ++j) {
    float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(chains[0][j], chains[1][j]),
                                            _mm256_add_ps(chains[2][j], chains[3][j])));
    for (int64_t t = tail; t < n; ++t) sum += L::Load1(w[t]) * x[j][t];
    out[j] = sum;
  }
}

// out[j] = dot(w, x[j]) for j < num_x (1..kMaxDotRows): the dot_f32/f16/bf16 kernels. At most
// 12 accumulators: one pass for 1-3 rows, two for 4-6, four for 7-8.
template <typename L>
void DotRow(const typename L::Elem* w, const float* const* x, int num_x, int64_t n, float* out) {
  DispatchRows(num_x, [&](auto nx) {
    constexpr int NX = decltype(nx)::value;
    constexpr int U = NX <= 3 ? 4 : NX <= 6 ? 2 : 1;
    DotRowN<L, NX, U>(w, x, n, out);
  });
}

// Lane j of the result = HorizontalSum(a[j]), summed in the same order (so bitwise equal):
// (v0+v4) ... then ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)), for eight vectors at once.
__attribute__((always_inline)) inline __m256 HorizontalSums8(const __m256* a) {
  __m256 s[4];  // s[i]: lo+hi of a[i] (low 128 bits) and of a[i + 4] (high 128 bits)
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[i], a[i + 4], 0x20),
                         _mm256_permute2f128_ps(a[i], a[i + 4], 0x31));
  }
  // [x0+x2, y0+y2, x1+x3, y1+y3] for the pairs (s0, s1) and (s2, s3), per 128-bit half.
  const __m256 p01 = _mm256_add_ps(_mm256_unpacklo_ps(s[0], s[1]), _mm256_unpackhi_ps(s[0], s[1]));
  const __m256 p23 = _mm256_add_ps(_mm256_unpacklo_ps(s[2], s[3]), _mm256_unpackhi_ps(s[2], s[3]));
  return _mm256_add_ps(_mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(p01, p23, _MM_SHUFFLE(3, 2, 3, 2)));
}

// scores[h * scores_stride + t] = scale * dot(q[h], k row t): one K row serves every query
// head of the group. Eight keys at a time keep eight independent FMA chains per head and
// reduce them together (HorizontalSums8); every key's score is one single-accumulator dot,
// the last count % 8 keys' too.
template <typename L>
void AttnScoresRows(const float* const* q, int num_q, const typename L::Elem* k, int64_t stride,
                    int64_t count, int64_t head_dim, float scale, float* scores,
                    int64_t scores_stride) {
  int64_t t = 0;
  if (head_dim % 8 == 0) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (; t + 8 <= count; t += 8) {
      const typename L::Elem* rows = k + t * stride;
      for (int h = 0; h < num_q; ++h) {
        // Named registers (an array here lived on the stack: see AttnAccumulateRows).
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        const typename L::Elem *r0 = rows, *r1 = rows + stride, *r2 = rows + 2 * stride,
                               *r3 = rows + 3 * stride, *r4 = rows + 4 * stride,
                               *r5 = rows + 5 * stride, *r6 = rows + 6 * stride,
                               *r7 = rows + 7 * stride;
        for (int64_t d = 0; d < head_dim; d += 8) {
          const __m256 qv = _mm256_loadu_ps(q[h] + d);
          a0 = _mm256_fmadd_ps(L::Load8(r0 + d), qv, a0);
          a1 = _mm256_fmadd_ps(L::Load8(r1 + d), qv, a1);
          a2 = _mm256_fmadd_ps(L::Load8(r2 + d), qv, a2);
          a3 = _mm256_fmadd_ps(L::Load8(r3 + d), qv, a3);
          a4 = _mm256_fmadd_ps(L::Load8(r4 + d), qv, a4);
          a5 = _mm256_fmadd_ps(L::Load8(r5 + d), qv, a5);
          a6 = _mm256_fmadd_ps(L::Load8(r6 + d), qv, a6);
          a7 = _mm256_fmadd_ps(L::Load8(r7 + d), qv, a7);
        }
        const __m256 acc[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
        _mm256_storeu_ps(scores + h * scores_stride + t,
                         _mm256_mul_ps(HorizontalSums8(acc), vscale));
      }
    }
  }
  if (head_dim % 8 == 0) {
    // The last count % 8 keys: one accumulator per key, as in the groups of eight, so a key's
    // score does not depend on its place in a group.
    for (; t < count; ++t) {
      const typename L::Elem* row = k + t * stride;
      for (int h = 0; h < num_q; ++h) {
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < head_dim; d += 8) {
          a = _mm256_fmadd_ps(L::Load8(row + d), _mm256_loadu_ps(q[h] + d), a);
        }
        scores[h * scores_stride + t] = HorizontalSum(a) * scale;
      }
    }
    return;
  }
  float dots[kMaxDotRows];
  for (; t < count; ++t) {
    DotRow<L>(k + t * stride, q, num_q, head_dim, dots);
    for (int h = 0; h < num_q; ++h) scores[h * scores_stride + t] = dots[h] * scale;
  }
}

// out[d] += sum_t p[t] * v[t * stride + d]: 32 output floats live in registers across all
// rows.
template <typename L>
void AttnAccumulateRows(const float* p, const typename L::Elem* v, int64_t stride,
                        int64_t count, int64_t head_dim, float* out) {
  int64_t d = 0;
  for (; d + 64 <= head_dim; d += 64) {  // eight FMA chains: two FMAs per cycle
    __m256 a[8];
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) a[u] = _mm256_loadu_ps(out + d + 8 * u);
    for (int64_t t = 0; t < count; ++t) {
      const __m256 pt = _mm256_set1_ps(p[t]);
      const typename L::Elem* row = v + t * stride + d;
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(pt, L::Load8(row + 8 * u), a[u]);
    }
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) _mm256_storeu_ps(out + d + 8 * u, a[u]);
  }
  for (; d + 32 <= head_dim; d += 32) {
    // Named registers: GCC kept an acc[4] array on the stack, and every FMA waited for a
    // store-to-load forward of the one before (a third of decode attention time).
    __m256 a0 = _mm256_loadu_ps(out + d), a1 = _mm256_loadu_ps(out + d + 8);
    __m256 a2 = _mm256_loadu_ps(out + d + 16), a3 = _mm256_loadu_ps(out + d + 24);
    for (int64_t t = 0; t < count; ++t) {
      const __m256 pt = _mm256_set1_ps(p[t]);
      const typename L::Elem* row = v + t * stride + d;
      a0 = _mm256_fmadd_ps(pt, L::Load8(row), a0);
      a1 = _mm256_fmadd_ps(pt, L::Load8(row + 8), a1);
      a2 = _mm256_fmadd_ps(pt, L::Load8(row + 16), a2);
      a3 = _mm256_fmadd_ps(pt, L::Load8(row + 24), a3);
    }
    _mm256_storeu_ps(out + d, a0);
    _mm256_storeu_ps(out + d + 8, a1);
    _mm256_storeu_ps(out + d + 16, a2);
    _mm256_storeu_ps(out + d + 24, a3);
  }
  for (; d + 8 <= head_dim; d += 8) {
    __m256 acc = _mm256_loadu_ps(out + d);
    for (int64_t t = 0; t < count; ++t) {
      acc = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), L::Load8(v + t * stride + d), acc);
    }
    _mm256_storeu_ps(out + d, acc);
  }
  for (; d < head_dim; ++d) {
    for (int64_t t = 0; t < count; ++t) out[d] += p[t] * L::Load1(v[t * stride + d]);
  }
}

// NH heads' 16 columns [d, d + 16) over every row: 2 * NH accumulators in registers, each V
// row's 16 values widened once for all heads (NH a template argument, so the arrays unroll
// into named registers: see AttnAccumulateRows for what a stack array costs).
template <typename L, int NH>
void AttnAccumulateColumns16(const float* const* p, const typename L::Elem* v, int64_t stride,
                             int64_t count, int64_t d, float* const* out) {
  __m256 lo[NH], hi[NH];
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h) {
    lo[h] = _mm256_loadu_ps(out[h] + d);
    hi[h] = _mm256_loadu_ps(out[h] + d + 8);
  }
  for (int64_t t = 0; t < count; ++t) {
    const typename L::Elem* row = v + t * stride + d;
    const __m256 v0 = L::Load8(row), v1 = L::Load8(row + 8);
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const __m256 pt = _mm256_set1_ps(p[h][t]);
      lo[h] = _mm256_fmadd_ps(pt, v0, lo[h]);
      hi[h] = _mm256_fmadd_ps(pt, v1, hi[h]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h) {
    _mm256_storeu_ps(out[h] + d, lo[h]);
    _mm256_storeu_ps(out[h] + d + 8, hi[h]);
  }
}

// AttnAccumulateRows for the query heads of one KV head, up to four at a time, so each V row
// is read once per group rather than once per head. Each head's sums run over t in order from
// its out[], as AttnAccumulateRows's do: the floats are the same. One head (or a head_dim
// that is not a multiple of 16) takes AttnAccumulateRows itself.
template <typename L>
void AttnAccumulateHeads(const float* const* p, int num_heads, const typename L::Elem* v,
                         int64_t stride, int64_t count, int64_t head_dim, float* const* out) {
  if (num_heads == 1 || head_dim % 16 != 0) {
    for (int h = 0; h < num_heads; ++h) {
      AttnAccumulateRows<L>(p[h], v, stride, count, head_dim, out[h]);
    }
    return;
  }
  for (int h0 = 0; h0 < num_heads; h0 += 4) {
    const int nh = num_heads - h0 < 4 ? num_heads - h0 : 4;
    for (int64_t d = 0; d < head_dim; d += 16) {
      switch (nh) {
        case 1: AttnAccumulateColumns16<L, 1>(p + h0, v, stride, count, d, out + h0); break;
        case 2: AttnAccumulateColumns16<L, 2>(p + h0, v, stride, count, d, out + h0); break;
        case 3: AttnAccumulateColumns16<L, 3>(p + h0, v, stride, count, d, out + h0); break;
        default: AttnAccumulateColumns16<L, 4>(p + h0, v, stride, count, d, out + h0); break;
      }
    }
  }
}

// kernels_avx2.cc
void QuantizeQ8(const float* x, int64_t k, Q8Block* out);
void DotQ8_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ4_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ4_1(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ5_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ5_1(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
// The row-group Q4_0 / Q4_1 / Q5_0 / Q5_1 dots with vpdpbusd: kernels_avx2_vnni.cc, compiled
// for AVX-512 VNNI + VL (it does not include this header: its code must not be linked in place
// of this file's). REQUIRES: CpuSupportsIsa(CpuIsa::kAvx512Vnni).
// Instantiated there for (4, false), (4, true), (5, false) and (5, true): Q4_0, Q4_1, Q5_0, Q5_1.
template <int kBits, bool kWithMin>
void DotNibbleRowsVnni(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                       const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
void DotQ8_0RowsVnni(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                     const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
void DotF32(const float* w, const float* const* x, int num_x, int64_t n, float* out);
void DotF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out);
void DotBF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out);

// kernels_avx2_kquant.cc
void DotQ4_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ5_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);
void DotQ6_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t nb, float* out);

// kernels_avx2_int4.cc
void DotInt4(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
             int64_t group_size, const Q8Block* const* x, int num_x, int64_t num_chunks,
             float* out);

// kernels_avx2_fp8.cc
void DotFp8(const uint8_t* w, const float* scales, int64_t tile_cols, const float* const* x,
            int num_x, int64_t n, float* out);

// kernels_avx2_vector.cc
void F16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n);
void F32ToF16Row(const float* src, uint16_t* dst, int64_t n);
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Add(const float* a, const float* b, int64_t n, float* out);
void Axpy(float a, const float* x, int64_t n, float* y);
void Scale(float a, int64_t n, float* y);
float ExpSubSum(float* x, int64_t n, float max);
void AttnScores(const float* const* q, int num_q, const float* k, int64_t stride, int64_t count,
                int64_t head_dim, float scale, float* scores, int64_t scores_stride);
void AttnAccumulate(const float* const* p, int num_heads, const float* v, int64_t stride,
                    int64_t count, int64_t head_dim, float* const* out);
void AttnScoresF16(const float* const* q, int num_q, const uint16_t* k, int64_t stride,
                   int64_t count, int64_t head_dim, float scale, float* scores,
                   int64_t scores_stride);
void AttnAccumulateF16(const float* const* p, int num_heads, const uint16_t* v, int64_t stride,
                       int64_t count, int64_t head_dim, float* const* out);

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)

#endif  // TPSERVE_KERNELS_CPU_KERNELS_AVX2_INTERNAL_H_
