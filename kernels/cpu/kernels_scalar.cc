// Portable reference kernels. Kept deliberately plain: every SIMD table is checked against this.
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "formats/dtype.h"
#include "formats/k_quant.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tpserve {
namespace {

float RoundThroughF16(float f) { return F16ToF32(F32ToF16(f)); }

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void QuantizeQ8(const float* x, int64_t k, Q8Block* out) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    // llama.cpp scales by 127 / amax rather than 1 / d; same here so both agree bit for bit.
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      // Nearest, ties to even (what the SIMD rounding instruction does).
      const int q = static_cast<int>(std::nearbyint(x[j] * id));
      out[b].q[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = RoundThroughF16(amax / 127.0f);
    out[b].s = RoundThroughF16(out[b].d * static_cast<float>(sum));
    out[b].sum = sum;
  }
}

void DotQ8_0(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
             float* out) {
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = w + b * 34;
      const int8_t* qw = reinterpret_cast<const int8_t*>(block + 2);
      int isum = 0;
      for (int i = 0; i < 32; ++i) isum += qw[i] * x[j][b].q[i];
      sum += F16ToF32(LoadU16(block)) * x[j][b].d * static_cast<float>(isum);
    }
    out[j] = sum;
  }
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1 (layout: formats/dtype.cc): f16 d (Q4_1 / Q5_1: then f16 m), Q5's
// 32-bit qh (element i's fifth bit is bit i), then 16 bytes of nibbles, byte i holding element i
// (low nibble) and element i + 16 (high nibble). Q4_0 / Q5_0: w = d * (level - 8 / 16), the offset
// folded into the exact integer sum; Q4_1 / Q5_1: w = d * level + m, so
// w . x = d * dx * sum(level * qx) + m * (dx * sum(qx)) = ... + m * s.
template <int kBits, bool kWithMin_>
struct NibbleFormat {
  static constexpr bool kWithMin = kWithMin_;
  static constexpr int kScalarBytes = kWithMin ? 4 : 2;
  static constexpr int kBlockBytes = kScalarBytes + (kBits == 5 ? 4 : 0) + 16;
  static constexpr int kOffset = kWithMin ? 0 : (kBits == 4 ? 8 : 16);

  // The exact integer dot of one block with an activation block's q.
  static int Isum(const uint8_t* block, const int8_t* q) {
    uint32_t qh = 0;
    if constexpr (kBits == 5) std::memcpy(&qh, block + kScalarBytes, 4);  // little-endian
    const uint8_t* qs = block + kScalarBytes + (kBits == 5 ? 4 : 0);
    int isum = 0;
    for (int i = 0; i < 16; ++i) {
      const int lo = (qs[i] & 0x0F) | static_cast<int>(((qh >> i) & 1u) << 4);
      const int hi = (qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      isum += (lo - kOffset) * q[i] + (hi - kOffset) * q[i + 16];
    }
    return isum;
  }
};

// One weight row (cpu_kernels.h's per-row entries).
template <int kBits, bool kWithMin>
void DotNibbles(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                float* out) {
  using F = NibbleFormat<kBits, kWithMin>;
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = w + b * F::kBlockBytes;
      const int isum = F::Isum(block, x[j][b].q);
      sum += F16ToF32(LoadU16(block)) * x[j][b].d * static_cast<float>(isum);
      if (kWithMin) sum += F16ToF32(LoadU16(block + 2)) * x[j][b].s;
    }
    out[j] = sum;
  }
}

// Q8_0 (layout: formats/dtype.cc): f16 d, then 32 signed levels; w = d * level.
struct Q8_0Format {
  static constexpr bool kWithMin = false;
  static int Isum(const uint8_t* block, const int8_t* q) {
    int isum = 0;
    for (int i = 0; i < 32; ++i) isum += static_cast<int8_t>(block[2 + i]) * q[i];
    return isum;
  }
};

// Row groups (cpu_kernels.h) of format F (NibbleFormat, Q8_0Format), each row on its own, in
// the order every table keeps.
template <class F>
void DotRowGroup(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                 const Q8Block* const* x, int num_x, int64_t num_blocks, float* out) {
  for (int j = 0; j < num_x; ++j) {
    for (int r = 0; r < num_w; ++r) {
      float sum = 0.0f;
      for (int64_t b = 0; b < num_blocks; ++b) {
        const uint8_t* block = w + r * row_stride + b * block_stride;
        const int isum = F::Isum(block, x[j][b].q);
        const float scale = F16ToF32(LoadU16(block)) * x[j][b].d;
        sum = std::fma(static_cast<float>(isum), scale, sum);
        if constexpr (F::kWithMin) sum = std::fma(F16ToF32(LoadU16(block + 2)), x[j][b].s, sum);
      }
      out[j * kWeightRowGroup + r] = sum;
    }
  }
}

// Q4_K / Q5_K (layout: formats/k_quant.h): super-block b spans activation blocks 8b..8b+7, one
// per 32-value sub-block. The integer parts are exact in f32 (|scale * sum(q * qx)| < 2^23).
template <bool kFiveBit>
void DotScaleMinK(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                  float* out) {
  constexpr int kBlockBytes = kFiveBit ? kQ5_KBlockBytes : kQ4_KBlockBytes;
  constexpr int kQsOffset = kFiveBit ? kQ5_KQsOffset : kQ4_KQsOffset;
  for (int r = 0; r < num_x; ++r) {
    float sum = 0.0f;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = w + b * kBlockBytes;
      const float d = F16ToF32(LoadU16(block));
      const float dmin = F16ToF32(LoadU16(block + 2));
      uint8_t scales[8], mins[8];
      UnpackKScaleMins(block + kQ4_KScalesOffset, scales, mins);
      for (int j = 0; j < 8; ++j) {
        const Q8Block& xb = x[r][8 * b + j];
        int isum = 0;
        for (int i = 0; i < 32; ++i) {
          const uint8_t byte = block[kQsOffset + (j / 2) * 32 + i];
          int q = (j % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          if (kFiveBit) q |= ((block[kQ5_KQhOffset + i] >> j) & 1) << 4;
          isum += q * xb.q[i];
        }
        sum += d * xb.d * static_cast<float>(scales[j] * isum) -
               dmin * xb.d * static_cast<float>(mins[j] * xb.sum);
      }
    }
    out[r] = sum;
  }
}

// Q6_K: activation block j of a super-block covers its elements 32j..32j+31, i.e. half h = j / 4,
// quarter k = j % 4, and the two 16-value scales 2j and 2j + 1.
void DotQ6_K(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
             float* out) {
  for (int r = 0; r < num_x; ++r) {
    float sum = 0.0f;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = w + b * kQ6_KBlockBytes;
      const float d = F16ToF32(LoadU16(block + kQ6_KDOffset));
      const auto* scales = reinterpret_cast<const int8_t*>(block + kQ6_KScalesOffset);
      for (int j = 0; j < 8; ++j) {
        const Q8Block& xb = x[r][8 * b + j];
        const int h = j / 4, k = j % 4;
        int half_sums[2] = {0, 0};
        for (int i = 0; i < 32; ++i) {
          const uint8_t low_byte = block[kQ6_KQlOffset + 64 * h + i + 32 * (k & 1)];
          const int low = k < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
          const int high = (block[kQ6_KQhOffset + 32 * h + i] >> (2 * k)) & 3;
          half_sums[i / 16] += ((low | (high << 4)) - 32) * xb.q[i];
        }
        const int isum = scales[2 * j] * half_sums[0] + scales[2 * j + 1] * half_sums[1];
        sum += d * xb.d * static_cast<float>(isum);
      }
    }
    out[r] = sum;
  }
}

// int4 groups: byte i of a 32-column chunk holds column i (low nibble) and i + 16 (high).
// sum((code - zero) * qx) = sum(code * qx) - zero * sum(qx): both integer sums are exact, and
// so is the difference for integer zero points (|zero * sum(qx)| <= 15 * 32 * 127 < 2^24).
void DotInt4(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
             int64_t group_size, const Q8Block* const* x, int num_x, int64_t num_chunks,
             float* out) {
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t b = 0; b < num_chunks; ++b) {
      const uint8_t* codes = w + b * 16;
      const Q8Block& xb = x[j][b];
      int isum = 0;
      for (int i = 0; i < 16; ++i) {
        isum += (codes[i] & 0x0F) * xb.q[i] + (codes[i] >> 4) * xb.q[i + 16];
      }
      const int64_t g = b * 32 / group_size;
      const float scale = F16ToF32(scales[g]), zero = F16ToF32(zeros[g]);
      sum += (scale * xb.d) * (static_cast<float>(isum) - zero * static_cast<float>(xb.sum));
    }
    out[j] = sum;
  }
}

// Every e4m3 code as F8E4M3ToF32 decodes it (a table: the reference path stays usable at
// model sizes).
const float* Fp8Table() {
  static const float* table = [] {
    static float values[256];
    for (int c = 0; c < 256; ++c) values[c] = F8E4M3ToF32(static_cast<uint8_t>(c));
    return values;
  }();
  return table;
}

void DotFp8(const uint8_t* w, const float* scales, int64_t tile_cols, const float* const* x,
            int num_x, int64_t n, float* out) {
  const float* decode = Fp8Table();
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t t0 = 0; t0 < n; t0 += tile_cols) {
      const int64_t t1 = std::min(n, t0 + tile_cols);
      float tile_sum = 0.0f;
      for (int64_t c = t0; c < t1; ++c) tile_sum += decode[w[c]] * x[j][c];
      sum += scales[t0 / tile_cols] * tile_sum;
    }
    out[j] = sum;
  }
}

void DotF32(const float* w, const float* const* x, int num_x, int64_t n, float* out) {
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += w[i] * x[j][i];
    out[j] = sum;
  }
}

void DotF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += F16ToF32(w[i]) * x[j][i];
    out[j] = sum;
  }
}

void DotBF16(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out) {
  for (int j = 0; j < num_x; ++j) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum += BF16ToF32(w[i]) * x[j][i];
    out[j] = sum;
  }
}

void F16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(src[i]);
}

void BF16ToF32Row(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(src[i]);
}

void F32ToF16Row(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToF16(src[i]);
}

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.0f + std::exp(-2.0f * u)) * up[i];
  }
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Axpy(float a, const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void Scale(float a, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

float ExpSubSum(float* x, int64_t n, float max) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  return sum;
}

void AttnScores(const float* const* q, int num_q, const float* k, int64_t stride, int64_t count,
                int64_t head_dim, float scale, float* scores, int64_t scores_stride) {
  for (int64_t t = 0; t < count; ++t) {
    for (int h = 0; h < num_q; ++h) {
      float dot = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) dot += q[h][d] * k[t * stride + d];
      scores[h * scores_stride + t] = dot * scale;
    }
  }
}

void AttnAccumulate(const float* const* p, int num_heads, const float* v, int64_t stride,
                    int64_t count, int64_t head_dim, float* const* out) {
  for (int h = 0; h < num_heads; ++h) {
    for (int64_t t = 0; t < count; ++t) {
      for (int64_t d = 0; d < head_dim; ++d) out[h][d] += p[h][t] * v[t * stride + d];
    }
  }
}

void AttnScoresF16(const float* const* q, int num_q, const uint16_t* k, int64_t stride,
                   int64_t count, int64_t head_dim, float scale, float* scores,
                   int64_t scores_stride) {
  for (int64_t t = 0; t < count; ++t) {
    for (int h = 0; h < num_q; ++h) {
      float dot = 0.0f;
      for (int64_t d = 0; d < head_dim; ++d) dot += q[h][d] * F16ToF32(k[t * stride + d]);
      scores[h * scores_stride + t] = dot * scale;
    }
  }
}

void AttnAccumulateF16(const float* const* p, int num_heads, const uint16_t* v, int64_t stride,
                       int64_t count, int64_t head_dim, float* const* out) {
  for (int h = 0; h < num_heads; ++h) {
    for (int64_t t = 0; t < count; ++t) {
      for (int64_t d = 0; d < head_dim; ++d) out[h][d] += p[h][t] * F16ToF32(v[t * stride + d]);
    }
  }
}

}  // namespace

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "unknown";
}

bool CpuSupportsIsa(CpuIsa isa) {
  if (isa == CpuIsa::kScalar) return true;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c",
  // and clang builds these kernels for //fuzz:cpu_kernels_fuzzer.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (isa == CpuIsa::kAvx2) return avx2;
  // The AVX-512 features count only where the OS saves their registers (the builtin checks
  // XCR0 as well as CPUID).
  return avx2 && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

CpuIsa DetectCpuIsa() {
  const char* forced = std::getenv("TPSERVE_CPU_ISA");
  if (forced != nullptr && std::string_view(forced) == "scalar") return CpuIsa::kScalar;
  const bool avx2_only = forced != nullptr && std::string_view(forced) == "avx2";
  if (!avx2_only && CpuSupportsIsa(CpuIsa::kAvx512Vnni)) return CpuIsa::kAvx512Vnni;
  return CpuSupportsIsa(CpuIsa::kAvx2) ? CpuIsa::kAvx2 : CpuIsa::kScalar;
}

const CpuKernels& ScalarCpuKernels() {
  static const CpuKernels kernels = {
      .quantize_q8 = QuantizeQ8,
      .dot_q8_0 = DotQ8_0,
      .dot_q4_0 = DotNibbles<4, false>,
      .dot_q4_1 = DotNibbles<4, true>,
      .dot_q5_0 = DotNibbles<5, false>,
      .dot_q5_1 = DotNibbles<5, true>,
      .dot_q4_0_rows = DotRowGroup<NibbleFormat<4, false>>,
      .dot_q4_1_rows = DotRowGroup<NibbleFormat<4, true>>,
      .dot_q5_0_rows = DotRowGroup<NibbleFormat<5, false>>,
      .dot_q5_1_rows = DotRowGroup<NibbleFormat<5, true>>,
      .dot_q8_0_rows = DotRowGroup<Q8_0Format>,
      .dot_q4_K = DotScaleMinK<false>,
      .dot_q5_K = DotScaleMinK<true>,
      .dot_q6_K = DotQ6_K,
      .dot_int4 = DotInt4,
      .dot_fp8 = DotFp8,
      .dot_f32 = DotF32,
      .dot_f16 = DotF16,
      .dot_bf16 = DotBF16,
      .f16_to_f32 = F16ToF32Row,
      .bf16_to_f32 = BF16ToF32Row,
      .f32_to_f16 = F32ToF16Row,
      .rms_norm = RmsNorm,
      .silu_mul = SiluMul,
      .gelu_tanh_mul = GeluTanhMul,
      .add = Add,
      .axpy = Axpy,
      .scale = Scale,
      .exp_sub_sum = ExpSubSum,
      .attn_scores = AttnScores,
      .attn_accumulate = AttnAccumulate,
      .attn_scores_f16 = AttnScoresF16,
      .attn_accumulate_f16 = AttnAccumulateF16,
  };
  return kernels;
}

const CpuKernels& CpuKernelsFor(CpuIsa isa) {
#if defined(__x86_64__)
  if (isa == CpuIsa::kAvx2) return Avx2CpuKernels();
  if (isa == CpuIsa::kAvx512Vnni) return Avx512VnniCpuKernels();
#endif
  return ScalarCpuKernels();
}

}  // namespace tpserve
