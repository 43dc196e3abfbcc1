#include "kernels/cuda/mixed_gemm/test_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "formats/dtype.h"
#include "kernels/quantize.h"
#include "kernels/quantize_weights.h"

namespace tpserve::cuda {
namespace {

constexpr int kInt4Chunk = 32;

std::vector<float> GaussianWeights(int64_t count, uint32_t seed, double outlier_fraction) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::bernoulli_distribution outlier(outlier_fraction);
  std::vector<float> w(count);
  for (float& v : w) v = normal(rng) * (outlier(rng) ? 8.0f : 1.0f);
  return w;
}

float RoundF16(float v) { return F16ToF32(F32ToF16(v)); }

void StoreF16(std::vector<uint8_t>& bytes, int64_t i, float v) {
  const uint16_t h = F32ToF16(v);
  std::memcpy(&bytes[2 * i], &h, 2);
}

// Scale, zero point and codes of one group the way `style` computes them.
void QuantizeGroup(Int4Style style, const float* w, int64_t g, float* scale, float* zero,
                   int* codes) {
  const auto [lo_it, hi_it] = std::minmax_element(w, w + g);
  const float lo = *lo_it, hi = *hi_it;
  float s, z;
  if (style == Int4Style::kGptqSym) {
    s = RoundF16(2.0f * std::max(std::fabs(lo), std::fabs(hi)) / 15.0f);
    z = 8.0f;
  } else {
    s = RoundF16((hi - lo) / 15.0f);
    z = std::clamp(std::nearbyint(-lo / s), 0.0f, 15.0f);
  }
  if (s == 0.0f) s = 1.0f;
  for (int64_t j = 0; j < g; ++j) {
    codes[j] = static_cast<int>(std::clamp(std::nearbyint(w[j] / s) + z, 0.0f, 15.0f));
  }
  // GPTQ v1 stores zero - 1 in 4 bits and the loader adds 1 back: a zero of 0 is read as 16.
  if (style == Int4Style::kGptqV1Asym && z == 0.0f) z = 16.0f;
  *scale = s;
  *zero = z;
}

}  // namespace

HostMatrix MakeInt4Weight(Int4Style style, int64_t rows, int64_t cols, int64_t group, uint32_t seed,
                          double outlier_fraction) {
  std::vector<float> w = GaussianWeights(rows * cols, seed, outlier_fraction);
  if (style == Int4Style::kGptqV1Asym) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      if ((i / group) % 2 == 1) w[i] = std::fabs(w[i]);
    }
  }
  const TensorFormat format = TensorFormat::Int4(group);
  if (style == Int4Style::kFractional) return QuantizeWeights(format, w.data(), rows, cols);
  HostMatrix out = AllocateHostMatrix(format, rows, cols);
  const WeightMatrix& m = out.matrix;
  std::vector<int> codes(cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t gi = 0; gi < cols / group; ++gi) {
      float s, z;
      QuantizeGroup(style, &w[r * cols + gi * group], group, &s, &z, &codes[gi * group]);
      StoreF16(out.scales, r * m.scale_stride + gi, s);
      StoreF16(out.zeros, r * m.scale_stride + gi, z);
    }
    uint8_t* packed = out.values.data() + r * m.row_bytes;
    for (int64_t c0 = 0; c0 < cols; c0 += kInt4Chunk) {
      for (int j = 0; j < kInt4Chunk / 2; ++j) {
        packed[c0 / 2 + j] =
            static_cast<uint8_t>(codes[c0 + j] | (codes[c0 + j + kInt4Chunk / 2] << 4));
      }
    }
  }
  return out;
}

HostMatrix MakeFp8Weight(FormatKind kind, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> w = GaussianWeights(rows * cols, seed, 0.0);
  return QuantizeWeights(TensorFormat::Of(kind), w.data(), rows, cols);
}

std::vector<float> RandomBf16Activations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(count);
  for (float& v : x) v = BF16ToF32(F32ToBF16(normal(rng)));
  return x;
}

}  // namespace tpserve::cuda
