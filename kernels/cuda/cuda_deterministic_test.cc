// The deterministic CUDA backend on a GPU (skips without one): for bf16, fp8 (per channel and
// 128x128 tiles) and int4 weights, a row's output is bit for bit the same whatever the batch
// it runs in (m = 1..64), whatever slice of the output rows a tensor-parallel rank holds, and
// a row-parallel rank's chunk sums are those of the whole matrix's chunks. Weights are placed
// as the model's loader places them (int4 and fp8 in the mixed-input GEMM's form). This is what
// tests/kernels/deterministic_plan_test.cc promises on the host (same path, same pinned
// algorithm without split-K, same mixed-GEMM plan); here the kernels, CUTLASS and cuBLASLt have
// to keep it.
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/quantize.h"
#include "kernels/quantize_weights.h"
#include "kernels/weight_matrix.h"

namespace tpserve {
namespace {

constexpr int64_t kN = 256, kK = 512, kMaxRows = 64;

// The weight as the model's loader places it (Backend::PlaceWeight): int4 and fp8 in the
// mixed-input GEMM's form on a Hopper GPU, so its batch-invariant plan is what is checked.
PlacedWeight UploadMatrix(Backend& be, const HostMatrix& host) {
  absl::StatusOr<PlacedWeight> placed = be.PlaceWeight(host, WeightUse::kMatMul, "weights");
  EXPECT_TRUE(placed.ok()) << placed.status();
  return placed.ok() ? *std::move(placed) : PlacedWeight{};
}

// y (as raw bytes) of MatMul(x[0:m]) with y_dtype.
std::vector<uint8_t> MatMulBytes(Backend& be, const DeviceBuffer& x, int64_t m,
                                 const WeightMatrix& w, DType y_dtype) {
  const int64_t bytes = m * w.rows * BlockBytes(y_dtype);
  absl::StatusOr<DeviceBuffer> y = be.Allocate(bytes, "y");
  EXPECT_TRUE(y.ok()) << y.status();
  if (!y.ok()) return {};
  be.MatMul(x.data(), m, w, y->data(), y_dtype);
  std::vector<uint8_t> out(bytes);
  const absl::Status st = be.CopyToHost(out.data(), y->data(), bytes);
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

class CudaDeterministicTest : public ::testing::TestWithParam<TensorFormat> {};

TEST_P(CudaDeterministicTest, RowsDoNotDependOnBatchOrSlice) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok() || *devices == 0) GTEST_SKIP() << "no CUDA device";
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(0, {.deterministic = true});
  ASSERT_TRUE(be.ok()) << be.status();
  const TensorFormat format = GetParam();

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> w(kN * kK), x(kMaxRows * kK);
  for (float& v : w) v = normal(rng);
  for (float& v : x) v = normal(rng);
  std::vector<uint16_t> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = F32ToBF16(x[i]);
  absl::StatusOr<DeviceBuffer> xd = Upload(**be, xb.data(), xb.size() * 2, "x");
  ASSERT_TRUE(xd.ok()) << xd.status();
  const HostMatrix host = QuantizeWeights(format, w.data(), kN, kK);
  const PlacedWeight full = UploadMatrix(**be, host);
  // The two halves of the output rows, quantized on their own (per-row and 128-row-tile
  // scales make them the same values as the full matrix's rows).
  const HostMatrix top = QuantizeWeights(format, w.data(), kN / 2, kK);
  const HostMatrix bottom = QuantizeWeights(format, w.data() + kN / 2 * kK, kN / 2, kK);
  const PlacedWeight halves[2] = {UploadMatrix(**be, top), UploadMatrix(**be, bottom)};

  for (DType y : {DType::kBF16, DType::kF32}) {
    const int64_t row_bytes = kN * BlockBytes(y), half_bytes = row_bytes / 2;
    const std::vector<uint8_t> all = MatMulBytes(**be, *xd, kMaxRows, full.matrix, y);
    ASSERT_EQ(static_cast<int64_t>(all.size()), kMaxRows * row_bytes);
    for (int64_t m : {1, 2, 5, 16, 17, 31, 33, 64}) {
      const std::vector<uint8_t> some = MatMulBytes(**be, *xd, m, full.matrix, y);
      ASSERT_EQ(static_cast<int64_t>(some.size()), m * row_bytes);
      EXPECT_EQ(std::memcmp(some.data(), all.data(), some.size()), 0)
          << TensorFormatName(format) << " -> " << DTypeName(y) << ": rows of a batch of " << m
          << " differ from the same rows in a batch of " << kMaxRows;
      for (int h = 0; h < 2; ++h) {
        const std::vector<uint8_t> part = MatMulBytes(**be, *xd, m, halves[h].matrix, y);
        for (int64_t t = 0; t < m; ++t) {
          EXPECT_EQ(std::memcmp(part.data() + t * half_bytes,
                                all.data() + t * row_bytes + h * half_bytes, half_bytes),
                    0)
              << TensorFormatName(format) << " -> " << DTypeName(y) << ": half " << h
              << " of the output rows, batch " << m << ", row " << t;
        }
      }
    }
  }
  // Row-parallel: 4 chunks of the whole width against 2 ranks of 2 chunks (each rank's columns
  // placed as its own weight, as a rank's loader places its slice, and its copy of x's
  // columns).
  const int64_t chunks = 4, m = 33;
  absl::StatusOr<DeviceBuffer> whole = (*be)->Allocate(chunks * m * kN * 4, "chunks");
  ASSERT_TRUE(whole.ok()) << whole.status();
  (*be)->MatMulChunked(xd->data(), m, full.matrix, chunks, whole->as<float>());
  std::vector<uint8_t> want(chunks * m * kN * 4);
  ASSERT_TRUE((*be)->CopyToHost(want.data(), whole->data(), want.size()).ok());
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<uint16_t> xr(m * kK / 2);
    for (int64_t t = 0; t < m; ++t) {
      std::memcpy(&xr[t * kK / 2], &xb[t * kK + rank * kK / 2], kK);  // kK/2 bf16 values
    }
    absl::StatusOr<DeviceBuffer> xrd = Upload(**be, xr.data(), xr.size() * 2, "rank x");
    absl::StatusOr<DeviceBuffer> yr = (*be)->Allocate(chunks / 2 * m * kN * 4, "rank chunks");
    ASSERT_TRUE(xrd.ok() && yr.ok());
    const PlacedWeight slice = UploadMatrix(**be, CopyColumnChunk(host.matrix, rank, kK / 2));
    (*be)->MatMulChunked(xrd->data(), m, slice.matrix, chunks / 2, yr->as<float>());
    std::vector<uint8_t> got(chunks / 2 * m * kN * 4);
    ASSERT_TRUE((*be)->CopyToHost(got.data(), yr->data(), got.size()).ok());
    EXPECT_EQ(std::memcmp(got.data(), want.data() + rank * got.size(), got.size()), 0)
        << TensorFormatName(format) << ": rank " << rank << " of 2, chunk sums";
  }
  EXPECT_TRUE((*be)->Synchronize().ok());
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaDeterministicTest,
                         ::testing::Values(TensorFormat::Of(FormatKind::kBF16),
                                           TensorFormat::Of(FormatKind::kFp8PerChannel),
                                           TensorFormat::Of(FormatKind::kFp8Block128),
                                           TensorFormat::Int4(128)),
                         [](const auto& info) {
                           std::string name = TensorFormatName(info.param);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tpserve
