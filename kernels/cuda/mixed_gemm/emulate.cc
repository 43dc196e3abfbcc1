#include "kernels/cuda/mixed_gemm/emulate.h"

#include <cmath>
#include <cstring>

#include "formats/dtype.h"
#include "kernels/check.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"
#include "kernels/quantize.h"

namespace tpserve::cuda {
namespace {

using mixed_gemm::EngineInt4Code;
using mixed_gemm::PreparedInt4Index;
using mixed_gemm::SignedValue;

// Round to bf16 (nearest even) and back: what __float2bfloat16_rn and the epilogue's
// NumericConverter<bfloat16_t, float> give.
float Bf16(float v) { return BF16ToF32(F32ToBF16(v)); }

// Round the exact value `v` to f32 (nearest even): the f32 result of one IEEE operation.
float F32(double v) { return static_cast<float>(v); }

float Fp8OperandAt(const MixedGemmWeight& w, int64_t row, int64_t col) {
  const uint8_t code = static_cast<const uint8_t*>(w.codes)[row * w.row_bytes + col];
  const float scale = w.scales[(col / w.group_size) * w.n + row];
  return Bf16(F8E4M3ToF32(code) * scale);
}

float Int4OperandAt(const MixedGemmWeight& w, int64_t row, int64_t col) {
  const int64_t e = PreparedInt4Index(w.n, row, col);
  const uint8_t byte = static_cast<const uint8_t*>(w.codes)[e / 2];
  const float q = static_cast<float>(SignedValue(byte >> (4 * (e % 2))));
  const int64_t s = (col / w.group_size) * w.n + row;
  return Bf16(std::fma(q, w.scales[s], w.offsets[s]));
}

}  // namespace

float MmaOperand(const MixedGemmWeight& w, int64_t row, int64_t col) {
  return w.kind == MixedGemmKind::kInt4 ? Int4OperandAt(w, row, col) : Fp8OperandAt(w, row, col);
}

float Int4Operand(Int4Formula formula, uint32_t code, uint16_t scale_f16, uint16_t zero_f16) {
  const float scale = F16ToF32(scale_f16);
  const float zero = F16ToF32(zero_f16);
  const float q = static_cast<float>(static_cast<int>(code) - 8);
  const float offset = (8.0f - zero) * scale;  // prepared: two f32 operations
  switch (formula) {
    case Int4Formula::kF32ScaleOffset:
      return Bf16(std::fma(q, scale, offset));
    case Int4Formula::kF32ScaleOffsetUnfused:
      return Bf16(F32(static_cast<double>(F32(static_cast<double>(q) * scale)) + offset));
    case Int4Formula::kBf16ScaleZero: {
      const float s = Bf16(scale), z = Bf16(-zero * scale);
      return Bf16(Bf16(static_cast<float>(code) * s) + z);
    }
    case Int4Formula::kBf16ScaleZeroFused: {
      const float s = Bf16(scale), z = Bf16(-zero * scale);
      // code * s (<= 12 bits) + z (8 bits) is exact in f32: one rounding, to bf16.
      return Bf16(F32(static_cast<double>(code) * s + z));
    }
    case Int4Formula::kBf16SignedOffset:
      return Bf16(Bf16(q * Bf16(scale)) + Bf16(offset));
  }
  return 0.0f;
}

std::function<float(int64_t, int64_t)> Int4FormulaOperand(const WeightMatrix& w,
                                                          Int4Formula formula) {
  TP_CHECK(w.format.kind == FormatKind::kInt4Group, "Int4FormulaOperand: not an int4 weight");
  return [&w, formula](int64_t row, int64_t col) {
    const auto* codes = static_cast<const uint8_t*>(w.data) + row * w.row_bytes;
    const int64_t g = row * w.scale_stride + col / w.format.group_size;
    uint16_t scale, zero;
    std::memcpy(&scale, static_cast<const uint8_t*>(w.scales) + 2 * g, 2);
    std::memcpy(&zero, static_cast<const uint8_t*>(w.zeros) + 2 * g, 2);
    return Int4Operand(formula, EngineInt4Code(codes, col), scale, zero);
  };
}

std::vector<double> EmulatedProduct(const std::function<float(int64_t, int64_t)>& operand,
                                    int64_t n, int64_t k, const float* x, int64_t m) {
  std::vector<double> y(m * n, 0.0);
  std::vector<float> row(k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) row[c] = operand(r, c);
    for (int64_t t = 0; t < m; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < k; ++c) sum += static_cast<double>(x[t * k + c]) * row[c];
      y[t * n + r] = sum;
    }
  }
  return y;
}

std::vector<double> ReferenceProduct(const WeightMatrix& w, const float* x, int64_t m) {
  std::vector<std::vector<float>> rows(w.rows);
  for (int64_t r = 0; r < w.rows; ++r) {
    rows[r].resize(w.cols);
    DequantizeWeightRow(w, r, rows[r].data());
  }
  return EmulatedProduct([&rows](int64_t r, int64_t c) { return rows[r][c]; }, w.rows, w.cols, x,
                         m);
}

std::vector<double> RoundToBf16(const std::vector<double>& y) {
  std::vector<double> out(y.size());
  for (size_t i = 0; i < y.size(); ++i) out[i] = Bf16(static_cast<float>(y[i]));
  return out;
}

double NormalizedError(const std::vector<double>& a, const std::vector<double>& b) {
  TP_CHECK(a.size() == b.size(), "NormalizedError: sizes differ");
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0.0 ? num / den : num;
}

}  // namespace tpserve::cuda
