// AVX2 dot products of int4 group weight rows (layout: kernels/weight_matrix.h) with Q8
// activation blocks. Eight 32-column chunks at a time: their exact integer sums sum(code * qx)
// land in the lanes of one vector (as the K-quant kernels do), next to the chunks' f16 scales
// and zero points and the activation blocks' d and sum(qx), and one multiply-add per activation
// row takes scale * d * (sum(code * qx) - zero * sum(qx)) for all eight. The integers are the
// scalar reference's; only the float order differs. Compiled for AVX2 + FMA + F16C.
#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/kernels_avx2_internal.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpserve::avx2_internal {
namespace {

constexpr int64_t kChunk = 32;  // columns per packed chunk and per activation block

// Reads a row's per-group f16 values (scales or zero points) as 8 floats, lane i for chunk
// b + i. Groups that tile 8 chunks evenly (32, 64, 128, 256 columns and multiples of 256) take
// one exact-size load and a lane permute; other sizes gather the 8 values one by one.
class GroupLanes {
 public:
  explicit GroupLanes(int64_t group_size)
      : chunks_per_group_(group_size / kChunk),
        even_(8 % chunks_per_group_ == 0 || chunks_per_group_ % 8 == 0),
        loads_(chunks_per_group_ >= 8 ? 1 : static_cast<int>(8 / chunks_per_group_)) {
    alignas(32) int32_t lane_group[8];
    for (int i = 0; i < 8; ++i) lane_group[i] = static_cast<int32_t>(i / chunks_per_group_);
    permute_ = _mm256_load_si256(reinterpret_cast<const __m256i*>(lane_group));
  }

  // REQUIRES: b % 8 == 0 and chunks b..b+7 exist.
  __m256 Load(const uint16_t* values, int64_t b) const {
    if (!even_) {
      alignas(16) uint16_t lanes[8];
      for (int i = 0; i < 8; ++i) lanes[i] = values[(b + i) / chunks_per_group_];
      return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(lanes)));
    }
    const uint16_t* first = values + b / chunks_per_group_;
    __m128i h;
    switch (loads_) {  // never read past the row's last group
      case 8: h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first)); break;
      case 4: h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(first)); break;
      case 2: {
        int32_t two;
        std::memcpy(&two, first, 4);
        h = _mm_cvtsi32_si128(two);
        break;
      }
      default: h = _mm_cvtsi32_si128(*first); break;
    }
    return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(h), permute_);
  }

 private:
  int64_t chunks_per_group_;
  bool even_;
  int loads_;
  __m256i permute_;
};

inline int32_t HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_hadd_epi32(s, s);
  s = _mm_hadd_epi32(s, s);
  return _mm_cvtsi128_si32(s);
}

template <int NX>
void DotInt4N(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
              int64_t group_size, const Q8Block* const* x, int64_t num_chunks, float* out) {
  const GroupLanes lanes(group_size);
  __m256 acc[NX];
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) acc[r] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= num_chunks; b += 8) {
    __m256i levels[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) levels[i] = UnpackNibbles(w + (b + i) * (kChunk / 2));
    const __m256 scale = lanes.Load(scales, b);
    const __m256 zero = lanes.Load(zeros, b);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const Q8Block* xb = x[r] + b;
      const __m256i lo = HalfSums(
          DotU8I8(levels[0], LoadQ(xb[0])), DotU8I8(levels[1], LoadQ(xb[1])),
          DotU8I8(levels[2], LoadQ(xb[2])), DotU8I8(levels[3], LoadQ(xb[3])));
      const __m256i hi = HalfSums(
          DotU8I8(levels[4], LoadQ(xb[4])), DotU8I8(levels[5], LoadQ(xb[5])),
          DotU8I8(levels[6], LoadQ(xb[6])), DotU8I8(levels[7], LoadQ(xb[7])));
      // Lane i, exact for integer zero points: sum(code * qx) - zero * sum(qx) (< 2^16).
      const __m256 centered = _mm256_fnmadd_ps(zero, _mm256_cvtepi32_ps(BlockQSums(xb)),
                                               _mm256_cvtepi32_ps(BlockSums(lo, hi)));
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(scale, BlockScales(xb)), centered, acc[r]);
    }
  }
  float tail[NX] = {};
  for (; b < num_chunks; ++b) {  // the last 1..7 chunks, one at a time
    const __m256i levels = UnpackNibbles(w + b * (kChunk / 2));
    const int64_t g = b / (group_size / kChunk);
    const float scale = _cvtsh_ss(scales[g]), zero = _cvtsh_ss(zeros[g]);
#pragma GCC unroll 8
    for (int r = 0; r < NX; ++r) {
      const Q8Block& xb = x[r][b];
      const int32_t isum = HorizontalSumI32(DotU8I8(levels, LoadQ(xb)));
      tail[r] += (scale * xb.d) * (static_cast<float>(isum) - zero * static_cast<float>(xb.sum));
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < NX; ++r) out[r] = HorizontalSum(acc[r]) + tail[r];
}

}  // namespace

void DotInt4(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
             int64_t group_size, const Q8Block* const* x, int num_x, int64_t num_chunks,
             float* out) {
  DispatchRows(num_x, [&](auto nx) {
    DotInt4N<decltype(nx)::value>(w, scales, zeros, group_size, x, num_chunks, out);
  });
}

}  // namespace tpserve::avx2_internal

#pragma GCC pop_options

#endif  // defined(__x86_64__)
