// A fused MatMulMany on a GPU (skips without one): q/k/v-like parts (256 + 128 + 128 rows) and
// gate/up-like parts (256 + 256), each quantized on its own as the loader does, stacked
// (kernels/stacked_matrix.h) and placed as one matrix (WeightUse::kFused), multiplied by one
// GEMM and split into the outputs (column_split.h) must give each output what MatMul of its own
// part gives: bit for bit in deterministic mode (its GEMMs' floats do not depend on n), within
// the GEMM's rounding otherwise; the bias rides with the stack. bf16, fp8 per channel, fp8
// 128x128 tiles, int4 g128; decode-sized and larger batches (m = 1 .. 64).
#include <cmath>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/quantize.h"
#include "kernels/quantize_weights.h"
#include "kernels/stacked_matrix.h"
#include "kernels/testing/parity_util.h"

namespace tpserve {
namespace {

constexpr int64_t kK = 512, kMaxRows = 64;

std::vector<float> Normal(int64_t count, uint32_t seed) {
  return parity::RandomF32(count, seed, 0.3f);
}

std::vector<float> ToHostF32(Backend& be, const void* y, int64_t count) {
  std::vector<uint16_t> bits(count);
  const absl::Status s = be.CopyToHost(bits.data(), y, count * 2);
  EXPECT_TRUE(s.ok()) << s;
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) out[i] = BF16ToF32(bits[i]);
  return out;
}

struct Case {
  TensorFormat format;
  bool deterministic;
};

class FusedMatMulTest : public ::testing::TestWithParam<Case> {};

TEST_P(FusedMatMulTest, EachOutputIsItsOwnPartsProduct) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok() || *devices == 0) GTEST_SKIP() << "no CUDA device";
  const Case c = GetParam();
  absl::StatusOr<std::unique_ptr<Backend>> be =
      CreateCudaBackend(0, {.deterministic = c.deterministic, .max_tokens_per_step = kMaxRows});
  ASSERT_TRUE(be.ok()) << be.status();
  ASSERT_TRUE((*be)->projection_fusion().fuses);
  const std::vector<float> x = Normal(kMaxRows * kK, 5);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = F32ToBF16(x[i]);
  absl::StatusOr<DeviceBuffer> xd = Upload(**be, xb.data(), xb.size() * 2, "x");
  ASSERT_TRUE(xd.ok()) << xd.status();
  for (const std::vector<int64_t>& rows :
       {std::vector<int64_t>{256, 128, 128}, std::vector<int64_t>{256, 256}}) {
    std::vector<HostMatrix> parts;
    std::vector<const WeightMatrix*> ptrs;
    std::vector<PlacedWeight> apart;
    int64_t n = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<float> w = Normal(rows[i] * kK, 30 + i);
      parts.push_back(QuantizeWeights(c.format, w.data(), rows[i], kK));
      n += rows[i];
    }
    for (const HostMatrix& p : parts) {
      ptrs.push_back(&p.matrix);
      absl::StatusOr<PlacedWeight> placed = (*be)->PlaceWeight(p, WeightUse::kMatMul, "part");
      ASSERT_TRUE(placed.ok()) << placed.status();
      apart.push_back(*std::move(placed));
    }
    absl::StatusOr<PlacedWeight> stack =
        (*be)->PlaceWeight(StackRows(ptrs), WeightUse::kFused, "stack");
    ASSERT_TRUE(stack.ok()) << stack.status();
    const std::vector<float> bias = Normal(n, 9);
    absl::StatusOr<DeviceBuffer> bias_d = Upload(**be, bias.data(), n * 4, "bias");
    ASSERT_TRUE(bias_d.ok());
    stack->matrix.bias = bias_d->as<float>();
    std::vector<WeightMatrix> views;
    for (size_t i = 0, first = 0; i < rows.size(); first += rows[i], ++i) {
      views.push_back(RowRange(stack->matrix, first, rows[i]));
      apart[i].matrix.bias = bias_d->as<float>() + first;
    }
    for (int64_t m : {1, 8, 16, 17, 64}) {
      SCOPED_TRACE(testing::Message() << TensorFormatName(c.format) << " parts "
                                      << rows.size() << " m " << m);
      std::vector<DeviceBuffer> fused_y, alone_y;
      std::vector<Backend::MatMulOut> outs;
      for (size_t i = 0; i < rows.size(); ++i) {
        fused_y.push_back(*(*be)->Allocate(m * rows[i] * 2, "y"));
        alone_y.push_back(*(*be)->Allocate(m * rows[i] * 2, "y"));
        outs.push_back({&views[i], fused_y.back().data()});
        (*be)->MatMul(xd->data(), m, apart[i].matrix, alone_y.back().data(), DType::kBF16);
      }
      (*be)->MatMulMany(xd->data(), m, outs, DType::kBF16, &stack->matrix);
      for (size_t i = 0; i < rows.size(); ++i) {
        const std::vector<float> got = ToHostF32(**be, fused_y[i].data(), m * rows[i]);
        const std::vector<float> want = ToHostF32(**be, alone_y[i].data(), m * rows[i]);
        float max_abs = 0, max_diff = 0;
        for (size_t j = 0; j < want.size(); ++j) {
          max_abs = std::max(max_abs, std::fabs(want[j]));
          max_diff = std::max(max_diff, std::fabs(got[j] - want[j]));
        }
        ASSERT_GT(max_abs, 0.1f) << "output " << i;
        if (c.deterministic) {
          EXPECT_EQ(got, want) << "output " << i;
        } else {
          EXPECT_LE(max_diff, 0.02f * max_abs) << "output " << i;
        }
      }
    }
    ASSERT_TRUE((*be)->Synchronize().ok());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, FusedMatMulTest,
    ::testing::Values(Case{TensorFormat::Of(FormatKind::kBF16), false},
                      Case{TensorFormat::Of(FormatKind::kFp8PerChannel), false},
                      Case{TensorFormat::Of(FormatKind::kFp8Block128), false},
                      Case{TensorFormat::Int4(128), false},
                      Case{TensorFormat::Of(FormatKind::kBF16), true},
                      Case{TensorFormat::Of(FormatKind::kFp8Block128), true},
                      Case{TensorFormat::Int4(128), true}));

}  // namespace
}  // namespace tpserve
