// The fused MatMulMany's split on the host: a product of the stacked q/k/v (or gate/up) of
// 405B's TP 8 widths, split by the plan and the lookup the CUDA kernel uses, gives each
// projection exactly the floats of its own MatMul (the CPU backend computes both products);
// and the plan's unit is the widest the addresses and widths allow (16-byte moves for 405B).
// Before this change the CUDA backend ran one GEMM per matrix and split nothing; an output
// offset or width off by a unit fails EXPECT_EQ(outs[i], alone).
#include "kernels/cuda/column_split.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/quantize_weights.h"
#include "kernels/stacked_matrix.h"
#include "kernels/testing/parity_util.h"

namespace tpserve::cuda {
namespace {

std::vector<float> Normal(int64_t count, uint32_t seed) {
  return parity::RandomF32(count, seed, 0.3f);
}

TEST(PlanColumnSplit, MovesSixteenBytesFor405BsQkvAtTp8) {
  alignas(256) static uint8_t y[64], q[64], k[64], v[64];
  const ColumnSplit s = PlanColumnSplit(y, {q, k, v}, {2048, 128, 128}, /*elem_bytes=*/2);
  EXPECT_EQ(s.num_outputs, 3);
  EXPECT_EQ(s.unit_bytes, 16);
  EXPECT_EQ(s.row_units, 2304 * 2 / 16);
  EXPECT_EQ(s.first_unit[1], 256);
  EXPECT_EQ(s.first_unit[2], 272);
  EXPECT_EQ(s.units[2], 16);
  EXPECT_EQ(SplitOutputOf(s, 255), 0);
  EXPECT_EQ(SplitOutputOf(s, 256), 1);
  EXPECT_EQ(SplitOutputOf(s, 287), 2);
  // An odd width (or address) narrows every move to what divides them all.
  EXPECT_EQ(PlanColumnSplit(y, {q, k}, {3, 5}, 2).unit_bytes, 2);
  EXPECT_EQ(PlanColumnSplit(y, {q + 4, k}, {8, 8}, 2).unit_bytes, 4);
}

// The split of one product over the stack equals each part's own product, bit for bit: the
// columns each output receives are its own (a wrong offset or width fails here).
TEST(SplitColumnsOnHost, StackedProductSplitsIntoEachProjectionsOwnProduct) {
  CpuBackend be(CpuBackendOptions{.num_threads = 2});
  const int64_t k = 128, m = 3;
  for (const std::vector<int64_t>& rows :
       {std::vector<int64_t>{2048, 128, 128}, std::vector<int64_t>{6656, 6656}}) {
    std::vector<HostMatrix> parts;
    std::vector<const WeightMatrix*> ptrs;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<float> w = Normal(rows[i] * k, 20 + i);
      parts.push_back(QuantizeWeights(TensorFormat::Of(FormatKind::kBF16), w.data(), rows[i], k));
    }
    for (const HostMatrix& p : parts) ptrs.push_back(&p.matrix);
    const HostMatrix stack = StackRows(ptrs);
    const std::vector<float> x = Normal(m * k, 7);
    std::vector<float> product(m * stack.matrix.rows);
    be.MatMul(x.data(), m, stack.matrix, product.data(), DType::kF32);
    std::vector<std::vector<float>> outs;
    std::vector<void*> dst;
    for (int64_t n : rows) outs.emplace_back(m * n, -1.0f);
    for (std::vector<float>& o : outs) dst.push_back(o.data());
    const ColumnSplit s = PlanColumnSplit(product.data(), dst, rows, sizeof(float));
    SplitColumnsOnHost(s, product.data(), m);
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<float> alone(m * rows[i]);
      be.MatMul(x.data(), m, parts[i].matrix, alone.data(), DType::kF32);
      EXPECT_EQ(outs[i], alone) << "output " << i << " of " << rows.size();
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda
