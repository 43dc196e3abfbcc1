#include "kernels/cuda/mixed_gemm/prepare.h"

#include <cstring>

#include "formats/dtype.h"
#include "kernels/check.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"

namespace tpserve::cuda {
namespace {

using mixed_gemm::EngineInt4Code;
using mixed_gemm::Int4Offset;
using mixed_gemm::PreparedInt4Index;
using mixed_gemm::SignedNibble;
using mixed_gemm::UnsignedCode;

constexpr int64_t kFp8Tile = 128;

float LoadF16(const void* base, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
  return F16ToF32(h);
}

float LoadF32(const void* base, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + 4 * i, 4);
  return v;
}

}  // namespace

MixedGemmWeight PreparedInt4::View() const {
  MixedGemmWeight w;
  w.kind = MixedGemmKind::kInt4;
  w.codes = codes.data();
  w.scales = scales.data();
  w.offsets = offsets.data();
  w.group_size = group_size;
  w.n = n;
  w.k = k;
  return w;
}

PreparedInt4 PrepareInt4(const WeightMatrix& w) {
  TP_CHECK(
      w.format.kind == FormatKind::kInt4Group && MixedGemmTakesWeight(w.format, w.rows, w.cols),
      "PrepareInt4: not an int4 weight the mixed GEMM takes");
  PreparedInt4 p;
  p.n = w.rows;
  p.k = w.cols;
  p.group_size = w.format.group_size;
  p.codes.assign(p.n * p.k / 2, 0);
  for (int64_t r = 0; r < p.n; ++r) {
    const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
    for (int64_t c = 0; c < p.k; ++c) {
      const int64_t e = PreparedInt4Index(p.n, r, c);
      p.codes[e / 2] |= static_cast<uint8_t>(SignedNibble(EngineInt4Code(row, c)) << (4 * (e % 2)));
    }
  }
  const int64_t groups = p.k / p.group_size;
  p.scales.resize(groups * p.n);
  p.offsets.resize(groups * p.n);
  for (int64_t r = 0; r < p.n; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = LoadF16(w.scales, r * w.scale_stride + g);
      const float zero = LoadF16(w.zeros, r * w.scale_stride + g);
      p.scales[g * p.n + r] = scale;
      p.offsets[g * p.n + r] = Int4Offset(zero, scale);
    }
  }
  return p;
}

std::vector<float> PrepareFp8Scales(const WeightMatrix& w) {
  TP_CHECK(
      w.format.kind != FormatKind::kInt4Group && MixedGemmTakesWeight(w.format, w.rows, w.cols),
      "PrepareFp8Scales: not an fp8 weight the mixed GEMM takes");
  const int64_t n = w.rows, groups = w.cols / kFp8ScaleGroup;
  std::vector<float> out(groups * n);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r) {
      float s = 1.0f;
      if (w.format.kind == FormatKind::kFp8PerChannel && w.scales != nullptr) {
        s = LoadF32(w.scales, r);
      } else if (w.format.kind == FormatKind::kFp8Block128) {
        // kFp8ScaleGroup == the tile width, so group g is tile column g.
        s = LoadF32(w.scales, (r / kFp8Tile) * w.scale_stride + g);
      }
      out[g * n + r] = s;
    }
  }
  return out;
}

MixedGemmWeight Fp8MixedGemmWeight(const WeightMatrix& w, const float* scales) {
  MixedGemmWeight m;
  m.kind = MixedGemmKind::kFp8;
  m.codes = w.data;
  m.row_bytes = w.row_bytes;
  m.scales = scales;
  m.group_size = kFp8ScaleGroup;
  m.n = w.rows;
  m.k = w.cols;
  return m;
}

uint32_t PreparedInt4Code(const MixedGemmWeight& w, int64_t row, int64_t col) {
  const int64_t e = PreparedInt4Index(w.n, row, col);
  const uint8_t byte = static_cast<const uint8_t*>(w.codes)[e / 2];
  return UnsignedCode(byte >> (4 * (e % 2)));
}

}  // namespace tpserve::cuda
