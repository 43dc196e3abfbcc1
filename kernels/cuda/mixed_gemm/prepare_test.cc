// Host preparation round trips (prepare.h): the prepared bytes read back to the checkpoint's
// codes, scales and zero points; column chunks of the prepared form are the prepared form of
// the chunk; fp8 scales expanded per 128 columns; byte counts match mixed_gemm.h.
#include "kernels/cuda/mixed_gemm/prepare.h"

#include <cstring>

#include "formats/dtype.h"
#include "formats/tensor_format.h"
#include "gtest/gtest.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"
#include "kernels/quantize_weights.h"

namespace tpserve::cuda {
namespace {

std::vector<float> Ramp(int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = 0.01f * static_cast<float>((i * 37) % 101 - 50);
  return v;
}

float F16At(const void* base, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
  return F16ToF32(h);
}

float F32At(const void* base, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + 4 * i, 4);
  return v;
}

TEST(PrepareInt4, RoundTripsEveryCodeScaleAndZero) {
  const int64_t n = 48, k = 256, group = 64;
  const std::vector<float> src = Ramp(n * k);
  const HostMatrix host = QuantizeWeights(TensorFormat::Int4(group), src.data(), n, k);
  const WeightMatrix& w = host.matrix;
  const PreparedInt4 p = PrepareInt4(w);
  ASSERT_EQ(static_cast<int64_t>(p.codes.size()), n * k / 2);
  const MixedGemmWeight view = p.View();
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
    for (int64_t c = 0; c < k; ++c) {
      ASSERT_EQ(PreparedInt4Code(view, r, c), mixed_gemm::EngineInt4Code(row, c))
          << "row " << r << " col " << c;
    }
    for (int64_t g = 0; g < k / group; ++g) {
      const float scale = F16At(w.scales, r * w.scale_stride + g);
      const float zero = F16At(w.zeros, r * w.scale_stride + g);
      EXPECT_EQ(view.scales[g * n + r], scale);
      EXPECT_EQ(view.offsets[g * n + r], (8.0f - zero) * scale);
    }
  }
}

// The engine's nibble order, checked without its helper: byte 3 of a row's first 32 columns
// holds column 3 (low) and column 19 (high).
TEST(PrepareInt4, ReadsTheEngineNibbleOrder) {
  HostMatrix host = AllocateHostMatrix(TensorFormat::Int4(64), 16, 64);
  host.values[3] = 0xA5;  // row 0: column 3 = 5, column 19 = 10
  const PreparedInt4 p = PrepareInt4(host.matrix);
  EXPECT_EQ(PreparedInt4Code(p.View(), 0, 3), 5u);
  EXPECT_EQ(PreparedInt4Code(p.View(), 0, 19), 10u);
  EXPECT_EQ(PreparedInt4Code(p.View(), 0, 4), 0u);
  // Code 0 is stored as the int4b_t -8: nibble 8.
  const int64_t e = mixed_gemm::PreparedInt4Index(16, 0, 4);
  EXPECT_EQ((p.codes[e / 2] >> (4 * (e % 2))) & 0xF, 0x8);
}

TEST(PrepareInt4, ColumnChunkIsThePreparedFormOfTheChunk) {
  const int64_t n = 32, k = 512, group = 128, chunks = 4, kc = k / chunks;
  const std::vector<float> src = Ramp(n * k);
  const HostMatrix host = QuantizeWeights(TensorFormat::Int4(group), src.data(), n, k);
  const PreparedInt4 whole = PrepareInt4(host.matrix);
  for (int64_t c = 0; c < chunks; ++c) {
    const PreparedInt4 alone = PrepareInt4(ColumnChunk(host.matrix, c, kc));
    const MixedGemmWeight view = MixedGemmColumnChunk(whole.View(), c, kc);
    EXPECT_EQ(view.k, kc);
    EXPECT_EQ(std::memcmp(view.codes, alone.codes.data(), alone.codes.size()), 0) << "chunk " << c;
    EXPECT_EQ(std::memcmp(view.scales, alone.scales.data(), alone.scales.size() * 4), 0);
    EXPECT_EQ(std::memcmp(view.offsets, alone.offsets.data(), alone.offsets.size() * 4), 0);
  }
}

TEST(PrepareFp8Scales, RepeatsEachKindsScalePer128Columns) {
  const int64_t n = 256, k = 384;
  const std::vector<float> src = Ramp(n * k);
  for (FormatKind kind :
       {FormatKind::kF8E4M3, FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    const HostMatrix host = QuantizeWeights(TensorFormat::Of(kind), src.data(), n, k);
    const WeightMatrix& w = host.matrix;
    const std::vector<float> s = PrepareFp8Scales(w);
    ASSERT_EQ(static_cast<int64_t>(s.size()), n * k / 128);
    for (int64_t g = 0; g < k / 128; ++g) {
      for (int64_t r = 0; r < n; ++r) {
        float want = 1.0f;
        if (kind == FormatKind::kFp8PerChannel) want = F32At(w.scales, r);
        if (kind == FormatKind::kFp8Block128)
          want = F32At(w.scales, (r / 128) * w.scale_stride + g);
        ASSERT_EQ(s[g * n + r], want) << TensorFormatName(w.format) << " row " << r << " g " << g;
      }
    }
    const MixedGemmWeight mw = Fp8MixedGemmWeight(w, s.data());
    const MixedGemmWeight chunk = MixedGemmColumnChunk(mw, 2, 128);
    EXPECT_EQ(chunk.codes, static_cast<const uint8_t*>(w.data) + 256);
    EXPECT_EQ(chunk.scales, s.data() + 2 * n);
  }
}

// What the memory plan must count: int4's prepared form is 4 bytes per group and row more than
// MatrixBytes (f32 scale and offset instead of f16 scale and zero); fp8's adds n * k / 32.
TEST(PreparedBytes, MatchThePreparedBuffersAndStateTheExtra) {
  const int64_t n = 48, k = 256, group = 64;
  const std::vector<float> src = Ramp(n * k);
  const TensorFormat int4 = TensorFormat::Int4(group);
  const PreparedInt4 p = PrepareInt4(QuantizeWeights(int4, src.data(), n, k).matrix);
  const MixedGemmPreparedBytes b = PreparedBytes(int4, n, k);
  EXPECT_EQ(b.codes, static_cast<int64_t>(p.codes.size()));
  EXPECT_EQ(b.scales, static_cast<int64_t>(p.scales.size() * 4));
  EXPECT_EQ(b.offsets, static_cast<int64_t>(p.offsets.size() * 4));
  EXPECT_EQ(b.total() - *MatrixBytes(int4, n, k, "w"), 4 * n * k / group);
  const MixedGemmPreparedBytes f =
      PreparedBytes(TensorFormat::Of(FormatKind::kFp8Block128), 256, 384);
  EXPECT_EQ(f.codes, 0);
  EXPECT_EQ(f.total(), 256 * 384 / 32);
}

}  // namespace
}  // namespace tpserve::cuda
