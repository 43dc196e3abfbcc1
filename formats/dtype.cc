#include "formats/dtype.h"

#include <bit>
#include <cstring>
#include <limits>

#include "formats/k_quant.h"

namespace tpserve {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoint readers decode little-endian bytes in place");

// GGML block layouts (ggml-common.h). Sizes are asserted in dtype_test against BlockBytes.
constexpr int kQBlockElems = 32;
constexpr int kQ8_0BlockBytes = 2 + 32;
constexpr int kQ4_0BlockBytes = 2 + 16;
constexpr int kQ4_1BlockBytes = 2 + 2 + 16;
constexpr int kQ5_0BlockBytes = 2 + 4 + 16;
constexpr int kQ5_1BlockBytes = 2 + 2 + 4 + 16;

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

uint32_t FloatBits(float f) { return std::bit_cast<uint32_t>(f); }
float BitsFloat(uint32_t u) { return std::bit_cast<float>(u); }

// Rounds `value >> shift` to nearest, ties to even. REQUIRES: 1 <= shift <= 31.
uint32_t ShiftRoundNearestEven(uint32_t value, int shift) {
  const uint32_t quotient = value >> shift;
  const uint32_t remainder = value & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (quotient & 1u))) return quotient + 1;
  return quotient;
}

void DequantizeQ8_0(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ8_0BlockBytes, dst += kQBlockElems) {
    const float d = F16ToF32(LoadU16(src));
    const int8_t* q = reinterpret_cast<const int8_t*>(src + 2);
    for (int i = 0; i < kQBlockElems; ++i) dst[i] = static_cast<float>(q[i]) * d;
  }
}

// Nibble order shared by Q4_0 and Q4_1: byte j holds element j in its low nibble and
// element j + 16 in its high nibble.
void DequantizeQ4_0(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ4_0BlockBytes, dst += kQBlockElems) {
    const float d = F16ToF32(LoadU16(src));
    const uint8_t* qs = src + 2;
    for (int j = 0; j < kQBlockElems / 2; ++j) {
      dst[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0F) - 8);
      dst[j + 16] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  }
}

// x = d * q + m as two roundings (multiply, then add), like the gguf package; the target is
// compiled with -ffp-contract=off so this never becomes a fused multiply-add.
void DequantizeQ4_1(const uint8_t* src, float* dst, int64_t num_blocks) {
  for (int64_t b = 0; b < num_blocks; ++b, src += kQ4_1BlockBytes, dst += kQBlockElems) {
    const float d = F16ToF32(LoadU16(src));
    const float m = F16ToF32(LoadU16(src + 2));
    const uint8_t* qs = src + 4;
    for (int j = 0; j < kQBlockElems / 2; ++j) {
      const float lo = d * static_cast<float>(qs[j] & 0x0F);
      const float hi = d * static_cast<float>(qs[j] >> 4);
      dst[j] = lo + m;
      dst[j + 16] = hi + m;
    }
  }
}

// Q5_0 (fp16 d, u32 qh, 16 bytes qs) and Q5_1 (fp16 d, fp16 m, u32 qh, qs): element j's
// fifth bit is bit j of qh (j < 32), its low four bits the Q4 nibble order above. Q5_0 is
// d * (q - 16); Q5_1 is d * q + m with two roundings, like the gguf package.
void DequantizeQ5(const uint8_t* src, float* dst, int64_t num_blocks, bool with_min) {
  const int block_bytes = with_min ? kQ5_1BlockBytes : kQ5_0BlockBytes;
  for (int64_t b = 0; b < num_blocks; ++b, src += block_bytes, dst += kQBlockElems) {
    const float d = F16ToF32(LoadU16(src));
    const float m = with_min ? F16ToF32(LoadU16(src + 2)) : 0.0f;
    const uint8_t* qh_bytes = src + (with_min ? 4 : 2);
    const uint32_t qh = static_cast<uint32_t>(qh_bytes[0]) | (uint32_t{qh_bytes[1]} << 8) |
                        (uint32_t{qh_bytes[2]} << 16) | (uint32_t{qh_bytes[3]} << 24);
    const uint8_t* qs = qh_bytes + 4;
    for (int j = 0; j < kQBlockElems / 2; ++j) {
      const int lo = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      if (with_min) {
        const float a = d * static_cast<float>(lo);
        const float c = d * static_cast<float>(hi);
        dst[j] = a + m;
        dst[j + 16] = c + m;
      } else {
        dst[j] = d * static_cast<float>(lo - 16);
        dst[j + 16] = d * static_cast<float>(hi - 16);
      }
    }
  }
}

}  // namespace

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kQ8_0:
      return "Q8_0";
    case DType::kQ4_0:
      return "Q4_0";
    case DType::kQ4_1:
      return "Q4_1";
    case DType::kQ5_0:
      return "Q5_0";
    case DType::kQ5_1:
      return "Q5_1";
    case DType::kQ4_K:
      return "Q4_K";
    case DType::kQ5_K:
      return "Q5_K";
    case DType::kQ6_K:
      return "Q6_K";
    case DType::kI32:
      return "I32";
  }
  return "UNKNOWN";
}

bool IsIntegerDType(DType t) { return t == DType::kI32; }

int64_t BlockElems(DType t) {
  switch (t) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
      return kQBlockElems;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return kKQuantBlockElems;
    default:
      return 1;
  }
}

int64_t BlockBytes(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
      return 1;
    case DType::kQ8_0:
      return kQ8_0BlockBytes;
    case DType::kQ4_0:
      return kQ4_0BlockBytes;
    case DType::kQ4_1:
      return kQ4_1BlockBytes;
    case DType::kQ5_0:
      return kQ5_0BlockBytes;
    case DType::kQ5_1:
      return kQ5_1BlockBytes;
    case DType::kQ4_K:
      return kQ4_KBlockBytes;
    case DType::kQ5_K:
      return kQ5_KBlockBytes;
    case DType::kQ6_K:
      return kQ6_KBlockBytes;
    case DType::kI32:
      return 4;
  }
  return 0;
}

std::optional<int64_t> RowBytes(DType t, int64_t n) {
  const int64_t block_elems = BlockElems(t);
  if (n < 0 || n % block_elems != 0) return std::nullopt;
  const int64_t num_blocks = n / block_elems;
  const int64_t block_bytes = BlockBytes(t);
  if (num_blocks > std::numeric_limits<int64_t>::max() / block_bytes) return std::nullopt;
  return num_blocks * block_bytes;
}

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, bytes, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(LoadU16(bytes + 2 * i));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(LoadU16(bytes + 2 * i));
      return;
    case DType::kF8E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = F8E4M3ToF32(bytes[i]);
      return;
    case DType::kQ8_0:
      DequantizeQ8_0(bytes, dst, n / kQBlockElems);
      return;
    case DType::kQ4_0:
      DequantizeQ4_0(bytes, dst, n / kQBlockElems);
      return;
    case DType::kQ4_1:
      DequantizeQ4_1(bytes, dst, n / kQBlockElems);
      return;
    case DType::kQ5_0:
      DequantizeQ5(bytes, dst, n / kQBlockElems, /*with_min=*/false);
      return;
    case DType::kQ5_1:
      DequantizeQ5(bytes, dst, n / kQBlockElems, /*with_min=*/true);
      return;
    case DType::kQ4_K:
      DequantizeQ4_K(bytes, dst, n / kKQuantBlockElems);
      return;
    case DType::kQ5_K:
      DequantizeQ5_K(bytes, dst, n / kKQuantBlockElems);
      return;
    case DType::kQ6_K:
      DequantizeQ6_K(bytes, dst, n / kKQuantBlockElems);
      return;
    case DType::kI32:
      for (int64_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, bytes + 4 * i, 4);
        dst[i] = static_cast<float>(v);
      }
      return;
  }
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {
    // Inf, or NaN with its payload kept bit for bit (numpy does the same; no quieting).
    return BitsFloat(sign | 0x7F800000u | (mantissa << 13));
  }
  if (exponent != 0) return BitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return BitsFloat(sign);
  // Subnormal half: mantissa * 2^-24, always a normal fp32. Shift until the implicit bit shows.
  uint32_t f32_exponent = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --f32_exponent;
  }
  return BitsFloat(sign | (f32_exponent << 23) | ((mantissa & 0x3FFu) << 13));
}

uint16_t F32ToF16(float f) {
  const uint32_t bits = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {
    if (magnitude == 0x7F800000u) return sign | 0x7C00u;
    // NaN: keep the top 10 payload bits (numpy's rule); a payload that truncates to zero
    // would read as infinity, so it becomes the smallest NaN instead.
    uint16_t payload = static_cast<uint16_t>((magnitude & 0x7FFFFFu) >> 13);
    if (payload == 0) payload = 1;
    return sign | 0x7C00u | payload;
  }
  // 65520 is halfway between 65504 (largest half) and 65536; ties-to-even goes up, to inf.
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;
  const uint32_t f32_exponent = magnitude >> 23;
  const uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  if (f32_exponent < 113) {
    // Result is a half subnormal (units of 2^-24) or zero. At most 2^-25 rounds to zero
    // (2^-25 itself ties to the even zero).
    if (magnitude <= 0x33000000u) return sign;
    const int shift = 126 - static_cast<int>(f32_exponent);  // in [14, 24]
    return sign | static_cast<uint16_t>(ShiftRoundNearestEven(significand, shift));
  }
  // Normal: rebias the exponent and round off 13 mantissa bits; a carry out of the mantissa
  // correctly bumps the exponent.
  const uint32_t rebased = ((f32_exponent - 112) << 10) | ((magnitude & 0x7FFFFFu) >> 13);
  const uint32_t dropped = magnitude & 0x1FFFu;
  uint32_t rounded = rebased;
  if (dropped > 0x1000u || (dropped == 0x1000u && (rebased & 1u))) ++rounded;
  return sign | static_cast<uint16_t>(rounded);
}

float BF16ToF32(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

float F8E4M3ToF32(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exponent = (v >> 3) & 0x0Fu;
  uint32_t mantissa = v & 0x07u;
  // E4M3FN spends only S.1111.111 on NaN; S.1111.xxx otherwise are normal numbers up to 448.
  if (exponent == 0x0F && mantissa == 0x07) return BitsFloat(sign | 0x7FC00000u);
  if (exponent != 0) return BitsFloat(sign | ((exponent + 120) << 23) | (mantissa << 20));
  if (mantissa == 0) return BitsFloat(sign);
  // Subnormal: mantissa * 2^-9.
  uint32_t f32_exponent = 121;
  while ((mantissa & 0x08u) == 0) {
    mantissa <<= 1;
    --f32_exponent;
  }
  return BitsFloat(sign | (f32_exponent << 23) | ((mantissa & 0x07u) << 20));
}

}  // namespace tpserve
