// The load-time check of a weight's MatMul plans (matmul_plan_load.h; issue 38, "fallbacks that
// are never silent"), on the host with cuBLASLt's answers scripted: a scale mode cuBLASLt
// refuses gives kDecodedGemm with the reason at load, said once per role; --strict_kernels
// refuses the same weight with an error naming role, shape and reason; shapes cuBLASLt's fp8
// kernels cannot take are found without asking it.
//
// On the code before this check (CudaMatMul::Run learning of a refusal from the first step's
// UNIMPLEMENTED, one stderr line per process): there was no load-time answer, so
// RefusedScaleModeIsFoundAtLoadWithTheReason's EXPECT_EQ(report->decoded.size(), 1u) had
// nothing to call (the plan made at load was kFp8BlockScaledGemm, LoadTimePlanWithoutAsking
// shows it), StrictKernelsRefusesTheRank's EXPECT_EQ(kFailedPrecondition) had no flag to
// refuse with, and FallbackLogSaysEachRoleOnce's second role got no line (one per process).
#include "kernels/cuda/matmul_plan_load.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

using ::testing::HasSubstr;

constexpr char kRefusal[] = "cuBLASLt has no algorithm for e4m3 x e4m3 (scripted)";

// An fp8 weight as the backend places it on a GPU without the mixed GEMM (not prepared):
// 256-byte aligned rows.
LoadedWeight Fp8Weight(std::string_view what, FormatKind kind, int64_t n, int64_t k) {
  LoadedWeight w;
  w.role = WeightRoleName(what);
  w.format = TensorFormat::Of(kind);
  w.n = n;
  w.k = k;
  w.row_bytes = k;
  w.data = reinterpret_cast<const void*>(uintptr_t{1} << 24);
  w.facts.w_aligned = k % 16 == 0;
  w.facts.w_prepared = false;
  return w;
}

// A cuBLASLt without the 128x128 block-scaled fp8 GEMM (as before 12.9, or on a GPU that
// lacks the mode) that takes every other GEMM, and the questions it was asked.
struct ScriptedCublas {
  std::vector<GemmArgs> asked;
  absl::Status Answer(const GemmArgs& g) {
    asked.push_back(g);
    if (g.w_scale == GemmScale::kBlock128) return absl::UnimplementedError(kRefusal);
    return absl::OkStatus();
  }
};

MatMulLoadOptions Options(bool strict) {
  return {.deterministic = false, .strict_kernels = strict, .rows = MatMulLoadRows(512, false)};
}

TEST(MatMulPlanLoadTest, LoadTimePlanWithoutAsking) {
  // What the load knew before: the plan for a prefill batch is the scaled fp8 GEMM.
  const LoadedWeight w = Fp8Weight("model.layers.0.mlp.down_proj", FormatKind::kFp8Block128,
                                   4096, 14336);
  EXPECT_EQ(ChooseMatMulPath(w.format, 17, w.n, w.k, w.facts, false).path,
            MatMulPath::kFp8BlockScaledGemm);
}

TEST(MatMulPlanLoadTest, RefusedScaleModeIsFoundAtLoadWithTheReason) {
  const LoadedWeight w = Fp8Weight("model.layers.0.mlp.down_proj", FormatKind::kFp8Block128,
                                   4096, 14336);
  ScriptedCublas cublas;
  absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
      w, Options(false), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->decoded.size(), 1u);
  // Decode-sized batches run the GEMV (exact activations); every larger one decodes W.
  EXPECT_EQ(report->decoded[0].first_m, 17);
  EXPECT_EQ(report->decoded[0].last_m, 512);
  EXPECT_THAT(report->decoded[0].reason,
              HasSubstr("cuBLASLt has no fp8 GEMM with 128x128 (W) / 1x128 (x) scales"));
  EXPECT_THAT(report->decoded[0].reason, HasSubstr(kRefusal));
  EXPECT_TRUE(report->fp8_refused[0]);
  EXPECT_TRUE(report->fp8_refused[1]);
  // It asked about the GEMM CudaMatMul would run: e4m3 W [4096, 14336], 128x128 and 1x128
  // scales, first at the first batch that quantizes; once per output type (a refusal holds for
  // every m, as CudaMatMul remembers it).
  ASSERT_EQ(cublas.asked.size(), 2u);
  EXPECT_EQ(cublas.asked[0].type, GemmType::kE4M3);
  EXPECT_EQ(cublas.asked[0].out, GemmType::kBF16);
  EXPECT_EQ(cublas.asked[1].out, GemmType::kF32);
  EXPECT_EQ(cublas.asked[0].x_scale, GemmScale::kVec128);
  EXPECT_EQ(cublas.asked[0].m, 17);
  EXPECT_EQ(cublas.asked[0].n, 4096);
  EXPECT_EQ(cublas.asked[0].k, 14336);
}

TEST(MatMulPlanLoadTest, StrictKernelsRefusesTheRank) {
  const LoadedWeight w = Fp8Weight("model.layers.0.mlp.down_proj", FormatKind::kFp8Block128,
                                   4096, 14336);
  ScriptedCublas cublas;
  absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
      w, Options(true), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(report.status().message());
  EXPECT_THAT(message, HasSubstr("--strict_kernels"));
  EXPECT_THAT(message, HasSubstr("model.layers.*.mlp.down_proj (fp8-block [4096, 14336])"));
  EXPECT_THAT(message, HasSubstr("decoded-bf16-gemm"));
  EXPECT_THAT(message, HasSubstr("at m = 17"));
  EXPECT_THAT(message, HasSubstr("128x128 (W) / 1x128 (x)"));
  EXPECT_THAT(message, HasSubstr(kRefusal));
}

TEST(MatMulPlanLoadTest, ServedWeightsReportNothingAndPassStrictMode) {
  // Per-channel fp8 takes the outer-vector scales, which the script serves.
  const LoadedWeight w = Fp8Weight("model.layers.0.mlp.gate_proj", FormatKind::kFp8PerChannel,
                                   14336, 4096);
  ScriptedCublas cublas;
  absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
      w, Options(true), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->decoded.empty());
  EXPECT_FALSE(report->fp8_refused[0]);
  // Asked at every planned batch above 16 rows, for both output types: 17..512 is 6 rows.
  EXPECT_EQ(cublas.asked.size(), 12u);
  EXPECT_EQ(cublas.asked[0].w_scale, GemmScale::kOuterVec);
}

TEST(MatMulPlanLoadTest, ShapesTheFp8KernelsCannotTakeAreFoundWithoutAsking) {
  // n = 4100 is not a multiple of 16: cuBLASLt's fp8 kernels cannot take it (matmul_plan.cc
  // Fp8GemmTakes), so it is never asked; decode-sized batches still run the GEMV.
  const LoadedWeight w = Fp8Weight("blk.3.ffn_up", FormatKind::kFp8PerChannel, 4100, 4096);
  ScriptedCublas cublas;
  absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
      w, Options(false), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(cublas.asked.empty());
  ASSERT_EQ(report->decoded.size(), 1u);
  EXPECT_EQ(report->decoded[0].first_m, 17);
  EXPECT_THAT(report->decoded[0].reason, HasSubstr("n and k multiples of 16; n = 4100"));

  absl::StatusOr<MatMulLoadReport> strict = CheckMatMulAtLoad(
      w, Options(true), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_FALSE(strict.ok());
  EXPECT_THAT(strict.status().message(), HasSubstr("blk.*.ffn_up (fp8 [4100, 4096])"));
}

TEST(MatMulPlanLoadTest, WeightsNoFp8KernelTakesDecodeAtEveryBatch) {
  // k = 72: not whole 16-column steps (the GEMV) nor a multiple of 16 (cuBLASLt): decoded for
  // decode-sized batches and prefill alike, each with its own reason.
  const LoadedWeight w = Fp8Weight("lm_head", FormatKind::kF8E4M3, 32, 72);
  ScriptedCublas cublas;
  absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
      w, Options(false), [&](const GemmArgs& g) { return cublas.Answer(g); });
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->decoded.size(), 2u);
  EXPECT_EQ(report->decoded[0].first_m, 1);
  EXPECT_EQ(report->decoded[0].last_m, 16);
  EXPECT_THAT(report->decoded[0].reason, HasSubstr("the fp8 GEMV needs 16-byte aligned rows"));
  EXPECT_EQ(report->decoded[1].first_m, 17);
  EXPECT_EQ(report->decoded[1].last_m, 512);
}

TEST(MatMulPlanLoadTest, FallbackLogSaysEachRoleOnce) {
  ScriptedCublas cublas;
  FallbackLog log;
  std::vector<std::vector<std::string>> said;
  for (const char* what : {"model.layers.0.mlp.down_proj", "model.layers.1.mlp.down_proj",
                           "model.layers.2.mlp.down_proj", "model.layers.0.mlp.up_proj"}) {
    const LoadedWeight w = Fp8Weight(what, FormatKind::kFp8Block128, 4096, 14336);
    absl::StatusOr<MatMulLoadReport> report = CheckMatMulAtLoad(
        w, Options(false), [&](const GemmArgs& g) { return cublas.Answer(g); });
    ASSERT_TRUE(report.ok()) << report.status();
    said.push_back(log.Add(w, *report));
  }
  ASSERT_EQ(said[0].size(), 1u);
  EXPECT_EQ(said[1].size(), 0u);  // the same role and reason: not per layer
  EXPECT_EQ(said[2].size(), 0u);
  ASSERT_EQ(said[3].size(), 1u);  // another role: its own line
  EXPECT_THAT(said[0][0],
              HasSubstr("CudaMatMul: model.layers.*.mlp.down_proj (fp8-block [4096, 14336]): "
                        "batches of 17 to 512 rows decode W to bf16 (decoded-bf16-gemm): "));
  EXPECT_THAT(said[0][0], HasSubstr(kRefusal));
  EXPECT_THAT(said[3][0], HasSubstr("model.layers.*.mlp.up_proj"));
}

TEST(MatMulPlanLoadTest, OtherDeviceErrorsStopTheLoadWithTheShape) {
  const LoadedWeight w = Fp8Weight("model.layers.0.mlp.down_proj", FormatKind::kFp8Block128,
                                   4096, 14336);
  absl::StatusOr<MatMulLoadReport> report =
      CheckMatMulAtLoad(w, Options(false), [](const GemmArgs&) {
        return absl::InternalError("cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_INTERNAL_ERROR");
      });
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(report.status().message(), HasSubstr("fp8-block [4096, 14336]) at m = 17"));
}

TEST(MatMulPlanLoadTest, WeightRoleNameDropsLayerExpertAndHeadNumbers) {
  EXPECT_EQ(WeightRoleName("model.layers.31.self_attn.q_proj"), "model.layers.*.self_attn.q_proj");
  EXPECT_EQ(WeightRoleName("model.layers.3.mlp.experts.17.gate_proj"),
            "model.layers.*.mlp.experts.*.gate_proj");
  EXPECT_EQ(WeightRoleName("blk.0.attn_q"), "blk.*.attn_q");
  EXPECT_EQ(WeightRoleName("blk.12.attn_k_b head 5"), "blk.*.attn_k_b head *");
  EXPECT_EQ(WeightRoleName("model.layers.0.mlp.w13"), "model.layers.*.mlp.w13");
  EXPECT_EQ(WeightRoleName("lm_head"), "lm_head");
}

TEST(MatMulPlanLoadTest, LoadRowsCoverTheStepsBatches) {
  EXPECT_EQ(MatMulLoadRows(512, false), (std::vector<int64_t>{1, 16, 17, 32, 64, 128, 256, 512}));
  EXPECT_EQ(MatMulLoadRows(0, false), MatMulLoadRows(kGpuMaxTokensPerStep, false));
  EXPECT_EQ(MatMulLoadRows(16, false), (std::vector<int64_t>{1, 16}));
  EXPECT_EQ(MatMulLoadRows(1, true), (std::vector<int64_t>{1}));
  const std::vector<int64_t> det = MatMulLoadRows(1000, true);
  ASSERT_EQ(det.size(), 256u + 11u + 1u);  // 1..256, 320..960 by 64, 1000
  EXPECT_EQ(det[255], 256);
  EXPECT_EQ(det[256], 320);
  EXPECT_EQ(det[266], 960);
  EXPECT_EQ(det.back(), 1000);
}

TEST(MatMulPlanLoadTest, DecodedBytesAreTheWholeMatrixInBf16) {
  // What CudaMatMul::decoded_weight_bytes adds per MatMul (cuda_matmul.cc DecodedGemm).
  EXPECT_EQ(MatMulDecodedBytes(MatMulPath::kDecodedGemm, 4096, 14336), int64_t{4096} * 14336 * 2);
  EXPECT_EQ(MatMulDecodedBytes(MatMulPath::kFp8BlockScaledGemm, 4096, 14336), 0);
  EXPECT_EQ(MatMulDecodedBytes(MatMulPath::kGemv, 4096, 14336), 0);
}

}  // namespace
}  // namespace tpserve::cuda
