// The stored form's byte counts (WeightMatrixPartBytes) and CopyColumnChunk: a chunk copied
// into a matrix of its own decodes to the same values as the chunk's view into the whole, and
// holds exactly the bytes the format's own count gives a matrix of that width.
#include "kernels/weight_matrix.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/quantize_weights.h"
#include "kernels/testing/parity_util.h"

namespace tpserve {
namespace {

std::vector<float> Normal(int64_t count, uint32_t seed) {
  return parity::RandomF32(count, seed, 0.3f);
}

TEST(WeightMatrixPartBytes, SumToWeightMatrixBytesAndNameEachArray) {
  const int64_t rows = 200, cols = 384;
  const std::vector<float> w = Normal(rows * cols, 1);
  const HostMatrix int4 = QuantizeWeights(TensorFormat::Int4(128), w.data(), rows, cols);
  const WeightMatrixParts p = WeightMatrixPartBytes(int4.matrix);
  EXPECT_EQ(p.values, rows * cols / 2);
  EXPECT_EQ(p.scales, rows * 3 * 2);  // f16 per (row, group of 128)
  EXPECT_EQ(p.zeros, rows * 3 * 2);
  EXPECT_EQ(p.perm, 0);
  EXPECT_EQ(p.total(), WeightMatrixBytes(int4.matrix));
  const HostMatrix block =
      QuantizeWeights(TensorFormat::Of(FormatKind::kFp8Block128), w.data(), rows, cols);
  EXPECT_EQ(WeightMatrixPartBytes(block.matrix).scales, 2 * 3 * 4);  // 2 x 3 tiles of f32
}

TEST(CopyColumnChunk, OwnsTheChunksBytesAndDecodesAsTheView) {
  const int64_t rows = 160, cols = 768, chunks = 3, kc = cols / chunks;
  const std::vector<float> w = Normal(rows * cols, 2);
  for (const TensorFormat& f :
       {TensorFormat::Of(FormatKind::kBF16), TensorFormat::Of(FormatKind::kF8E4M3),
        TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Of(FormatKind::kFp8Block128),
        TensorFormat::Int4(128), TensorFormat::Int4(32), TensorFormat::Of(FormatKind::kQ4_0),
        TensorFormat::Of(FormatKind::kQ4_K)}) {
    SCOPED_TRACE(TensorFormatName(f));
    const HostMatrix host = QuantizeWeights(f, w.data(), rows, cols);
    for (int64_t c = 0; c < chunks; ++c) {
      const HostMatrix copy = CopyColumnChunk(host.matrix, c, kc);
      EXPECT_FALSE(copy.is_view());
      EXPECT_EQ(WeightMatrixBytes(copy.matrix), *MatrixBytes(f, rows, kc, "chunk"));
      EXPECT_EQ(static_cast<int64_t>(copy.values.size()), rows * copy.matrix.row_bytes);
      const WeightMatrix view = ColumnChunk(host.matrix, c, kc);
      std::vector<float> want(kc), got(kc);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeWeightRow(view, r, want.data());
        DequantizeWeightRow(copy.matrix, r, got.data());
        ASSERT_EQ(got, want) << "chunk " << c << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
