// --deterministic_tp on CUDA, on the host: for every projection of a Llama 3.1 8B and a 405B
// rank at tensor-parallel degrees 1, 2, 4 and 8 (the column-parallel slices, and the chunks
// the row-parallel layers are cut into, model/step_buffers.h), and every batch size 1..64, the
// deterministic backend chooses the same MatMul path, asks cuBLASLt for the same GEMM (one
// pinned algorithm without split-K per type pair) and plans the mixed-input GEMM of its int4
// and fp8 weights (held in that GEMM's form, as kernels/cuda/weight_placement.h places them on
// a Hopper GPU) with the same tile and split-K count. A row's floats then depend on neither the
// batch nor the degree. The same sweep without the flag asks per shape (the control: the test would
// notice a request or a plan that varied).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/gemm_request.h"
#include "kernels/cuda/matmul_plan.h"
#include "kernels/cuda/matmul_plan_load.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/cuda/weight_placement.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/step_buffers.h"
#include "model/weight_formats.h"

namespace tpserve::cuda {
namespace {

constexpr int kH100Sms = 132;
constexpr int kHopper = 90;

// One MatMul a rank runs for a layer: y[m, n] = x[m, k] W^T, `chunks` > 0 for the row-parallel
// layers (MatMulChunked of k into that many chunks).
struct RankMatMul {
  TensorRole role;
  TensorFormat format;
  int64_t n = 0, k = 0;
  int64_t chunks = 0;
  bool y_f32 = false;
};

std::vector<RankMatMul> RankMatMuls(const ModelSpec& config, const WeightFormats& formats,
                                    int tp) {
  absl::StatusOr<ShardingPlan> plan = ShardingPlan::Create(config, formats, {0, tp});
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  const int64_t chunks = ReductionChunks(config, *plan, formats, TpReduction::kDeterministic);
  std::vector<RankMatMul> out;
  for (TensorRole role : {TensorRole::kQ, TensorRole::kK, TensorRole::kV, TensorRole::kGate,
                          TensorRole::kUp, TensorRole::kLmHead}) {
    const TensorSlice s = plan->Slice(role);
    out.push_back({role, formats[role], s.num_rows, s.num_cols, 0, role == TensorRole::kLmHead});
  }
  for (TensorRole role : {TensorRole::kO, TensorRole::kDown}) {
    const TensorSlice s = plan->Slice(role);
    out.push_back({role, formats[role], s.num_rows, s.num_cols, chunks / tp, true});
  }
  return out;
}

struct Sweep {
  std::map<TensorRole, std::set<std::string>> paths;  // per role, over degrees and batches
  std::map<TensorRole, std::set<std::string>> mixed_plans;  // the mixed GEMM's, per role
  std::set<std::string> requests;
  int64_t cases = 0;
};

std::string PlanString(const MixedGemmPlan& p) {
  return std::string(p.tile == MixedGemmTile::kDecode ? "decode" : "large") + " tile, " +
         std::to_string(p.splits) + " splits";
}

// What the deterministic backend does for one MatMul of `m` rows: its path and, for the
// cuBLASLt paths, the request (the GEMM of each chunk, for chunked products), for the mixed
// GEMM its plan.
std::string Choice(const RankMatMul& mm, int64_t m, bool deterministic, Sweep* sweep) {
  OperandFacts facts;  // backend buffers: 256-byte aligned, rows of whole steps
  // Held as the CUDA backend places it on a Hopper GPU.
  facts.w_prepared = CudaWeightFormFor(mm.format, mm.n, mm.k, WeightUse::kMatMul, kHopper) !=
                     CudaWeightForm::kStored;
  int64_t k = mm.k;
  std::string path;
  if (mm.chunks > 0) {
    const MatMulPlan chunked =
        ChooseChunkedPath(mm.format, m, mm.n, mm.k, mm.chunks, facts, deterministic);
    path = std::string(MatMulPathName(chunked.path)) + "/";
    k = mm.k / mm.chunks;
    if (chunked.path == MatMulPath::kMixedGemm) {
      sweep->mixed_plans[mm.role].insert(
          PlanString(PlanMixedGemm(mm.format, m, mm.n, k, kH100Sms, deterministic)));
    }
    if (chunked.path != MatMulPath::kChunkByChunk) return path;
    facts.w_prepared = false;  // each chunk runs on the stored form
  }
  const MatMulPlan plan = ChooseMatMulPath(mm.format, m, mm.n, k, facts, deterministic);
  path += MatMulPathName(plan.path);
  if (plan.path == MatMulPath::kMixedGemm) {
    sweep->mixed_plans[mm.role].insert(
        PlanString(PlanMixedGemm(mm.format, m, mm.n, k, kH100Sms, deterministic)));
  }
  if (plan.path == MatMulPath::kBf16Gemm || plan.path == MatMulPath::kDecodedGemm) {
    GemmArgs g;
    g.type = GemmType::kBF16;
    g.out = mm.y_f32 ? GemmType::kF32 : GemmType::kBF16;
    g.m = m;
    g.n = mm.n;
    g.k = k;
    g.w = g.x = g.y = reinterpret_cast<void*>(uintptr_t{1} << 20);
    g.ldw = g.ldx = k;
    g.ldy = mm.n;
    const GemmRequest r = MakeGemmRequest(g, deterministic);
    sweep->requests.insert(GemmRequestString(r));
    if (deterministic) {
      EXPECT_FALSE(r.reductions_allowed) << GemmRequestString(r);
      EXPECT_TRUE(r.pinned) << GemmRequestString(r);
    }
  }
  return path;
}

Sweep SweepModel(const char* preset, const char* formats_preset, bool deterministic) {
  Sweep sweep;
  absl::StatusOr<ModelSpec> config = ModelSpecPreset(preset);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<WeightFormats> formats = WeightFormatsPreset(formats_preset);
  EXPECT_TRUE(formats.ok()) << formats.status();
  if (!config.ok() || !formats.ok()) return sweep;
  for (int tp : {1, 2, 4, 8}) {
    WeightFormats fitted = *formats;
    FitInt4Groups(*config, tp, &fitted);
    for (const RankMatMul& mm : RankMatMuls(*config, fitted, tp)) {
      for (int64_t m = 1; m <= 64; ++m) {
        sweep.paths[mm.role].insert(Choice(mm, m, deterministic, &sweep));
        ++sweep.cases;
      }
    }
  }
  return sweep;
}

class DeterministicPlanTest
    : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(DeterministicPlanTest, SameChoicesAtEveryDegreeAndBatch) {
  const auto [model, formats] = GetParam();
  const Sweep sweep = SweepModel(model, formats, /*deterministic=*/true);
  EXPECT_EQ(sweep.cases, 4 * 8 * 64);
  for (const auto& [role, paths] : sweep.paths) {
    EXPECT_EQ(paths.size(), 1u) << TensorRoleName(role) << ": " << ::testing::PrintToString(paths);
    for (const std::string& p : paths) {
      EXPECT_EQ(p.find("fp8-outer"), std::string::npos) << p;  // never quantized activations
      EXPECT_EQ(p.find("fp8-1x128"), std::string::npos) << p;
    }
  }
  // At most one request per output type (bf16 for the column-parallel layers, f32 for the LM
  // head and the row-parallel chunks).
  EXPECT_LE(sweep.requests.size(), 2u) << ::testing::PrintToString(sweep.requests);
  // One mixed-GEMM plan per role: the same split of k for every slice of rows and every batch.
  for (const auto& [role, plans] : sweep.mixed_plans) {
    EXPECT_EQ(plans.size(), 1u) << TensorRoleName(role) << ": " << ::testing::PrintToString(plans);
  }
}

INSTANTIATE_TEST_SUITE_P(Llama31, DeterministicPlanTest,
                         ::testing::Combine(::testing::Values("8b", "405b"),
                                            ::testing::Values("bf16", "fp8", "fp8-block", "int4")));

TEST(DeterministicPlanTest, Bf16LayersAskForOnePinnedAlgorithmPerOutputType) {
  const Sweep sweep = SweepModel("8b", "bf16", /*deterministic=*/true);
  ASSERT_EQ(sweep.requests.size(), 2u) << ::testing::PrintToString(sweep.requests);
  for (const std::string& r : sweep.requests) {
    EXPECT_NE(r.find("no-split-K pinned"), std::string::npos) << r;
    EXPECT_NE(r.find("query m=128 n=4096 k=4096"), std::string::npos) << r;
  }
}

// Every projection of the int4 and fp8 Llama 3.1 shapes is one the mixed GEMM takes: in
// deterministic mode each runs it (one launch over the chunks for o and down) at every degree
// and batch, with exact bf16 activations. The LM head (bf16 / f16 in these presets) stays on
// cuBLASLt.
TEST(DeterministicPlanTest, QuantizedProjectionsRunTheMixedGemm) {
  for (const char* model : {"8b", "405b"}) {
    for (const char* formats : {"int4", "fp8", "fp8-block"}) {
      SCOPED_TRACE(std::string(model) + " " + formats);
      const Sweep sweep = SweepModel(model, formats, /*deterministic=*/true);
      for (TensorRole role : {TensorRole::kQ, TensorRole::kK, TensorRole::kV, TensorRole::kGate,
                              TensorRole::kUp}) {
        EXPECT_EQ(sweep.paths.at(role), std::set<std::string>{"cutlass-mixed-input"})
            << TensorRoleName(role);
      }
      for (TensorRole role : {TensorRole::kO, TensorRole::kDown}) {
        EXPECT_EQ(sweep.paths.at(role), std::set<std::string>{"cutlass-mixed-input/"})
            << TensorRoleName(role);
      }
      EXPECT_EQ(sweep.mixed_plans.at(TensorRole::kQ),
                std::set<std::string>{"decode tile, 4 splits"});
    }
  }
}

// The control: without the flag the choice does follow the batch and the slice (the mixed
// GEMM below 17 rows, the scaled fp8 GEMM above; a split count per slice of rows; a heuristic
// query per shape).
TEST(DeterministicPlanTest, WithoutTheFlagChoicesVaryWithBatchAndDegree) {
  const Sweep fp8 = SweepModel("8b", "fp8", /*deterministic=*/false);
  EXPECT_EQ(fp8.paths.at(TensorRole::kQ),
            (std::set<std::string>{"cutlass-mixed-input", "cublaslt-fp8-outer-vector-scales"}));
  EXPECT_GT(fp8.mixed_plans.at(TensorRole::kQ).size(), 1u)
      << ::testing::PrintToString(fp8.mixed_plans.at(TensorRole::kQ));
  const Sweep bf16 = SweepModel("8b", "bf16", /*deterministic=*/false);
  EXPECT_GT(bf16.requests.size(), 64u);
}

// A GEMM whose epilogue adds a bias (Qwen2's q/k/v) is an algorithm of its own: pinned apart
// from the same types without one, on the same fixed query; the bias's address, like every
// operand's, does not enter a deterministic request.
TEST(DeterministicPlanTest, BiasedGemmsPinTheirOwnAlgorithm) {
  alignas(16) static float bias_a[64], bias_b[64];
  GemmArgs plain;
  plain.type = GemmType::kBF16;
  plain.out = GemmType::kBF16;
  plain.m = 7;
  plain.n = 64;
  plain.k = 128;
  GemmArgs biased = plain;
  biased.bias = bias_a;
  const GemmRequest r_plain = MakeGemmRequest(plain, /*deterministic=*/true);
  const GemmRequest r_biased = MakeGemmRequest(biased, /*deterministic=*/true);
  EXPECT_FALSE(r_plain.bias);
  EXPECT_TRUE(r_biased.bias);
  EXPECT_NE(r_plain, r_biased);
  EXPECT_NE(GemmRequestString(r_biased).find("+bias query m=128 n=4096 k=4096"),
            std::string::npos)
      << GemmRequestString(r_biased);
  GemmArgs other = biased;
  other.bias = bias_b + 1;  // another address, 4-byte aligned only
  other.m = 33;
  EXPECT_EQ(MakeGemmRequest(other, /*deterministic=*/true), r_biased);
}

// --deterministic_tp pins one algorithm per (types, scales); the load checks it against every
// GEMM the plans will run (matmul_plan_load.h: each batch size of the step budget, each
// output type, each weight's N and K), cuBLASLt's cublasLtMatmulAlgoCheck answer scripted
// here. A shape set with one unservable shape is refused at load, naming M, N and K.
// On today's code (before the load check) nothing asked at load: the pinned algorithm's
// refusal came from CublasLtGemm::PinnedAlgorithm at the step that ran the shape (FAILED_
// PRECONDITION at Synchronize), so EXPECT_FALSE(refused.ok()) below had nothing to fail on.
struct PinnedScript {
  int64_t bad_m = 0, bad_n = 0, bad_k = 0;  // the one shape the pinned algorithm cannot take
  std::vector<GemmArgs> asked;
  absl::Status Answer(const GemmArgs& g) {
    asked.push_back(g);
    EXPECT_TRUE(MakeGemmRequest(g, /*deterministic=*/true).pinned);
    if (g.m == bad_m && g.n == bad_n && g.k == bad_k) {
      return absl::FailedPreconditionError("cublasLtMatmulAlgoCheck: CUBLAS_STATUS_NOT_SUPPORTED");
    }
    return absl::OkStatus();
  }
};

LoadedWeight Bf16Weight(const char* what, int64_t n, int64_t k) {
  LoadedWeight w;
  w.role = WeightRoleName(what);
  w.format = TensorFormat::Of(FormatKind::kBF16);
  w.n = n;
  w.k = k;
  w.row_bytes = 2 * k;
  w.data = reinterpret_cast<const void*>(uintptr_t{1} << 24);
  return w;
}

TEST(DeterministicPlanTest, EveryPlannedShapeIsCheckedAtLoadAndOneUnservableIsRefused) {
  const MatMulLoadOptions options{.deterministic = true, .strict_kernels = false,
                                  .rows = MatMulLoadRows(64, /*deterministic=*/true)};
  ASSERT_EQ(options.rows.size(), 64u);  // every batch of the step budget
  PinnedScript script{.bad_m = 37, .bad_n = 1024, .bad_k = 4096};
  const auto answer = [&](const GemmArgs& g) { return script.Answer(g); };

  // The 8B's q [4096, 4096] and k [1024, 4096] at TP 1: q is served at every batch.
  absl::StatusOr<MatMulLoadReport> q =
      CheckMatMulAtLoad(Bf16Weight("model.layers.0.self_attn.q_proj", 4096, 4096), options, answer);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->decoded.empty());
  ASSERT_EQ(script.asked.size(), 128u);  // 64 batches x (bf16 y, f32 y)
  std::set<int64_t> ms;
  for (const GemmArgs& g : script.asked) {
    EXPECT_EQ(g.n, 4096);
    EXPECT_EQ(g.k, 4096);
    ms.insert(g.m);
  }
  EXPECT_EQ(ms.size(), 64u);

  // k's 1024 x 4096 at m = 37 is the one shape the pinned algorithm refuses.
  const absl::StatusOr<MatMulLoadReport> refused =
      CheckMatMulAtLoad(Bf16Weight("model.layers.0.self_attn.k_proj", 1024, 4096), options, answer);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("model.layers.*.self_attn.k_proj (bf16 [1024, 4096])"),
            std::string::npos) << message;
  EXPECT_NE(message.find("M = 37, N = 1024, K = 4096"), std::string::npos) << message;
  EXPECT_NE(message.find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << message;
}

TEST(DeterministicPlanTest, TheDecodedGemmOfAWeightNoExactKernelTakesIsCheckedToo) {
  // fp8 with k = 4104 (not whole 16-column steps) and not in the mixed GEMM's form: in
  // deterministic mode W is decoded to dense bf16 scratch (ldw = k) and multiplied by the
  // pinned bf16 GEMM, whose refusal of m = 5 is a load error naming the path.
  LoadedWeight w = Bf16Weight("blk.0.ffn_down", 4096, 4104);
  w.format = TensorFormat::Of(FormatKind::kFp8PerChannel);
  w.row_bytes = 4104;
  w.facts.w_aligned = false;
  const MatMulLoadOptions options{.deterministic = true, .strict_kernels = false,
                                  .rows = MatMulLoadRows(16, /*deterministic=*/true)};
  PinnedScript script{.bad_m = 5, .bad_n = 4096, .bad_k = 4104};
  const absl::StatusOr<MatMulLoadReport> refused = CheckMatMulAtLoad(
      w, options, [&](const GemmArgs& g) { return script.Answer(g); });
  ASSERT_FALSE(refused.ok());
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("decoded-bf16-gemm"), std::string::npos) << message;
  EXPECT_NE(message.find("M = 5, N = 4096, K = 4104"), std::string::npos) << message;
  ASSERT_FALSE(script.asked.empty());
  EXPECT_EQ(script.asked.back().ldw, 4104);  // the decoded scratch, dense
  EXPECT_EQ(script.asked.back().type, GemmType::kBF16);
}

}  // namespace
}  // namespace tpserve::cuda
