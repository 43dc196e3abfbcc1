// CpuBackend with bf16 weights through oneDNN (CpuBackendOptions::onednn_bf16): which matrices
// PlaceWeight packs, and that every multiply of a packed matrix is the packed product
// (kernels/cpu/onednn_bf16_matmul.h, whose own test checks its arithmetic) and every other
// one, views included, the backend's own kernels.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/onednn_bf16_matmul.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize_weights.h"

namespace tpserve {
namespace {

using parity_test::Random;

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CpuBackendOneDnnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnBf16MatMul::Supported()) {
      GTEST_SKIP() << "oneDNN finds no AVX-512 BF16 on this CPU: the option does nothing";
    }
    ASSERT_TRUE(onednn_.onednn_bf16());
  }
  HostMatrix Bf16(int64_t rows, int64_t cols, uint32_t seed) {
    const std::vector<float> w = Random(rows * cols, seed, 0.05f);
    return QuantizeWeights(TensorFormat::Of(FormatKind::kBF16), w.data(), rows, cols);
  }
  std::vector<float> MatMul(CpuBackend& backend, const WeightMatrix& w, const std::vector<float>& x,
                            int64_t m) {
    std::vector<float> y(m * w.rows);
    backend.MatMul(x.data(), m, w, y.data(), DType::kF32);
    return y;
  }

  CpuBackend onednn_{CpuBackendOptions{.num_threads = 2, .onednn_bf16 = true}};
  CpuBackend own_{CpuBackendOptions{.num_threads = 2, .onednn_bf16 = false}};
  ThreadPool pool_{2};
};

TEST_F(CpuBackendOneDnnTest, PacksBf16MatricesAndMultipliesThroughThePacking) {
  EXPECT_NE(onednn_.name().find("+onednn-bf16"), std::string_view::npos) << onednn_.name();
  EXPECT_EQ(own_.name().find("onednn"), std::string_view::npos) << own_.name();
  const HostMatrix host = Bf16(96, 160, 1);
  for (WeightUse use : {WeightUse::kMatMul, WeightUse::kTable, WeightUse::kFused}) {
    absl::StatusOr<PlacedWeight> placed = onednn_.PlaceWeight(host, use, "w");
    ASSERT_TRUE(placed.ok()) << placed.status();
    ASSERT_NE(placed->matrix.prepared, nullptr);
    // The stored form stays (an embedding's rows are read from it), copied as the host owned
    // it, and the packing beside it is counted too.
    ASSERT_NE(placed->matrix.data, nullptr);
    EXPECT_EQ(std::memcmp(placed->matrix.data, host.matrix.data, 96 * 160 * 2), 0);
    EXPECT_GE(placed->bytes_copied, 2 * 96 * 160 * 2);
    const int64_t m = 5;
    const std::vector<float> x = Random(m * 160, 2, 1.0f);
    absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> alone =
        OneDnnBf16MatMul::Pack(host.matrix, 2);
    ASSERT_TRUE(alone.ok());
    std::vector<float> expected(m * 96);
    ASSERT_TRUE((*alone)->Run(x.data(), m, expected.data(), &pool_).ok());
    EXPECT_TRUE(SameBits(MatMul(onednn_, placed->matrix, x, m), expected));
    // The backend's own kernels, with f32 activations, give other floats: the path is real.
    absl::StatusOr<PlacedWeight> stored = own_.PlaceWeight(host, use, "w");
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->matrix.prepared, nullptr);
    EXPECT_FALSE(SameBits(MatMul(own_, stored->matrix, x, m), expected));
  }
}

TEST_F(CpuBackendOneDnnTest, OtherFormatsAndViewsKeepTheBackendsKernels) {
  const std::vector<float> values = Random(64 * 128, 3, 0.05f);
  const HostMatrix f16 =
      QuantizeWeights(TensorFormat::Of(FormatKind::kF16), values.data(), 64, 128);
  absl::StatusOr<PlacedWeight> placed = onednn_.PlaceWeight(f16, WeightUse::kMatMul, "f16");
  ASSERT_TRUE(placed.ok());
  EXPECT_EQ(placed->matrix.prepared, nullptr);

  // A view of rows 16..47 of a packed matrix carries its `prepared` but is another matrix.
  const HostMatrix host = Bf16(64, 128, 4);
  absl::StatusOr<PlacedWeight> whole = onednn_.PlaceWeight(host, WeightUse::kMatMul, "w");
  ASSERT_TRUE(whole.ok());
  WeightMatrix view = whole->matrix;
  view.data = static_cast<const uint8_t*>(view.data) + 16 * view.row_bytes;
  view.rows = 32;
  WeightMatrix plain_view = view;
  plain_view.prepared = nullptr;
  const std::vector<float> x = Random(3 * 128, 5, 1.0f);
  EXPECT_TRUE(SameBits(MatMul(onednn_, view, x, 3), MatMul(own_, plain_view, x, 3)));
}

TEST_F(CpuBackendOneDnnTest, BiasAndManyAgreeWithMatMulChunksKeepOurKernels) {
  const HostMatrix a = Bf16(48, 64, 6), b = Bf16(80, 64, 7);
  absl::StatusOr<PlacedWeight> pa = onednn_.PlaceWeight(a, WeightUse::kMatMul, "a");
  absl::StatusOr<PlacedWeight> pb = onednn_.PlaceWeight(b, WeightUse::kMatMul, "b");
  ASSERT_TRUE(pa.ok() && pb.ok());
  const int64_t m = 4;
  const std::vector<float> x = Random(m * 64, 8, 1.0f);
  const std::vector<float> ya = MatMul(onednn_, pa->matrix, x, m);
  const std::vector<float> yb = MatMul(onednn_, pb->matrix, x, m);

  // MatMulMany: each output as MatMul gives it, beside a matrix on the backend's kernels.
  const std::vector<float> fvalues = Random(32 * 64, 9, 0.05f);
  const HostMatrix f32 =
      QuantizeWeights(TensorFormat::Of(FormatKind::kF32), fvalues.data(), 32, 64);
  absl::StatusOr<PlacedWeight> pf = onednn_.PlaceWeight(f32, WeightUse::kMatMul, "f32");
  ASSERT_TRUE(pf.ok());
  std::vector<float> ma(m * 48), mb(m * 80), mf(m * 32);
  const Backend::MatMulOut outs[] = {
      {&pa->matrix, ma.data()}, {&pf->matrix, mf.data()}, {&pb->matrix, mb.data()}};
  onednn_.MatMulMany(x.data(), m, outs, DType::kF32, nullptr);
  EXPECT_TRUE(SameBits(ma, ya));
  EXPECT_TRUE(SameBits(mb, yb));
  EXPECT_TRUE(SameBits(mf, MatMul(own_, pf->matrix, x, m)));

  // Chunked products (--deterministic_tp) keep our kernels, whatever the chunk count, so that
  // every tensor-parallel degree gives the same floats.
  std::vector<float> chunked(m * 48), own(m * 48);
  onednn_.MatMulChunked(x.data(), m, pa->matrix, 1, chunked.data());
  absl::StatusOr<PlacedWeight> stored = own_.PlaceWeight(a, WeightUse::kMatMul, "a");
  ASSERT_TRUE(stored.ok());
  own_.MatMulChunked(x.data(), m, stored->matrix, 1, own.data());
  EXPECT_TRUE(SameBits(chunked, own));
  EXPECT_FALSE(SameBits(chunked, ya));

  // The bias is added to each row.
  const std::vector<float> bias = Random(48, 10, 1.0f);
  WeightMatrix with_bias = pa->matrix;
  with_bias.bias = bias.data();
  const std::vector<float> yb2 = MatMul(onednn_, with_bias, x, m);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t r = 0; r < 48; ++r) EXPECT_EQ(yb2[t * 48 + r], ya[t * 48 + r] + bias[r]);
  }
}

}  // namespace
}  // namespace tpserve
