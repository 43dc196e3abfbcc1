#include "kernels/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "formats/k_quant.h"
#include "kernels/check.h"

namespace tpserve {
namespace {

constexpr int kBlock = 32;

// Nearest integer, ties away from zero, saturated to the int32 range (NaN gives 0).
int32_t RoundToInt32(float f) {
  if (std::isnan(f)) return 0;
  const double r = std::round(static_cast<double>(f));
  if (r >= 2147483647.0) return 2147483647;
  if (r <= -2147483648.0) return -2147483647 - 1;
  return static_cast<int32_t>(r);
}

void StoreF16(uint8_t* dst, float f) {
  const uint16_t h = F32ToF16(f);
  std::memcpy(dst, &h, 2);
}

// Block layout: fp16 d, int8 q[32].
void QuantizeBlockQ8_0(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreF16(dst, d);
  for (int j = 0; j < kBlock; ++j) {
    dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
  }
}

// Block layout: fp16 d, 16 bytes; byte j holds element j (low nibble) and j + 16 (high).
void QuantizeBlockQ4_0(const float* x, uint8_t* dst) {
  float amax = 0.0f;
  float signed_max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      signed_max = x[j];
    }
  }
  // Mapping the extreme value to -8 uses the full 16 levels on its side of zero.
  const float d = signed_max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreF16(dst, d);
  for (int j = 0; j < kBlock / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 8.5f)));
    dst[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// Block layout: fp16 d, fp16 m, 16 bytes of nibbles as in Q4_0.
void QuantizeBlockQ4_1(const float* x, uint8_t* dst) {
  float lo = x[0];
  float hi = x[0];
  for (int j = 1; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  StoreF16(dst, d);
  StoreF16(dst + 2, lo);
  for (int j = 0; j < kBlock / 2; ++j) {
    const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo) * id + 0.5f)));
    const int q1 =
        std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - lo) * id + 0.5f)));
    dst[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// The smallest fp16 at or above v (v >= 0): a scale rounded up never shrinks the range it has
// to cover. Returns the half's bits; stores its value in *value.
uint16_t F16AtLeast(float v, float* value) {
  uint16_t h = F32ToF16(v);
  if (F16ToF32(h) < v) ++h;  // the next half up (positive halves order like their bits)
  *value = F16ToF32(h);
  return h;
}

// ceil(need / unit) clamped to [0, max_level]; 0 when unit is 0 (nothing to cover).
int LevelsToCover(float need, float unit, int max_level) {
  if (unit <= 0.0f || need <= 0.0f) return 0;
  return std::min(max_level, static_cast<int>(std::ceil(need / unit)));
}

// Q4_K / Q5_K super-block (layout: formats/k_quant.h) with levels 0..max_q. Per sub-block j
// of 32: the offset must reach down to min(0, min x) and the step up to max x, so
//   min_need = -min(0, min x),  dmin = fp16_up(max_j min_need / 63),  m = ceil(min_need / dmin)
//   scale_need = (max x + dmin * m) / max_q,  d = fp16_up(max_j scale_need / 63),
//   s = ceil(scale_need / d),  q = clamp(round((x + dmin * m) / (d * s)), 0, max_q).
// Rounding the 6-bit codes up keeps every x inside the sub-block's grid, so the error is at
// most half of its step d * s.
void QuantizeScaleMinSuperBlock(const float* x, int max_q, uint8_t* block, uint8_t* levels) {
  float min_need[8], hi[8];
  float max_min_need = 0.0f;
  for (int j = 0; j < 8; ++j) {
    float lo = 0.0f;
    hi[j] = x[32 * j];
    for (int i = 0; i < 32; ++i) {
      lo = std::min(lo, x[32 * j + i]);
      hi[j] = std::max(hi[j], x[32 * j + i]);
    }
    min_need[j] = -lo;
    max_min_need = std::max(max_min_need, min_need[j]);
  }
  float dmin, d;
  const uint16_t dmin_bits = F16AtLeast(max_min_need / 63.0f, &dmin);
  uint8_t scales[8], mins[8];
  float offset[8], scale_need[8];
  float max_scale_need = 0.0f;
  for (int j = 0; j < 8; ++j) {
    mins[j] = static_cast<uint8_t>(LevelsToCover(min_need[j], dmin, 63));
    offset[j] = dmin * static_cast<float>(mins[j]);
    scale_need[j] = std::max(0.0f, (hi[j] + offset[j]) / static_cast<float>(max_q));
    max_scale_need = std::max(max_scale_need, scale_need[j]);
  }
  const uint16_t d_bits = F16AtLeast(max_scale_need / 63.0f, &d);
  for (int j = 0; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>(LevelsToCover(scale_need[j], d, 63));
    const float step = d * static_cast<float>(scales[j]);
    const float inv_step = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 32; ++i) {
      const float q = std::nearbyint((x[32 * j + i] + offset[j]) * inv_step);
      levels[32 * j + i] = static_cast<uint8_t>(std::clamp(q, 0.0f, static_cast<float>(max_q)));
    }
  }
  std::memcpy(block, &d_bits, 2);
  std::memcpy(block + 2, &dmin_bits, 2);
  PackKScaleMins(scales, mins, block + kQ4_KScalesOffset);
}

void QuantizeBlockQ4_K(const float* x, uint8_t* dst) {
  uint8_t levels[256];
  std::memset(dst, 0, kQ4_KBlockBytes);
  QuantizeScaleMinSuperBlock(x, 15, dst, levels);
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      dst[kQ4_KQsOffset + (j / 2) * 32 + i] |= levels[32 * j + i] << (4 * (j % 2));
    }
  }
}

void QuantizeBlockQ5_K(const float* x, uint8_t* dst) {
  uint8_t levels[256];
  std::memset(dst, 0, kQ5_KBlockBytes);
  QuantizeScaleMinSuperBlock(x, 31, dst, levels);
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      const uint8_t q = levels[32 * j + i];
      dst[kQ5_KQsOffset + (j / 2) * 32 + i] |= (q & 0x0F) << (4 * (j % 2));
      dst[kQ5_KQhOffset + i] |= (q >> 4) << j;
    }
  }
}

// Q6_K super-block (layout: formats/k_quant.h), symmetric per 16 values:
//   step_need = max|x| / 31,  d = fp16_up(max step_need / 127),  s = ceil(step_need / d),
//   q = clamp(round(x / (d * s)), -32, 31) stored as q + 32.
// Level -32 goes unused so both signs reach max|x|; the error is at most half of d * s.
void QuantizeBlockQ6_K(const float* x, uint8_t* dst) {
  std::memset(dst, 0, kQ6_KBlockBytes);
  float step_need[16];
  float max_step_need = 0.0f;
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[16 * s + i]));
    step_need[s] = amax / 31.0f;
    max_step_need = std::max(max_step_need, step_need[s]);
  }
  float d;
  const uint16_t d_bits = F16AtLeast(max_step_need / 127.0f, &d);
  std::memcpy(dst + kQ6_KDOffset, &d_bits, 2);
  for (int s = 0; s < 16; ++s) {
    const int scale = LevelsToCover(step_need[s], d, 127);
    dst[kQ6_KScalesOffset + s] = static_cast<uint8_t>(scale);
    const float step = d * static_cast<float>(scale);
    const float inv_step = step > 0.0f ? 1.0f / step : 0.0f;
    for (int i = 0; i < 16; ++i) {
      const int e = 16 * s + i;
      const int q = static_cast<int>(std::clamp(std::nearbyint(x[e] * inv_step), -32.0f, 31.0f));
      const int level = q + 32;  // 0..63
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      dst[kQ6_KQlOffset + 64 * h + l + 32 * (k & 1)] |= (level & 0x0F) << (k < 2 ? 0 : 4);
      dst[kQ6_KQhOffset + 32 * h + l] |= (level >> 4) << (2 * k);
    }
  }
}

// Q5_0: d = (the x of largest magnitude) / -16, q = min(31, trunc(x / d + 16.5)); Q5_1: d =
// (max - min) / 31, m = min, q = round((x - m) / d). Layout: formats/dtype.cc (DequantizeQ5).
void QuantizeBlockQ5(const float* x, uint8_t* dst, bool with_min) {
  float d, m = 0.0f;
  int q[kBlock];
  if (with_min) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < kBlock; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    d = (hi - lo) / 31.0f;
    m = lo;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      q[j] = std::clamp(static_cast<int>(std::nearbyint((x[j] - m) * id)), 0, 31);
    }
  } else {
    float amax = 0.0f, signed_max = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        signed_max = x[j];
      }
    }
    d = signed_max / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    }
  }
  StoreF16(dst, d);
  if (with_min) StoreF16(dst + 2, m);
  uint8_t* qh = dst + (with_min ? 4 : 2);
  uint8_t* qs = qh + 4;
  uint32_t high = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    high |= static_cast<uint32_t>(q[j] >> 4) << j;
    high |= static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
  }
  std::memcpy(qh, &high, 4);
}

}  // namespace

uint16_t F32ToBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a NaN
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint8_t F32ToF8E4M3(float f) {
  // Bit arithmetic, not a search: quantize-on-load encodes billions of values (an 8B model's
  // projections), and this is most of its time. The result is the nearest E4M3 value, ties to
  // the even code, saturating at +-448 (kernels/quantize_test.cc checks it against the search).
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  const uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) return 0x7F;           // NaN
  if (magnitude >= 0x43E00000) return sign | 0x7E;   // >= 448 (infinity too): saturate
  if (magnitude < 0x3C800000) {                      // < 2^-6: subnormal codes, steps of 2^-9
    float a;
    std::memcpy(&a, &magnitude, 4);
    const float steps = a * 512.0f;  // exact: a power-of-two scaling below 8
    int code = static_cast<int>(steps);
    const float frac = steps - static_cast<float>(code);
    if (frac > 0.5f || (frac == 0.5f && code % 2 == 1)) ++code;  // code 8 is 2^-6, normal
    return sign | static_cast<uint8_t>(code);
  }
  // Normal: keep 3 of the 23 mantissa bits, rounding to nearest even (a carry moves into the
  // exponent), then rebias the exponent from 127 to 7. Below 448 the result is at most 0x7E.
  const uint32_t rounded = magnitude + 0x7FFFF + ((magnitude >> 20) & 1);
  return sign | static_cast<uint8_t>((rounded >> 20) - ((127 - 7) << 3));
}

void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  TP_CHECK(n % BlockElems(t) == 0, "row length is not a whole number of blocks");
  auto* out = static_cast<uint8_t*>(dst);
  switch (t) {
    case DType::kF32:
      std::memcpy(out, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) StoreF16(out + 2 * i, src[i]);
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = F32ToBF16(src[i]);
        std::memcpy(out + 2 * i, &b, 2);
      }
      return;
    case DType::kF8E4M3:
      for (int64_t i = 0; i < n; ++i) out[i] = F32ToF8E4M3(src[i]);
      return;
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / kBlock; ++b) QuantizeBlockQ8_0(src + b * kBlock, out + b * 34);
      return;
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / kBlock; ++b) QuantizeBlockQ4_0(src + b * kBlock, out + b * 18);
      return;
    case DType::kQ4_1:
      for (int64_t b = 0; b < n / kBlock; ++b) QuantizeBlockQ4_1(src + b * kBlock, out + b * 20);
      return;
    case DType::kQ5_0:
    case DType::kQ5_1:
      for (int64_t b = 0; b < n / kBlock; ++b) {
        QuantizeBlockQ5(src + b * kBlock, out + b * BlockBytes(t), t == DType::kQ5_1);
      }
      return;
    case DType::kQ4_K:
      for (int64_t b = 0; b < n / kKQuantBlockElems; ++b) {
        QuantizeBlockQ4_K(src + b * kKQuantBlockElems, out + b * kQ4_KBlockBytes);
      }
      return;
    case DType::kQ5_K:
      for (int64_t b = 0; b < n / kKQuantBlockElems; ++b) {
        QuantizeBlockQ5_K(src + b * kKQuantBlockElems, out + b * kQ5_KBlockBytes);
      }
      return;
    case DType::kQ6_K:
      for (int64_t b = 0; b < n / kKQuantBlockElems; ++b) {
        QuantizeBlockQ6_K(src + b * kKQuantBlockElems, out + b * kQ6_KBlockBytes);
      }
      return;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = RoundToInt32(src[i]);
        std::memcpy(out + 4 * i, &v, 4);
      }
      return;
  }
  TP_CHECK(false, "unknown dtype");
}

std::vector<uint8_t> QuantizeMatrix(DType t, const float* src, int64_t rows, int64_t cols) {
  const std::optional<int64_t> row_bytes = RowBytes(t, cols);
  TP_CHECK(row_bytes.has_value(), "cols is not a whole number of blocks");
  std::vector<uint8_t> out(rows * *row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeRow(t, src + r * cols, out.data() + r * *row_bytes, cols);
  }
  return out;
}

}  // namespace tpserve
