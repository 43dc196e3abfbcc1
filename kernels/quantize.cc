#include "kernels/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/check.h"

namespace tpserve {
namespace {

constexpr int kBlock = 32;

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

// Positive finite E4M3 values in code order (codes 0x00..0x7E); monotonic in the code.
const std::array<float, 127>& F8PositiveTable() {
  static const std::array<float, 127> table = [] {
    std::array<float, 127> t{};
    for (int c = 0; c < 127; ++c) t[c] = F8E4M3ToF32(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
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
  if (std::isnan(f)) return 0x7F;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::min(std::fabs(f), 448.0f);
  const auto& table = F8PositiveTable();
  const auto it = std::lower_bound(table.begin(), table.end(), a);
  int code = static_cast<int>(it - table.begin());
  if (code == 127) return sign | 0x7E;
  if (code > 0) {
    const float above = table[code] - a;
    const float below = a - table[code - 1];
    // Ties go to the even code (even mantissa), as IEEE round-to-nearest-even does.
    if (below < above || (below == above && (code - 1) % 2 == 0)) --code;
  }
  return sign | static_cast<uint8_t>(code);
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
