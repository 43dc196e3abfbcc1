// The CUDA backend's weight placement, run on the host with the CPU backend as the memory it
// allocates and copies into: which weights get the mixed GEMM's form, the bytes the memory plan
// counts for them (CudaWeightExtraBytes) against what the placement really allocates, the
// prepared bytes read back to the checkpoint's values, and that nothing of an int4 weight's
// stored form is left to read.
#include "kernels/cuda/weight_placement.h"

#include <cstring>
#include <numeric>
#include <random>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/mixed_gemm/prepare.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"
#include "kernels/quantize_weights.h"
#include "kernels/stacked_matrix.h"

namespace tpserve::cuda {
namespace {

constexpr int kHopper = 90;
const TensorFormat kInt4G128 = TensorFormat::Int4(128);
const TensorFormat kFp8Channel = TensorFormat::Of(FormatKind::kFp8PerChannel);

HostMatrix Weight(const TensorFormat& format, int64_t n, int64_t k, bool act_order = false) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  std::vector<float> w(n * k);
  for (float& v : w) v = normal(rng);
  HostMatrix host = QuantizeWeights(format, w.data(), n, k);
  if (act_order) {
    host.perm.resize(k);
    std::iota(host.perm.begin(), host.perm.end(), 0);
    std::shuffle(host.perm.begin(), host.perm.end(), rng);
    host.matrix.input_perm = host.perm.data();
  }
  return host;
}

int64_t BufferBytes(const PlacedWeight& p) {
  int64_t sum = 0;
  for (const DeviceBuffer& b : p.buffers) sum += b.bytes();
  return sum;
}

float F16At(const void* base, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(base) + 2 * i, 2);
  return F16ToF32(h);
}

TEST(CudaWeightFormFor, MixedGemmFormOnlyForMultipliedWeightsItTakesOnHopper) {
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 4096, 4096, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kInt4Mixed);
  EXPECT_EQ(CudaWeightFormFor(kFp8Channel, 4096, 4096, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kFp8Mixed);
  EXPECT_EQ(CudaWeightFormFor(TensorFormat::Of(FormatKind::kFp8Block128), 4096, 4096,
                              WeightUse::kMatMul, kHopper),
            CudaWeightForm::kFp8Mixed);
  // An embedding table: EmbeddingRows reads the stored form.
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 4096, 4096, WeightUse::kTable, kHopper),
            CudaWeightForm::kStored);
  // A B200 (10.0): the kernels are sm_90a SASS.
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 4096, 4096, WeightUse::kMatMul, 100),
            CudaWeightForm::kStored);
  // Library gaps: group 32, rows not whole 16-row atoms, fp8 with a partial 128-column tile.
  EXPECT_EQ(CudaWeightFormFor(TensorFormat::Int4(32), 4096, 4096, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kStored);
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 33, 512, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kStored);
  EXPECT_EQ(CudaWeightFormFor(kFp8Channel, 4096, 4032, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kStored);
  EXPECT_EQ(CudaWeightFormFor(TensorFormat::Of(FormatKind::kBF16), 4096, 4096,
                              WeightUse::kMatMul, kHopper),
            CudaWeightForm::kStored);
}

TEST(CudaWeightExtraBytes, StatesWhatThePreparedFormAddsToTheStoredOne) {
  // int4 g128: 8 bytes of f32 scale + offset per (group, row) for 4 of f16 scale + zero.
  EXPECT_EQ(CudaWeightExtraBytes(kInt4G128, 4096, 4096, WeightUse::kMatMul, kHopper),
            4 * 4096 * 4096 / 128);
  EXPECT_EQ(CudaWeightExtraBytes(TensorFormat::Int4(64), 1024, 4096, WeightUse::kMatMul, kHopper),
            4 * 1024 * 4096 / 64);
  // Act-order keeps its permutation: the same extra.
  EXPECT_EQ(CudaWeightExtraBytes(TensorFormat::Int4(128, true), 4096, 4096, WeightUse::kMatMul,
                                 kHopper),
            4 * 4096 * 4096 / 128);
  // fp8: an f32 scale per (128 columns, row) beside the stored codes and scales.
  EXPECT_EQ(CudaWeightExtraBytes(kFp8Channel, 4096, 14336, WeightUse::kMatMul, kHopper),
            4096 * 14336 / 32);
  EXPECT_EQ(CudaWeightExtraBytes(kInt4G128, 4096, 4096, WeightUse::kTable, kHopper), 0);
  EXPECT_EQ(CudaWeightExtraBytes(TensorFormat::Int4(32), 4096, 4096, WeightUse::kMatMul, kHopper),
            0);
}

class PlaceCudaWeightTest : public ::testing::Test {
 protected:
  CpuBackend host_memory_{CpuBackendOptions{.num_threads = 1}};
};

// int4: the placement allocates exactly the stored bytes plus CudaWeightExtraBytes (the memory
// plan's count), leaves no stored form behind, and its bytes read back to the checkpoint's.
TEST_F(PlaceCudaWeightTest, Int4IsReplacedByThePreparedForm) {
  const int64_t n = 48, k = 512;
  for (bool act_order : {false, true}) {
    SCOPED_TRACE(act_order ? "act-order" : "in order");
    const TensorFormat format = TensorFormat::Int4(128, act_order);
    const HostMatrix host = Weight(format, n, k, act_order);
    absl::StatusOr<PlacedWeight> placed =
        PlaceCudaWeight(host_memory_, host, WeightUse::kMatMul, kHopper, "blk.0.attn_q");
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->bytes_copied, WeightMatrixBytes(host.matrix) +
                                        CudaWeightExtraBytes(format, n, k, WeightUse::kMatMul,
                                                             kHopper));
    EXPECT_EQ(placed->bytes_copied, BufferBytes(*placed));
    EXPECT_EQ(placed->bytes_viewed, 0);
    EXPECT_EQ(placed->matrix.data, nullptr);
    EXPECT_EQ(placed->matrix.scales, nullptr);
    EXPECT_EQ(placed->matrix.zeros, nullptr);
    EXPECT_EQ(placed->matrix.rows, n);
    EXPECT_EQ(placed->matrix.cols, k);
    const MixedGemmWeight* form = MixedGemmForm(placed->matrix);
    ASSERT_NE(form, nullptr);
    EXPECT_EQ(form, placed->prepared.get());
    EXPECT_EQ(form->kind, MixedGemmKind::kInt4);
    EXPECT_EQ(form->n, n);
    EXPECT_EQ(form->k, k);
    EXPECT_EQ(form->group_size, 128);
    const WeightMatrix& w = host.matrix;
    for (int64_t r = 0; r < n; ++r) {
      const auto* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
      for (int64_t c = 0; c < k; ++c) {
        ASSERT_EQ(PreparedInt4Code(*form, r, c), mixed_gemm::EngineInt4Code(row, c))
            << "row " << r << " col " << c;
      }
      for (int64_t g = 0; g < k / 128; ++g) {
        const float scale = F16At(w.scales, r * w.scale_stride + g);
        EXPECT_EQ(form->scales[g * n + r], scale);
        const float zero = F16At(w.zeros, r * w.scale_stride + g);
        EXPECT_EQ(form->offsets[g * n + r], (8.0f - zero) * scale);
      }
    }
    if (act_order) {
      ASSERT_NE(placed->matrix.input_perm, nullptr);
      EXPECT_NE(placed->matrix.input_perm, host.perm.data());  // a copy the placement owns
      EXPECT_EQ(std::memcmp(placed->matrix.input_perm, host.perm.data(), k * 4), 0);
    } else {
      EXPECT_EQ(placed->matrix.input_perm, nullptr);
    }
  }
}

// fp8: the stored form stays (the larger-batch cuBLASLt GEMM and the GEMV read it) and the
// mixed GEMM's scales come beside it.
TEST_F(PlaceCudaWeightTest, Fp8KeepsItsCodesAndGainsTheExpandedScales) {
  const int64_t n = 256, k = 384;
  for (FormatKind kind :
       {FormatKind::kF8E4M3, FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    const TensorFormat format = TensorFormat::Of(kind);
    SCOPED_TRACE(TensorFormatName(format));
    const HostMatrix host = Weight(format, n, k);
    absl::StatusOr<PlacedWeight> placed =
        PlaceCudaWeight(host_memory_, host, WeightUse::kMatMul, kHopper, "blk.0.ffn_up");
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->bytes_copied,
              WeightMatrixBytes(host.matrix) +
                  CudaWeightExtraBytes(format, n, k, WeightUse::kMatMul, kHopper));
    EXPECT_EQ(placed->bytes_copied, BufferBytes(*placed));
    ASSERT_NE(placed->matrix.data, nullptr);
    EXPECT_EQ(std::memcmp(placed->matrix.data, host.values.data(), host.values.size()), 0);
    const MixedGemmWeight* form = MixedGemmForm(placed->matrix);
    ASSERT_NE(form, nullptr);
    EXPECT_EQ(form->kind, MixedGemmKind::kFp8);
    EXPECT_EQ(form->codes, placed->matrix.data);
    EXPECT_EQ(form->row_bytes, placed->matrix.row_bytes);
    const std::vector<float> want = PrepareFp8Scales(host.matrix);
    EXPECT_EQ(std::vector<float>(form->scales, form->scales + want.size()), want);
  }
}

TEST_F(PlaceCudaWeightTest, TablesAndLibraryGapsStayAsStored) {
  struct Case {
    TensorFormat format;
    int64_t n, k;
    WeightUse use;
  };
  for (const Case& c : {Case{kInt4G128, 48, 256, WeightUse::kTable},
                        Case{TensorFormat::Int4(32), 48, 256, WeightUse::kMatMul},
                        Case{kInt4G128, 40, 256, WeightUse::kMatMul},
                        Case{kFp8Channel, 48, 72, WeightUse::kMatMul},
                        Case{TensorFormat::Of(FormatKind::kBF16), 48, 256, WeightUse::kMatMul}}) {
    SCOPED_TRACE(TensorFormatName(c.format) + " n=" + std::to_string(c.n));
    const HostMatrix host = Weight(c.format, c.n, c.k);
    absl::StatusOr<PlacedWeight> placed =
        PlaceCudaWeight(host_memory_, host, c.use, kHopper, "token_embd");
    ASSERT_TRUE(placed.ok()) << placed.status();
    EXPECT_EQ(placed->matrix.prepared, nullptr);
    EXPECT_EQ(placed->bytes_copied, WeightMatrixBytes(host.matrix));
    EXPECT_NE(placed->matrix.data, nullptr);
  }
}

// A matrix in a backend's own form cannot be cut by the stored form's rules.
TEST_F(PlaceCudaWeightTest, ColumnChunkRefusesAPreparedMatrix) {
  const HostMatrix host = Weight(kInt4G128, 48, 512);
  absl::StatusOr<PlacedWeight> placed =
      PlaceCudaWeight(host_memory_, host, WeightUse::kMatMul, kHopper, "blk.0.attn_output");
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_DEATH(ColumnChunk(placed->matrix, 1, 256), "own form");
}

// A fused q/k/v or gate/up (kernels/stacked_matrix.h, WeightUse::kFused) holds exactly the
// bytes its parts would have held apart, which is what the memory plan counts role by role
// (CudaWeightExtraBytes per part): fusing adds no weight memory. The parts are 405B's q/k/v
// boundaries at TP 8 with k cut to 1024 (placing 36 MiB of fp8 here would only slow the test),
// and 405B's own shapes by the byte functions. Parts off the 16-row tile would break it (the
// stack could take the mixed form its parts do not), which is why CudaProjectionFusion asks
// for whole tiles. (Before this change there was no kFused use: CudaWeightFormFor held every
// use but kMatMul as stored, so a stack of int4 parts would have kept 2-byte scales and zeros
// while its parts were prepared, and EXPECT_EQ(fused->bytes_held(), apart) fails.)
TEST(PlaceCudaWeight, AStackHoldsExactlyItsPartsBytes) {
  CpuBackend host_memory(CpuBackendOptions{.num_threads = 1});
  for (const TensorFormat& f : {kInt4G128, kFp8Channel,
                                TensorFormat::Of(FormatKind::kFp8Block128),
                                TensorFormat::Of(FormatKind::kBF16)}) {
    SCOPED_TRACE(TensorFormatName(f));
    const std::vector<int64_t> rows = {2048, 128, 128};
    const int64_t k = 1024;
    std::vector<HostMatrix> parts;
    std::vector<const WeightMatrix*> ptrs;
    int64_t apart = 0, planned = 0;
    for (int64_t n : rows) {
      parts.push_back(Weight(f, n, k));
      absl::StatusOr<PlacedWeight> p =
          PlaceCudaWeight(host_memory, parts.back(), WeightUse::kMatMul, kHopper, "part");
      ASSERT_TRUE(p.ok()) << p.status();
      apart += p->bytes_held();
      planned += *MatrixBytes(f, n, k, "part") +
                 CudaWeightExtraBytes(f, n, k, WeightUse::kMatMul, kHopper);
    }
    for (const HostMatrix& p : parts) ptrs.push_back(&p.matrix);
    const HostMatrix stack = StackRows(ptrs);
    absl::StatusOr<PlacedWeight> fused =
        PlaceCudaWeight(host_memory, stack, WeightUse::kFused, kHopper, "qkv");
    ASSERT_TRUE(fused.ok()) << fused.status();
    EXPECT_EQ(fused->bytes_held(), apart);
    EXPECT_EQ(fused->bytes_held(), planned);
    EXPECT_EQ(fused->bytes_held(), BufferBytes(*fused));
  }
  // 405B at TP 8, fp8 tiles: q [2048, 16384], k and v [128, 16384]; gate and up [6656, 16384].
  const TensorFormat tiles = TensorFormat::Of(FormatKind::kFp8Block128);
  auto held = [&](int64_t n) {
    return *MatrixBytes(tiles, n, 16384, "w") +
           CudaWeightExtraBytes(tiles, n, 16384, WeightUse::kFused, kHopper);
  };
  EXPECT_EQ(held(2304), held(2048) + 2 * held(128));
  EXPECT_EQ(held(13312), 2 * held(6656));
  // Off the tile: 8 + 24 int4 rows are stored apart but would be prepared as a 32-row stack.
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 8, 1024, WeightUse::kMatMul, kHopper),
            CudaWeightForm::kStored);
  EXPECT_EQ(CudaWeightFormFor(kInt4G128, 32, 1024, WeightUse::kFused, kHopper),
            CudaWeightForm::kInt4Mixed);
}

}  // namespace
}  // namespace tpserve::cuda
