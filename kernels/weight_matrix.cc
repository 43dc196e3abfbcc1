#include "kernels/weight_matrix.h"

#include <cstring>

#include "formats/dtype.h"
#include "kernels/check.h"

namespace tpserve {
namespace {

constexpr int64_t kFp8Tile = 128;
constexpr int64_t kInt4Chunk = 32;  // codes are packed per 32 columns (GGML Q4_0 order)

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

float LoadF32(const void* base, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * 4, 4);
  return v;
}

float LoadF16(const void* base, int64_t i) {
  uint16_t v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * 2, 2);
  return F16ToF32(v);
}

void DequantizeInt4Row(const WeightMatrix& w, int64_t row, float* out) {
  const auto* codes = static_cast<const uint8_t*>(w.data) + row * w.row_bytes;
  const int64_t group = w.format.group_size;
  for (int64_t c0 = 0; c0 < w.cols; c0 += kInt4Chunk) {
    const uint8_t* chunk = codes + c0 / 2;
    for (int64_t j = 0; j < kInt4Chunk / 2; ++j) {
      for (int half = 0; half < 2; ++half) {
        const int64_t c = c0 + j + half * (kInt4Chunk / 2);
        const int code = half == 0 ? (chunk[j] & 0x0F) : (chunk[j] >> 4);
        const int64_t s = row * w.scale_stride + c / group;
        out[c] = (static_cast<float>(code) - LoadF16(w.zeros, s)) * LoadF16(w.scales, s);
      }
    }
  }
}

// `rows` rows of `row_bytes` from `src` (rows `stride` bytes apart), packed.
std::vector<uint8_t> CopyRows(const void* src, int64_t rows, int64_t row_bytes, int64_t stride) {
  std::vector<uint8_t> out(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * row_bytes, static_cast<const uint8_t*>(src) + r * stride,
                row_bytes);
  }
  return out;
}

}  // namespace

int64_t PackedRowBytes(const TensorFormat& format, int64_t cols) {
  if (cols < 0) return -1;
  if (format.kind == FormatKind::kInt4Group) {
    return cols % kInt4Chunk == 0 && format.group_size > 0 && cols % format.group_size == 0
               ? cols / 2
               : -1;
  }
  const std::optional<DType> dtype = ElementDType(format);
  if (!dtype.has_value()) return -1;
  return RowBytes(*dtype, cols).value_or(-1);
}

WeightMatrixParts WeightMatrixPartBytes(const WeightMatrix& w) {
  WeightMatrixParts p;
  p.values = w.rows * w.row_bytes;
  switch (w.format.kind) {
    case FormatKind::kFp8PerChannel:
      p.scales = w.rows * 4;
      break;
    case FormatKind::kFp8Block128:
      p.scales = CeilDiv(w.rows, kFp8Tile) * w.scale_stride * 4;
      break;
    case FormatKind::kInt4Group:
      p.scales = p.zeros = w.rows * w.scale_stride * 2;  // f16 scales and zero points
      if (w.input_perm != nullptr) p.perm = w.cols * 4;
      break;
    default:
      break;
  }
  return p;
}

int64_t WeightMatrixBytes(const WeightMatrix& w) { return WeightMatrixPartBytes(w).total(); }

WeightMatrix ColumnChunk(const WeightMatrix& w, int64_t c, int64_t kc) {
  // A backend's own form may have replaced the arrays this would point into.
  TP_CHECK(w.prepared == nullptr,
           "ColumnChunk of a matrix in a backend's own form (only that backend can chunk it)");
  TP_CHECK(w.bias == nullptr, "ColumnChunk of a matrix with a bias (a chunk's sum has none)");
  WeightMatrix wc = w;
  wc.cols = kc;
  wc.input_perm = nullptr;
  wc.data = static_cast<const uint8_t*>(w.data) + c * PackedRowBytes(w.format, kc);
  if (w.format.kind == FormatKind::kInt4Group) {
    wc.scales = static_cast<const uint16_t*>(w.scales) + c * (kc / w.format.group_size);
    wc.zeros = static_cast<const uint16_t*>(w.zeros) + c * (kc / w.format.group_size);
  } else if (w.format.kind == FormatKind::kFp8Block128) {
    wc.scales = static_cast<const float*>(w.scales) + c * (kc / kFp8Tile);
  }
  return wc;
}

HostMatrix CopyColumnChunk(const WeightMatrix& w, int64_t c, int64_t kc) {
  const WeightMatrix view = ColumnChunk(w, c, kc);
  HostMatrix out;
  WeightMatrix& m = out.matrix;
  m = view;
  m.row_bytes = PackedRowBytes(view.format, kc);
  out.values = CopyRows(view.data, view.rows, m.row_bytes, view.row_bytes);
  switch (view.format.kind) {
    case FormatKind::kInt4Group:  // f16 scales and zero points per (row, group)
      m.scale_stride = kc / view.format.group_size;
      out.scales = CopyRows(view.scales, view.rows, m.scale_stride * 2, view.scale_stride * 2);
      out.zeros = CopyRows(view.zeros, view.rows, m.scale_stride * 2, view.scale_stride * 2);
      break;
    case FormatKind::kFp8Block128:  // f32 per (128-row tile, 128-column tile)
      m.scale_stride = CeilDiv(kc, kFp8Tile);
      out.scales = CopyRows(view.scales, CeilDiv(view.rows, kFp8Tile), m.scale_stride * 4,
                            view.scale_stride * 4);
      break;
    case FormatKind::kFp8PerChannel:  // f32 per row: every chunk's
      if (view.scales != nullptr) out.scales = CopyRows(view.scales, 1, view.rows * 4, 0);
      break;
    default:
      break;
  }
  m.data = out.values.data();
  m.scales = out.scales.empty() ? nullptr : out.scales.data();
  m.zeros = out.zeros.empty() ? nullptr : out.zeros.data();
  return out;
}

void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out) {
  TP_CHECK(row >= 0 && row < w.rows, "DequantizeWeightRow: row out of range");
  TP_CHECK(w.data != nullptr, "DequantizeWeightRow: the matrix is only in a backend's own form");
  const auto* src = static_cast<const uint8_t*>(w.data) + row * w.row_bytes;
  switch (w.format.kind) {
    case FormatKind::kInt4Group:
      DequantizeInt4Row(w, row, out);
      return;
    case FormatKind::kFp8PerChannel: {
      DequantizeRow(DType::kF8E4M3, src, out, w.cols);
      const float s = LoadF32(w.scales, row);
      for (int64_t c = 0; c < w.cols; ++c) out[c] *= s;
      return;
    }
    case FormatKind::kFp8Block128: {
      DequantizeRow(DType::kF8E4M3, src, out, w.cols);
      for (int64_t c = 0; c < w.cols; ++c) {
        out[c] *= LoadF32(w.scales, (row / kFp8Tile) * w.scale_stride + c / kFp8Tile);
      }
      return;
    }
    default:
      DequantizeRow(*ElementDType(w.format), src, out, w.cols);
      return;
  }
}

}  // namespace tpserve
