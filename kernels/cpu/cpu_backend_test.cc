// Backend-parity suite in the spirit of llama.cpp's test-backend-ops: every op in aligned and
// odd shapes and every weight type, the optimized backend (AVX2, 2 threads) against the scalar
// reference backend (1 thread) by normalized error with a per-op threshold, and both against
// plain f64 math. Outputs sit between guard words that must survive; results must be finite.
#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize.h"
#include "kernels/rope_table.h"

namespace tpserve {
namespace {

using parity_test::AllFinite;
using parity_test::ErrorVsProducts;
using parity_test::Guarded;
using parity_test::MatMulF64;
using parity_test::Nmse;
using parity_test::ProductF64;
using parity_test::Random;

WeightMatrix Wm(DType t, const void* data, int64_t rows, int64_t cols, int64_t row_bytes) {
  WeightMatrix w;
  w.format = FormatOfDType(t);
  w.data = data;
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = row_bytes;
  return w;
}

class CpuBackendParityTest : public ::testing::Test {
 protected:
  CpuBackendParityTest()
      : ref_(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar}),
        opt_(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()}) {}
  CpuBackend ref_;
  CpuBackend opt_;
};

constexpr DType kAllTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kF8E4M3,
                               DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                               DType::kQ5_1};

// Optimized vs reference: same arithmetic up to summation order. Against f64 on the
// dequantized weights, relative to the squared products: float types only see summation
// error; quantized types also carry the 8-bit activation rounding, whose relative variance is
// about (max|x| / 127)^2 / 12 / E[x^2] ~ 3e-5 for Gaussian blocks of 32.
double MatMulThresholdVsF64(DType t) { return BlockElems(t) > 1 ? 2e-4 : 1e-9; }

TEST_F(CpuBackendParityTest, MatMulEveryTypeAndShape) {
  for (DType t : kAllTypes) {
    ASSERT_TRUE(opt_.SupportsWeight(FormatOfDType(t))) << DTypeName(t);
    for (int64_t k : {32, 64, 96, 576, 1536}) {
      for (int64_t n : {1, 5, 31, 192}) {
        const std::vector<float> w = Random(n * k, 1000 + k + n, 0.2f);
        const std::vector<uint8_t> wq = QuantizeMatrix(t, w.data(), n, k);
        const WeightMatrix wm = Wm(t, wq.data(), n, k, RowBytes(t, k).value());
        std::vector<float> wd(n * k);  // what the kernels should see: dequantized weights
        for (int64_t r = 0; r < n; ++r) {
          DequantizeRow(t, wq.data() + r * wm.row_bytes, wd.data() + r * k, k);
        }
        for (int64_t m : {1, 3, 7, 64, 129}) {
          const std::vector<float> x = Random(m * k, 7 * m + k);
          Guarded y_ref(m * n), y_opt(m * n);
          ref_.MatMul(x.data(), m, wm, y_ref.data(), DType::kF32);
          opt_.MatMul(x.data(), m, wm, y_opt.data(), DType::kF32);
          const ProductF64 exact = MatMulF64(x, wd, m, n, k);
          const std::string where = std::string(DTypeName(t)) + " m=" + std::to_string(m) +
                                    " k=" + std::to_string(k) + " n=" + std::to_string(n);
          ASSERT_TRUE(y_ref.GuardsIntact() && y_opt.GuardsIntact()) << where;
          ASSERT_TRUE(AllFinite(y_opt.values())) << where;
          EXPECT_LT(ErrorVsProducts(y_opt.values(), y_ref.values(), exact.magnitude), 1e-10)
              << where;
          EXPECT_LT(ErrorVsProducts(y_ref.values(), exact.y, exact.magnitude),
                    MatMulThresholdVsF64(t))
              << where;
        }
      }
    }
  }
}

// K-quant weights: rows of 1..6 super-blocks, odd row counts and token counts (decode, a
// partial 4-row dot group, more than one token tile's worth of dot groups), against f64 on the
// dequantized weights with the same activation-rounding threshold as the other GGML types.
TEST_F(CpuBackendParityTest, MatMulKQuantsOddShapes) {
  for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    ASSERT_TRUE(ref_.SupportsWeight(FormatOfDType(t)) && opt_.SupportsWeight(FormatOfDType(t)))
        << DTypeName(t);
    for (int64_t k : {256, 768, 1536}) {
      for (int64_t n : {1, 5, 31}) {
        const std::vector<float> w = Random(n * k, 2000 + k + n, 0.2f);
        const std::vector<uint8_t> wq = QuantizeMatrix(t, w.data(), n, k);
        const WeightMatrix wm = Wm(t, wq.data(), n, k, RowBytes(t, k).value());
        std::vector<float> wd(n * k);
        for (int64_t r = 0; r < n; ++r) {
          DequantizeRow(t, wq.data() + r * wm.row_bytes, wd.data() + r * k, k);
        }
        for (int64_t m : {1, 7, 33}) {
          const std::vector<float> x = Random(m * k, 11 * m + k);
          Guarded y_ref(m * n), y_opt(m * n);
          ref_.MatMul(x.data(), m, wm, y_ref.data(), DType::kF32);
          opt_.MatMul(x.data(), m, wm, y_opt.data(), DType::kF32);
          const ProductF64 exact = MatMulF64(x, wd, m, n, k);
          const std::string where = std::string(DTypeName(t)) + " m=" + std::to_string(m) +
                                    " k=" + std::to_string(k) + " n=" + std::to_string(n);
          ASSERT_TRUE(y_ref.GuardsIntact() && y_opt.GuardsIntact()) << where;
          ASSERT_TRUE(AllFinite(y_opt.values()) && AllFinite(y_ref.values())) << where;
          EXPECT_LT(ErrorVsProducts(y_opt.values(), y_ref.values(), exact.magnitude), 1e-10)
              << where;
          for (const std::vector<float>& got : {y_ref.values(), y_opt.values()}) {
            EXPECT_LT(ErrorVsProducts(got, exact.y, exact.magnitude), MatMulThresholdVsF64(t))
                << where;
          }
        }
      }
    }
  }
}

TEST_F(CpuBackendParityTest, MatMulHonoursRowStride) {
  const int64_t n = 5, k = 64;
  const std::vector<float> w = Random(n * k, 3);
  const int64_t packed = RowBytes(DType::kQ4_1, k).value();
  const std::vector<uint8_t> wq = QuantizeMatrix(DType::kQ4_1, w.data(), n, k);
  std::vector<uint8_t> strided(n * (packed + 24), 0xFF);  // junk between rows
  for (int64_t r = 0; r < n; ++r) {
    std::memcpy(strided.data() + r * (packed + 24), wq.data() + r * packed, packed);
  }
  const std::vector<float> x = Random(3 * k, 4);
  Guarded y_packed(3 * n), y_strided(3 * n);
  opt_.MatMul(x.data(), 3, Wm(DType::kQ4_1, wq.data(), n, k, packed), y_packed.data(), DType::kF32);
  opt_.MatMul(x.data(), 3, Wm(DType::kQ4_1, strided.data(), n, k, packed + 24),
              y_strided.data(), DType::kF32);
  EXPECT_EQ(y_packed.values(), y_strided.values());
}

// Batch invariance at the matmul: every row of an m-row product is the float the same row gives
// alone, for the 32-value block formats with rows short enough for the row-group kernels (k =
// 256) and too long for them (k = 1024 is 640 bytes of Q4_1), over 19 weight rows (a partial
// group), at decode and prefill sizes (whose tiles differ), on both backends.
TEST_F(CpuBackendParityTest, EveryRowOfAProductIsItsOneRowProduct) {
  const int64_t n = 19;
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    for (int64_t k : {256, 1024}) {
      const std::vector<float> w = Random(n * k, 11, 0.2f);
      const std::vector<uint8_t> wq = QuantizeMatrix(t, w.data(), n, k);
      const WeightMatrix wm = Wm(t, wq.data(), n, k, RowBytes(t, k).value());
      for (int64_t m : {5, 70}) {
        const std::vector<float> x = Random(m * k, 12 + m);
        for (Backend* be : {static_cast<Backend*>(&ref_), static_cast<Backend*>(&opt_)}) {
          Guarded all(m * n);
          be->MatMul(x.data(), m, wm, all.data(), DType::kF32);
          const std::vector<float> got = all.values();
          for (int64_t r = 0; r < m; ++r) {
            Guarded one(n);
            be->MatMul(x.data() + r * k, 1, wm, one.data(), DType::kF32);
            const std::vector<float> want = one.values();
            EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + r * n))
                << DTypeName(t) << " k=" << k << " m=" << m << " row " << r << " " << be->name();
          }
        }
      }
    }
  }
}

// What a row-group kernel gives rows [0, n) of a stored Q4_0/1 or Q5_0/1 matrix (rows
// row_bytes apart) against x [m, k], over the nb weight blocks from block0: the scalar table's
// dot_*_rows, one row and one activation row a call. y [m, n].
std::vector<float> RowGroupFloats(DType t, const uint8_t* wq, int64_t row_bytes, int64_t n,
                                  int64_t block0, int64_t nb, const std::vector<float>& x,
                                  int64_t m, int64_t k) {
  const CpuKernels& ks = ScalarCpuKernels();
  const auto dot = t == DType::kQ4_0   ? ks.dot_q4_0_rows
                   : t == DType::kQ4_1 ? ks.dot_q4_1_rows
                   : t == DType::kQ5_0 ? ks.dot_q5_0_rows
                   : t == DType::kQ5_1 ? ks.dot_q5_1_rows
                                       : ks.dot_q8_0_rows;
  std::vector<float> y(m * n);
  std::vector<Q8Block> xq(k / 32);
  float out[kWeightRowGroup];
  for (int64_t j = 0; j < m; ++j) {
    ks.quantize_q8(x.data() + j * k, k, xq.data());
    const Q8Block* xb = xq.data() + block0;
    for (int64_t r = 0; r < n; ++r) {
      dot(wq + r * row_bytes + block0 * BlockBytes(t), row_bytes, BlockBytes(t), 1, &xb, 1, nb,
          out);
      y[j * n + r] = out[0];
    }
  }
  return y;
}

// A Q4_0/1 or Q5_0/1 matrix placed for MatMul only is held interleaved (cpu_matmul.h): the same
// bytes, no stored form, and every row of MatMul and of each MatMulChunked chunk the floats a
// row-group kernel gives the stored row, whatever the row length (k = 1024 is 640 bytes of Q4_1,
// per-row kernels in the stored form), the rows past the last whole group (5, 19) and m (the
// decode and prefill tiles), on both backends. A table keeps its stored form.
TEST_F(CpuBackendParityTest, InterleavedMatricesGiveTheRowGroupFloatsOfTheirStoredRows) {
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
    for (int64_t k : {256, 1024}) {
      for (int64_t n : {5, 19, 64}) {
        const std::vector<float> w = Random(n * k, 21 + n, 0.2f);
        HostMatrix host;
        host.values = QuantizeMatrix(t, w.data(), n, k);
        host.matrix = Wm(t, host.values.data(), n, k, RowBytes(t, k).value());
        const std::string what = std::string(DTypeName(t)) + " k=" + std::to_string(k) +
                                 " n=" + std::to_string(n);
        for (CpuBackend* be : {&ref_, &opt_}) {
          absl::StatusOr<PlacedWeight> placed = be->PlaceWeight(host, WeightUse::kMatMul, "w");
          ASSERT_TRUE(placed.ok()) << placed.status();
          EXPECT_EQ(placed->matrix.data, nullptr) << what;
          ASSERT_NE(placed->matrix.prepared, nullptr) << what;
          EXPECT_EQ(placed->bytes_copied, n * RowBytes(t, k).value()) << what;
          absl::StatusOr<PlacedWeight> table = be->PlaceWeight(host, WeightUse::kTable, "w");
          ASSERT_TRUE(table.ok()) << table.status();
          ASSERT_NE(table->matrix.data, nullptr) << what;  // the stored bytes, in their order
          EXPECT_EQ(std::memcmp(table->matrix.data, host.values.data(), host.values.size()), 0)
              << what;
          for (int64_t m : {1, 5, 70}) {
            const std::vector<float> x = Random(m * k, 22 + m);
            Guarded y(m * n);
            be->MatMul(x.data(), m, placed->matrix, y.data(), DType::kF32);
            ASSERT_TRUE(y.GuardsIntact()) << what;
            EXPECT_EQ(y.values(), RowGroupFloats(t, host.values.data(), host.matrix.row_bytes, n,
                                                 0, k / 32, x, m, k))
                << what << " m=" << m << " " << be->name();
            const int64_t chunks = 4, kc = k / chunks;
            Guarded parts(chunks * m * n);
            be->MatMulChunked(x.data(), m, placed->matrix, chunks, parts.data());
            ASSERT_TRUE(parts.GuardsIntact()) << what;
            const std::vector<float> got = parts.values();
            for (int64_t c = 0; c < chunks; ++c) {
              const std::vector<float> want = RowGroupFloats(
                  t, host.values.data(), host.matrix.row_bytes, n, c * kc / 32, kc / 32, x, m, k);
              EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + c * m * n))
                  << what << " m=" << m << " chunk " << c << " " << be->name();
            }
          }
        }
      }
    }
  }
}

// Each chunk of MatMulChunked is bit-identical to MatMul over that chunk alone (taken as a
// contiguous copy of its input columns and a strided view of its weight columns), for every
// weight type, on both backends, at decode and prefill sizes.
TEST_F(CpuBackendParityTest, MatMulChunkedEqualsEachChunkAlone) {
  const int64_t n = 19, chunks = 3;
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                  DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    // Chunks are whole weight blocks: 64 values, or one 256-value K-quant super-block.
    const int64_t kc = std::max<int64_t>(64, BlockElems(t)), k = chunks * kc;
    const std::vector<float> w = Random(n * k, 7);
    const std::vector<uint8_t> wq = QuantizeMatrix(t, w.data(), n, k);
    const int64_t row_bytes = RowBytes(t, k).value();
    for (int64_t m : {1, 5, 70}) {
      const std::vector<float> x = Random(m * k, 8);
      for (Backend* be : {static_cast<Backend*>(&ref_), static_cast<Backend*>(&opt_)}) {
        Guarded all(chunks * m * n);
        be->MatMulChunked(x.data(), m, Wm(t, wq.data(), n, k, row_bytes), chunks,
                          all.data());
        ASSERT_TRUE(all.GuardsIntact());
        const std::vector<float> got = all.values();
        for (int64_t c = 0; c < chunks; ++c) {
          std::vector<float> xc(m * kc);
          for (int64_t r = 0; r < m; ++r) {
            std::copy_n(x.data() + r * k + c * kc, kc, xc.data() + r * kc);
          }
          const WeightMatrix wc = Wm(t, wq.data() + c * RowBytes(t, kc).value(), n, kc, row_bytes);
          Guarded alone(m * n);
          be->MatMul(xc.data(), m, wc, alone.data(), DType::kF32);
          const std::vector<float> want = alone.values();
          EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + c * m * n))
              << DTypeName(t) << " m=" << m << " chunk " << c << " " << be->name();
        }
      }
    }
  }
}

// Q/K/V and gate/up run as one op: every output must be the floats MatMul gives for its
// matrix alone, whatever mix of formats (quantized x shared, 16-bit scratch, fp8) and shapes.
TEST_F(CpuBackendParityTest, MatMulManyEqualsEachMatMulAlone) {
  const int64_t k = 128;
  const std::vector<std::pair<DType, int64_t>> mats = {
      {DType::kQ4_1, 40}, {DType::kQ8_0, 8}, {DType::kF16, 13}, {DType::kF8E4M3, 5},
      {DType::kQ5_0, 17}, {DType::kF32, 3}};
  std::vector<std::vector<uint8_t>> data;
  std::vector<WeightMatrix> ws;
  for (size_t i = 0; i < mats.size(); ++i) {
    const auto [t, n] = mats[i];
    const std::vector<float> w = Random(n * k, 40 + i, 0.2f);
    data.push_back(QuantizeMatrix(t, w.data(), n, k));
    ws.push_back(Wm(t, data.back().data(), n, k, RowBytes(t, k).value()));
  }
  for (int64_t m : {1, 3, 70}) {
    const std::vector<float> x = Random(m * k, 9 + m);
    for (Backend* be : {static_cast<Backend*>(&ref_), static_cast<Backend*>(&opt_)}) {
      std::vector<Guarded> ys;
      for (const WeightMatrix& w : ws) ys.emplace_back(m * w.rows);
      std::vector<Backend::MatMulOut> outs;
      for (size_t i = 0; i < ws.size(); ++i) outs.push_back({&ws[i], ys[i].data()});
      be->MatMulMany(x.data(), m, outs, DType::kF32, /*fused=*/nullptr);
      for (size_t i = 0; i < ws.size(); ++i) {
        ASSERT_TRUE(ys[i].GuardsIntact());
        Guarded alone(m * ws[i].rows);
        be->MatMul(x.data(), m, ws[i], alone.data(), DType::kF32);
        EXPECT_EQ(ys[i].values(), alone.values())
            << DTypeName(*ElementDType(ws[i].format)) << " m=" << m << " " << be->name();
      }
    }
  }
}

TEST_F(CpuBackendParityTest, RmsNormInAndOutOfPlace) {
  for (int64_t rows : {1, 3, 64}) {
    for (int64_t dim : {32, 576, 1539}) {
      const std::vector<float> x = Random(rows * dim, rows + dim, 3.0f);
      const std::vector<float> w = Random(dim, 9);
      std::vector<double> exact(rows * dim);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i) ss += double{x[r * dim + i]} * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
        for (int64_t i = 0; i < dim; ++i) exact[r * dim + i] = x[r * dim + i] * inv * w[i];
      }
      Guarded y_ref(rows * dim), in_place(rows * dim);
      ref_.RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, y_ref.data());
      std::copy(x.begin(), x.end(), in_place.data());
      opt_.RmsNorm(in_place.data(), w.data(), rows, dim, 1e-5f, in_place.data());
      ASSERT_TRUE(y_ref.GuardsIntact() && in_place.GuardsIntact());
      EXPECT_LT(Nmse(in_place.values(), y_ref.values()), 1e-12) << rows << "x" << dim;
      EXPECT_LT(Nmse(y_ref.values(), exact), 1e-12) << rows << "x" << dim;
    }
  }
}

TEST_F(CpuBackendParityTest, RopeBothLayoutsAgainstTheFormula) {
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kRotateHalf}) {
    for (int64_t head_dim : {16, 64, 128}) {
      for (int64_t heads : {1, 3, 9}) {
        const int64_t rows = 37;
        const std::vector<float> inv_freq = RopeInverseFrequencies(head_dim, 10000.0, {});
        std::vector<int32_t> pos(rows);
        for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>((r * 977) % 4096);
        const std::vector<float> x = Random(rows * heads * head_dim, head_dim + heads);
        std::vector<double> exact(x.begin(), x.end());
        const int64_t half = head_dim / 2;
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t h = 0; h < heads; ++h) {
            double* e = exact.data() + (r * heads + h) * head_dim;
            for (int64_t i = 0; i < half; ++i) {
              const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
              const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
              const double th = static_cast<double>(pos[r]) * inv_freq[i];
              const double x0 = e[a], x1 = e[b];
              e[a] = x0 * std::cos(th) - x1 * std::sin(th);
              e[b] = x0 * std::sin(th) + x1 * std::cos(th);
            }
          }
        }
        Guarded a(x.size()), b(x.size());
        std::copy(x.begin(), x.end(), a.data());
        std::copy(x.begin(), x.end(), b.data());
        const StepInputs step{{}, pos, {}, {}};
        ref_.BeginStep(step);
        opt_.BeginStep(step);
        ref_.Rope(a.data(), heads, head_dim, inv_freq.data(), layout);
        opt_.Rope(b.data(), heads, head_dim, inv_freq.data(), layout);
        ASSERT_TRUE(a.GuardsIntact() && b.GuardsIntact());
        EXPECT_LT(Nmse(b.values(), a.values()), 1e-12);
        EXPECT_LT(Nmse(a.values(), exact), 1e-12) << head_dim << " " << heads;
      }
    }
  }
}

// The angles of a step are computed once per table of frequencies and shared by its q and k
// rotations; the next step's positions get new ones, though the table's address is the same.
TEST_F(CpuBackendParityTest, RopeAnglesFollowEachStepsPositions) {
  const int64_t head_dim = 64, half = head_dim / 2;
  const std::vector<float> inv_freq = RopeInverseFrequencies(head_dim, 10000.0, {});
  for (const std::vector<int32_t>& pos : {std::vector<int32_t>{5, 900, 4095},
                                          std::vector<int32_t>{77, 3, 1}}) {
    const StepInputs step{{}, pos, {}, {}};
    opt_.BeginStep(step);
    for (int64_t heads : {9, 3}) {  // q, then k with the same frequencies
      const int64_t rows = static_cast<int64_t>(pos.size());
      std::vector<float> x = Random(rows * heads * head_dim, heads + pos[0]);
      std::vector<double> exact(x.begin(), x.end());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < heads; ++h) {
          double* e = exact.data() + (r * heads + h) * head_dim;
          for (int64_t i = 0; i < half; ++i) {
            const double th = static_cast<double>(pos[r]) * inv_freq[i];
            const double x0 = e[i], x1 = e[i + half];
            e[i] = x0 * std::cos(th) - x1 * std::sin(th);
            e[i + half] = x0 * std::sin(th) + x1 * std::cos(th);
          }
        }
      }
      opt_.Rope(x.data(), heads, head_dim, inv_freq.data(), RopeLayout::kRotateHalf);
      EXPECT_LT(Nmse(x, exact), 1e-12) << "positions from " << pos[0] << ", heads " << heads;
    }
  }
}

TEST_F(CpuBackendParityTest, SiluMulAndAdd) {
  for (int64_t count : {1, 7, 1536, 100003}) {  // the last one is split across threads
    const std::vector<float> g = Random(count, 5, 4.0f), u = Random(count, 6);
    std::vector<double> silu(count), sum(count);
    for (int64_t i = 0; i < count; ++i) {
      silu[i] = g[i] / (1.0 + std::exp(-double{g[i]})) * u[i];
      sum[i] = double{g[i]} + u[i];
    }
    Guarded s_ref(count), s_opt(count), a_opt(count);
    ref_.GatedActivation(Activation::kSilu, g.data(), u.data(), count, s_ref.data());
    opt_.GatedActivation(Activation::kSilu, g.data(), u.data(), count, s_opt.data());
    opt_.Add(g.data(), u.data(), count, a_opt.data());
    ASSERT_TRUE(s_ref.GuardsIntact() && s_opt.GuardsIntact() && a_opt.GuardsIntact());
    EXPECT_LT(Nmse(s_opt.values(), s_ref.values()), 1e-12) << count;
    EXPECT_LT(Nmse(s_ref.values(), silu), 1e-12) << count;
    EXPECT_LT(Nmse(a_opt.values(), sum), 1e-14) << count;
  }
}

TEST_F(CpuBackendParityTest, EmbeddingRowsDequantizeAndZeroOutsideTheShard) {
  const int64_t rows = 20, first_row = 10;
  const std::vector<int32_t> ids = {5, 10, 29, 30, 17, 17};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kQ8_0,
                  DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int64_t cols = BlockElems(t) > 32 ? 512 : 96;  // whole blocks; K-quants: 2 of 256
    const std::vector<float> table = Random(rows * cols, 8);
    const std::vector<uint8_t> tq = QuantizeMatrix(t, table.data(), rows, cols);
    const WeightMatrix wm = Wm(t, tq.data(), rows, cols, RowBytes(t, cols).value());
    Guarded out(ids.size() * cols, 123.0f);
    opt_.BeginStep(StepInputs{ids, {}, {}, {}});
    opt_.EmbeddingRows(wm, first_row, out.data());
    ASSERT_TRUE(out.GuardsIntact()) << DTypeName(t);
    const std::vector<float> got = out.values();
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<float> want(cols, 0.0f);
      if (ids[i] >= first_row && ids[i] < first_row + rows) {
        DequantizeRow(t, tq.data() + (ids[i] - first_row) * wm.row_bytes, want.data(), cols);
      }
      EXPECT_EQ(std::vector<float>(got.begin() + i * cols, got.begin() + (i + 1) * cols), want)
          << DTypeName(t) << " id " << ids[i];
    }
  }
}

}  // namespace
}  // namespace tpserve
