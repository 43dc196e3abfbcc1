// Backend parity for the weight formats that carry scales next to their values (fp8
// per-channel, fp8 128x128 tiles, int4 groups with and without act-order), made by
// QuantizeWeights: the optimized backend (AVX2, 2 threads) against the scalar reference
// (1 thread), both against DequantizeWeightRow + f64 on odd shapes, and each chunk of
// MatMulChunked against MatMul of that chunk alone. Outputs sit between guard words.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize_weights.h"

namespace tpserve {
namespace {

using parity_test::AllFinite;
using parity_test::ErrorVsProducts;
using parity_test::Guarded;
using parity_test::MatMulF64;
using parity_test::ProductF64;
using parity_test::Random;

class CpuScaledWeightsTest : public ::testing::Test {
 protected:
  CpuScaledWeightsTest()
      : ref_(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar}),
        opt_(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()}) {}
  CpuBackend ref_;
  CpuBackend opt_;
};

const TensorFormat kScaledFormats[] = {
    TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Of(FormatKind::kFp8Block128),
    TensorFormat::Int4(32), TensorFormat::Int4(64), TensorFormat::Int4(128)};

// Against f64 on the dequantized weights, relative to the sum of squared products (see
// cpu_backend_test.cc): fp8 is W8A32, so only f32 summation error remains, as for the float
// types; int4 multiplies 8-bit activation blocks, whose rounding has a relative variance of
// about (max|x| / 127)^2 / 12 / E[x^2] ~ 3e-5 for Gaussian blocks of 32, as for GGML types.
double ThresholdVsF64(const TensorFormat& f) {
  return f.kind == FormatKind::kInt4Group ? 2e-4 : 1e-9;
}

// A permutation of 0..k-1, as GPTQ act-order stores it.
std::vector<int32_t> Shuffled(int64_t k, uint32_t seed) {
  std::vector<int32_t> perm(k);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  return perm;
}

// k = 576 (SmolLM2's hidden size) ends fp8-block rows in a half tile and fits no int4-g128;
// n = 130 spans two fp8 tile rows.
TEST_F(CpuScaledWeightsTest, MatMulOddShapesAgainstDequantizedF64) {
  for (const TensorFormat& f : kScaledFormats) {
    const bool int4 = f.kind == FormatKind::kInt4Group;
    ASSERT_TRUE(ref_.SupportsWeight(f) && opt_.SupportsWeight(f)) << TensorFormatName(f);
    for (bool act_order : int4 ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      for (int64_t k : {128, 384, 576, 1536}) {
        if (int4 && k % f.group_size != 0) continue;
        for (int64_t n : {1, 5, 31, 130}) {
          const std::vector<float> w = Random(n * k, 3000 + k + n, 0.2f);
          HostMatrix q = QuantizeWeights(f, w.data(), n, k);
          if (act_order) {
            q.perm = Shuffled(k, 17 + k);
            q.matrix.input_perm = q.perm.data();
          }
          std::vector<float> wd(n * k);  // what the kernels should see, stored column order
          for (int64_t r = 0; r < n; ++r) DequantizeWeightRow(q.matrix, r, wd.data() + r * k);
          for (int64_t m : {1, 7, 33}) {
            const std::vector<float> x = Random(m * k, 13 * m + k);
            Guarded y_ref(m * n), y_opt(m * n);
            ref_.MatMul(x.data(), m, q.matrix, y_ref.data(), DType::kF32);
            opt_.MatMul(x.data(), m, q.matrix, y_opt.data(), DType::kF32);
            const ProductF64 exact = MatMulF64(x, wd, m, n, k, act_order ? q.perm.data() : nullptr);
            const std::string where = TensorFormatName(f) + (act_order ? " act-order" : "") +
                                      " m=" + std::to_string(m) + " k=" + std::to_string(k) +
                                      " n=" + std::to_string(n);
            ASSERT_TRUE(y_ref.GuardsIntact() && y_opt.GuardsIntact()) << where;
            ASSERT_TRUE(AllFinite(y_ref.values()) && AllFinite(y_opt.values())) << where;
            // Not Nmse: with m = n = 1 the one output can cancel to near zero, and then any
            // reordering of the f32 sum looks large against it (seen on CI: 2e-10).
            EXPECT_LT(ErrorVsProducts(y_opt.values(), y_ref.values(), exact.magnitude), 1e-10)
                << where;
            for (const std::vector<float>& got : {y_ref.values(), y_opt.values()}) {
              EXPECT_LT(ErrorVsProducts(got, exact.y, exact.magnitude), ThresholdVsF64(f))
                  << where;
            }
          }
        }
      }
    }
  }
}

// Chunk c of `w` on its own: its value columns and the scales of those columns, built here
// from the layout (kernels/weight_matrix.h), not by the code under test.
WeightMatrix ChunkView(const WeightMatrix& w, int64_t c, int64_t kc) {
  WeightMatrix wc = w;
  wc.cols = kc;
  wc.data = static_cast<const uint8_t*>(w.data) + c * PackedRowBytes(w.format, kc);
  if (w.format.kind == FormatKind::kFp8Block128) {
    wc.scales = static_cast<const float*>(w.scales) + c * (kc / 128);
  } else if (w.format.kind == FormatKind::kInt4Group) {
    wc.scales = static_cast<const uint16_t*>(w.scales) + c * (kc / w.format.group_size);
    wc.zeros = static_cast<const uint16_t*>(w.zeros) + c * (kc / w.format.group_size);
  }
  return wc;
}

// Each chunk of MatMulChunked is bit-identical to MatMul of that chunk alone, on both
// backends, at decode and prefill sizes; chunks are one 128-column fp8 tile, or 1..4 groups.
TEST_F(CpuScaledWeightsTest, MatMulChunkedEqualsEachChunkAlone) {
  const int64_t n = 131, chunks = 3, kc = 128, k = chunks * kc;
  for (const TensorFormat& f : kScaledFormats) {
    const std::vector<float> w = Random(n * k, 9, 0.2f);
    const HostMatrix q = QuantizeWeights(f, w.data(), n, k);
    for (int64_t m : {1, 5, 70}) {
      const std::vector<float> x = Random(m * k, 10);
      for (Backend* be : {static_cast<Backend*>(&ref_), static_cast<Backend*>(&opt_)}) {
        Guarded all(chunks * m * n);
        be->MatMulChunked(x.data(), m, q.matrix, chunks, all.data());
        ASSERT_TRUE(all.GuardsIntact());
        const std::vector<float> got = all.values();
        for (int64_t c = 0; c < chunks; ++c) {
          std::vector<float> xc(m * kc);
          for (int64_t r = 0; r < m; ++r) {
            std::copy_n(x.data() + r * k + c * kc, kc, xc.data() + r * kc);
          }
          Guarded alone(m * n);
          be->MatMul(xc.data(), m, ChunkView(q.matrix, c, kc), alone.data(), DType::kF32);
          ASSERT_TRUE(alone.GuardsIntact());
          const std::vector<float> want = alone.values();
          EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + c * m * n))
              << TensorFormatName(f) << " m=" << m << " chunk " << c << " " << be->name();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpserve
