#include "formats/k_quant.h"

#include <cstring>

#include "formats/dtype.h"

namespace tpserve {
namespace {

float LoadF16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof(h));
  return F16ToF32(h);
}

// Q4_K and Q5_K share everything but where a value's bits come from: `value(j, i)` is element
// i of sub-block j as an integer. The gguf package computes d * scale and dmin * min once per
// sub-block in f32, then (d * scale) * q - (dmin * min). An fp16 d has 11 significant bits, a
// scale 6 and q 5, so every product is exact in f32 and only the subtraction rounds: this order
// reproduces the package bit for bit (as would a fused multiply-add, but the target is built
// with -ffp-contract=off so nothing depends on that argument).
template <typename ValueFn>
void DequantizeScaleMinBlock(const uint8_t* block, float* dst, ValueFn value) {
  const float d = LoadF16(block);
  const float dmin = LoadF16(block + 2);
  uint8_t scales[8], mins[8];
  UnpackKScaleMins(block + kQ4_KScalesOffset, scales, mins);
  for (int j = 0; j < 8; ++j) {
    const float step = d * static_cast<float>(scales[j]);
    const float offset = dmin * static_cast<float>(mins[j]);
    for (int i = 0; i < kKQuantSubBlockElems; ++i) {
      const float scaled = step * static_cast<float>(value(j, i));
      dst[j * kKQuantSubBlockElems + i] = scaled - offset;
    }
  }
}

}  // namespace

void PackKScaleMins(const uint8_t scales[8], const uint8_t mins[8], uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] & 0x30) << 2));
    packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] & 0x30) << 2));
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
  }
}

void DequantizeQ4_K(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ4_KBlockBytes, dst += kKQuantBlockElems) {
    const uint8_t* qs = src + kQ4_KQsOffset;
    DequantizeScaleMinBlock(src, dst, [qs](int j, int i) {
      const uint8_t byte = qs[(j / 2) * 32 + i];
      return (j % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
    });
  }
}

void DequantizeQ5_K(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ5_KBlockBytes, dst += kKQuantBlockElems) {
    const uint8_t* qh = src + kQ5_KQhOffset;
    const uint8_t* qs = src + kQ5_KQsOffset;
    DequantizeScaleMinBlock(src, dst, [qh, qs](int j, int i) {
      const uint8_t byte = qs[(j / 2) * 32 + i];
      const int low = (j % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
      return low | (((qh[i] >> j) & 1) << 4);
    });
  }
}

void DequantizeQ6_K(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ6_KBlockBytes, dst += kKQuantBlockElems) {
    const float d = LoadF16(src + kQ6_KDOffset);
    const auto* scales = reinterpret_cast<const int8_t*>(src + kQ6_KScalesOffset);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = src + kQ6_KQlOffset + 64 * h;
      const uint8_t* qh = src + kQ6_KQhOffset + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int i = 0; i < 32; ++i) {
          const uint8_t low_byte = ql[i + 32 * (k & 1)];
          const int low = k < 2 ? (low_byte & 0x0F) : (low_byte >> 4);
          const int q = low | (((qh[i] >> (2 * k)) & 3) << 4);
          const int e = 128 * h + 32 * k + i;
          // Exact in f32 (11 + 7 + 5 significant bits), so no rounding to match at all.
          const float step = d * static_cast<float>(scales[e / 16]);
          dst[e] = step * static_cast<float>(q - 32);
        }
      }
    }
  }
}

}  // namespace tpserve
