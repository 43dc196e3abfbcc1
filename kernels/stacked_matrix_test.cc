// Stacking q/k/v-like slices along their rows: the stack decodes row for row to its parts, is
// the very matrix the format gives the concatenated rows (so a fused GEMM multiplies what the
// separate ones did), holds exactly the parts' bytes, and its row views are the parts again.
// Refused stacks name the part and the reason (fp8 128x128 tiles straddling a boundary).
// Before this file the loader placed q, k and v apart and there was no stack; what catches a
// wrong one: a view that skipped scales per row instead of per 128-row tile fails the fp8-block
// case's EXPECT_EQ(DecodeRows(view), DecodeRows(parts[i].matrix)), and a stack of parts that cut
// a tile fails EXPECT_EQ(DecodeRows(stack.matrix), DecodeRows(whole.matrix)) (so it is refused).
#include "kernels/stacked_matrix.h"

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

std::vector<float> DecodeRows(const WeightMatrix& w) {
  std::vector<float> out(w.rows * w.cols);
  for (int64_t r = 0; r < w.rows; ++r) DequantizeWeightRow(w, r, out.data() + r * w.cols);
  return out;
}

// 405B's q/k/v at TP 8 scaled down along k: 2048 + 128 + 128 rows would be 32 MiB of fp8 here;
// the rows that matter are the boundaries (multiples of 128, the last part 128 as well).
TEST(StackRows, StackIsTheFormatsMatrixOfTheConcatenatedRows) {
  const int64_t cols = 256;
  const std::vector<int64_t> rows = {256, 128, 128};
  for (const TensorFormat& f :
       {TensorFormat::Of(FormatKind::kBF16), TensorFormat::Of(FormatKind::kFp8PerChannel),
        TensorFormat::Of(FormatKind::kFp8Block128), TensorFormat::Int4(128), TensorFormat::Int4(32),
        TensorFormat::Of(FormatKind::kQ4_1)}) {
    SCOPED_TRACE(TensorFormatName(f));
    std::vector<float> all;
    std::vector<HostMatrix> parts;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<float> w = Normal(rows[i] * cols, 10 + i);
      all.insert(all.end(), w.begin(), w.end());
      parts.push_back(QuantizeWeights(f, w.data(), rows[i], cols));
    }
    std::vector<const WeightMatrix*> ptrs;
    for (const HostMatrix& p : parts) ptrs.push_back(&p.matrix);
    ASSERT_EQ(StackRowsProblem(ptrs), "");
    const HostMatrix stack = StackRows(ptrs);
    EXPECT_EQ(stack.matrix.rows, 512);
    EXPECT_FALSE(stack.is_view());
    // Exactly the parts' bytes: fusing adds no weight memory.
    int64_t sum = 0;
    for (const HostMatrix& p : parts) sum += WeightMatrixBytes(p.matrix);
    EXPECT_EQ(WeightMatrixBytes(stack.matrix), sum);
    EXPECT_EQ(WeightMatrixBytes(stack.matrix), *MatrixBytes(f, 512, cols, "stack"));
    // The format's own encoding of all 512 rows at once (each tile, group and block lies in one
    // part) decodes to the same floats as the stack.
    const HostMatrix whole = QuantizeWeights(f, all.data(), 512, cols);
    EXPECT_EQ(DecodeRows(stack.matrix), DecodeRows(whole.matrix));
    // Each part's rows, read through a view of the stack, are that part.
    int64_t first = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const WeightMatrix view = RowRange(stack.matrix, first, rows[i]);
      EXPECT_EQ(DecodeRows(view), DecodeRows(parts[i].matrix)) << "part " << i;
      first += rows[i];
    }
  }
}

// fp8 128x128 tiles: a part of 64 rows (SmolLM2's one KV head of 64 at TP 3) would end inside
// a tile, so the next part's rows would be scaled by its tile's scale. Refused, named.
TEST(StackRowsProblem, NamesAStraddledTileAndOtherDifferences) {
  const int64_t cols = 256;
  const std::vector<float> w = Normal(192 * cols, 3);
  const TensorFormat block = TensorFormat::Of(FormatKind::kFp8Block128);
  const HostMatrix q = QuantizeWeights(block, w.data(), 192, cols);
  const HostMatrix k = QuantizeWeights(block, w.data(), 64, cols);
  EXPECT_EQ(StackRowsProblem({&q.matrix, &k.matrix}),
            "part 0's 192 rows end inside a 128-row scale block of fp8-block, which the next "
            "part's rows would share");
  // The last part may end inside a tile: the stack's last tile is partial, as a checkpoint's.
  const HostMatrix q256 = QuantizeWeights(block, w.data(), 128, cols);
  EXPECT_EQ(StackRowsProblem({&q256.matrix, &k.matrix}), "");
  const HostMatrix bf16 = QuantizeWeights(TensorFormat::Of(FormatKind::kBF16), w.data(), 64, cols);
  EXPECT_EQ(StackRowsProblem({&q256.matrix, &bf16.matrix}), "part 1 is bf16, part 0 fp8-block");
  WeightMatrix biased = bf16.matrix;
  const float bias[64] = {};
  biased.bias = bias;
  EXPECT_EQ(StackRowsProblem({&bf16.matrix, &biased}), "part 1 carries a bias");
  WeightMatrix bounded = q256.matrix;
  bounded.activation_scale_ub = 1200.0f;
  EXPECT_EQ(StackRowsProblem({&q256.matrix, &bounded}),
            "part 1's activation scale bound 1200 is not part 0's 0");
}

TEST(RowRange, MovesBiasAndKeepsNoBackendForm) {
  const std::vector<float> w = Normal(32 * 64, 4);
  HostMatrix m = QuantizeWeights(TensorFormat::Of(FormatKind::kF32), w.data(), 32, 64);
  std::vector<float> bias(32);
  m.matrix.bias = bias.data();
  int marker = 0;
  m.matrix.prepared = &marker;
  const WeightMatrix v = RowRange(m.matrix, 16, 8);
  EXPECT_EQ(v.rows, 8);
  EXPECT_EQ(v.bias, bias.data() + 16);
  EXPECT_EQ(v.prepared, nullptr);
  EXPECT_EQ(v.data, static_cast<const uint8_t*>(m.matrix.data) + 16 * 64 * 4);
}

}  // namespace
}  // namespace tpserve
