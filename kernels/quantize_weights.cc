#include "kernels/quantize_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "formats/dtype.h"
#include "kernels/check.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

constexpr int64_t kFp8Tile = 128;
constexpr float kFp8Max = 448.0f;
constexpr int kInt4Chunk = 32;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void StoreF32(std::vector<uint8_t>& v, int64_t i, float f) { std::memcpy(&v[i * 4], &f, 4); }
void StoreF16(std::vector<uint8_t>& v, int64_t i, float f) {
  const uint16_t h = F32ToF16(f);
  std::memcpy(&v[i * 2], &h, 2);
}

float Fp8Scale(float amax) { return amax > 0.0f ? amax / kFp8Max : 1.0f; }

void QuantizeFp8PerChannel(const float* src, HostMatrix& out) {
  const WeightMatrix& m = out.matrix;
  for (int64_t r = 0; r < m.rows; ++r) {
    const float* row = src + r * m.cols;
    float amax = 0.0f;
    for (int64_t c = 0; c < m.cols; ++c) amax = std::max(amax, std::fabs(row[c]));
    const float s = Fp8Scale(amax);
    StoreF32(out.scales, r, s);
    for (int64_t c = 0; c < m.cols; ++c) out.values[r * m.row_bytes + c] = F32ToF8E4M3(row[c] / s);
  }
}

void QuantizeFp8Block(const float* src, HostMatrix& out) {
  const WeightMatrix& m = out.matrix;
  for (int64_t tr = 0; tr < CeilDiv(m.rows, kFp8Tile); ++tr) {
    for (int64_t tc = 0; tc < m.scale_stride; ++tc) {
      const int64_t r0 = tr * kFp8Tile, r1 = std::min(m.rows, r0 + kFp8Tile);
      const int64_t c0 = tc * kFp8Tile, c1 = std::min(m.cols, c0 + kFp8Tile);
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(src[r * m.cols + c]));
      }
      const float s = Fp8Scale(amax);
      StoreF32(out.scales, tr * m.scale_stride + tc, s);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          out.values[r * m.row_bytes + c] = F32ToF8E4M3(src[r * m.cols + c] / s);
        }
      }
    }
  }
}

void QuantizeInt4(const float* src, HostMatrix& out) {
  const WeightMatrix& m = out.matrix;
  const int64_t g = m.format.group_size;
  std::vector<int> codes(m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    const float* row = src + r * m.cols;
    for (int64_t gi = 0; gi < m.cols / g; ++gi) {
      const float* x = row + gi * g;
      float lo = x[0], hi = x[0];
      for (int64_t j = 1; j < g; ++j) {
        lo = std::min(lo, x[j]);
        hi = std::max(hi, x[j]);
      }
      // The scale and the zero point are rounded to f16 first, so the codes are chosen against
      // the values the matmul will really use. The zero point is fractional (stored f16), so
      // the group's min maps to code 0 exactly as GGML's Q4_1 does, not to the nearest grid
      // point of an integer zero.
      float s = F16ToF32(F32ToF16((hi - lo) / 15.0f));
      if (s == 0.0f) s = 1.0f;  // a constant group: code 0, zero -lo
      const float zero = F16ToF32(F32ToF16(-lo / s));
      StoreF16(out.scales, r * m.scale_stride + gi, s);
      StoreF16(out.zeros, r * m.scale_stride + gi, zero);
      for (int64_t j = 0; j < g; ++j) {
        codes[gi * g + j] =
            static_cast<int>(std::clamp(std::nearbyint(x[j] / s + zero), 0.0f, 15.0f));
      }
    }
    uint8_t* packed = out.values.data() + r * m.row_bytes;
    for (int64_t c0 = 0; c0 < m.cols; c0 += kInt4Chunk) {
      for (int j = 0; j < kInt4Chunk / 2; ++j) {
        packed[c0 / 2 + j] =
            static_cast<uint8_t>(codes[c0 + j] | (codes[c0 + j + kInt4Chunk / 2] << 4));
      }
    }
  }
}

}  // namespace

HostMatrix AllocateHostMatrix(const TensorFormat& format, int64_t rows, int64_t cols) {
  HostMatrix out;
  WeightMatrix& m = out.matrix;
  m.format = format;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = PackedRowBytes(format, cols);
  TP_CHECK(m.row_bytes >= 0, "AllocateHostMatrix: cols do not fit the format");
  out.values.assign(rows * m.row_bytes, 0);
  switch (format.kind) {
    case FormatKind::kFp8PerChannel:
      m.scale_stride = 1;
      out.scales.assign(rows * 4, 0);
      break;
    case FormatKind::kFp8Block128:
      m.scale_stride = CeilDiv(cols, kFp8Tile);
      out.scales.assign(CeilDiv(rows, kFp8Tile) * m.scale_stride * 4, 0);
      break;
    case FormatKind::kInt4Group:
      m.scale_stride = cols / format.group_size;
      out.scales.assign(rows * m.scale_stride * 2, 0);
      out.zeros.assign(rows * m.scale_stride * 2, 0);
      break;
    default:
      break;
  }
  m.data = out.values.data();
  m.scales = out.scales.empty() ? nullptr : out.scales.data();
  m.zeros = out.zeros.empty() ? nullptr : out.zeros.data();
  return out;
}

HostMatrix QuantizeWeights(const TensorFormat& format, const float* src, int64_t rows,
                           int64_t cols) {
  HostMatrix out = AllocateHostMatrix(format, rows, cols);
  switch (format.kind) {
    case FormatKind::kFp8PerChannel:
      QuantizeFp8PerChannel(src, out);
      break;
    case FormatKind::kFp8Block128:
      QuantizeFp8Block(src, out);
      break;
    case FormatKind::kInt4Group:
      QuantizeInt4(src, out);
      break;
    default: {
      const DType dtype = *ElementDType(format);
      for (int64_t r = 0; r < rows; ++r) {
        QuantizeRow(dtype, src + r * cols, out.values.data() + r * out.matrix.row_bytes, cols);
      }
      break;
    }
  }
  return out;
}

}  // namespace tpserve
