// A weight's MatMul plans checked once, at load, instead of discovered at a step: every batch
// size the engine may run is planned as CudaMatMul plans it (ChooseMatMulPath), with the
// device's answers asked up front (whether cuBLASLt has the scaled fp8 GEMM; in deterministic
// mode whether the pinned algorithm takes each GEMM). So
//  * a weight whose MatMuls decode W to bf16 (kDecodedGemm) is reported with the reason, once
//    per (role, reason) (FallbackLog), not per layer or per step;
//  * --strict_kernels refuses it instead: FAILED_PRECONDITION naming the role, the shape and
//    the reason, and the rank does not start;
//  * deterministic mode refuses a GEMM its pinned algorithm cannot run, naming M, N and K,
//    at load rather than at the step that would have run it.
// Pure: the device's answers come through GemmAnswer (CublasLtGemm::Check on a GPU, a table in
// host tests: matmul_plan_load_test.cc, tests/kernels/deterministic_plan_test.cc).
//
//   const LoadedWeight w{.role = WeightRoleName("model.layers.3.mlp.down_proj"), ...};
//   TP_ASSIGN_OR_RETURN(MatMulLoadReport r, CheckMatMulAtLoad(w, options, answer));
//   for (const std::string& line : log.Add(w, r)) std::fprintf(stderr, "%s\n", line.c_str());
//
// Limits: the backend places a matrix without knowing how the model multiplies it, so both
// output types (bf16 activations, f32 logits) are checked over the whole k; the per-chunk
// GEMMs of deterministic row-parallel layers (k / chunks, CudaMatMul::RunChunked) and the
// bias epilogue (set after placement) are not. Thread-safe: pure functions; FallbackLog is a
// value (one caller at a time).
#ifndef TPSERVE_KERNELS_CUDA_MATMUL_PLAN_LOAD_H_
#define TPSERVE_KERNELS_CUDA_MATMUL_PLAN_LOAD_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/step_budget.h"
#include "formats/tensor_format.h"
#include "kernels/cuda/gemm_request.h"
#include "kernels/cuda/matmul_plan.h"

namespace tpserve::cuda {

// The role of a matrix from the name its loader gave it: every dot- or space-separated number
// (a layer, an expert, a head) replaced by "*". "model.layers.3.mlp.experts.17.gate_proj" ->
// "model.layers.*.mlp.experts.*.gate_proj"; "blk.0.attn_q" -> "blk.*.attn_q"; "w13" stays.
std::string WeightRoleName(std::string_view what);

// The batch sizes CheckMatMulAtLoad plans for steps of up to `max_tokens_per_step` rows (<= 0:
// kGpuMaxTokensPerStep, base/step_budget.h). The path depends on m only through
// m <= kExactActivationRowsMax; cuBLASLt's answers may depend on m too. Deterministic mode
// (which records no CUDA graphs, so any batch size runs): every m up to 256, then every
// multiple of 64, and the bound.
// Otherwise (the fp8 GEMMs' heuristic only): 1, 16, 17, the powers of two from 32, and the
// bound. Ascending, distinct, all <= the bound.
std::vector<int64_t> MatMulLoadRows(int64_t max_tokens_per_step, bool deterministic);

// One placed matrix, as the load check sees it.
struct LoadedWeight {
  std::string role;  // WeightRoleName of the loader's name
  TensorFormat format = TensorFormat::Of(FormatKind::kBF16);
  int64_t n = 0, k = 0;        // rows (output features) and columns
  int64_t row_bytes = 0;       // W's row stride (the GEMMs' ldw on its stored form)
  const void* data = nullptr;  // W's address (its alignment enters cuBLASLt's plan)
  OperandFacts facts;          // w_aligned and w_prepared as placed; x_aligned is the step's
};

struct MatMulLoadOptions {
  bool deterministic = false;   // CudaMatMulOptions::deterministic
  bool strict_kernels = false;  // refuse a kDecodedGemm plan instead of reporting it
  std::vector<int64_t> rows;    // the batch sizes to plan: MatMulLoadRows
};

// The device's answer for one GEMM, as CublasLtGemm::Run would give it before running:
// OK, UNIMPLEMENTED (no algorithm), FAILED_PRECONDITION (the pinned algorithm does not take it).
using GemmAnswer = absl::FunctionRef<absl::Status(const GemmArgs&)>;

// Batches of one weight that decode W to bf16 for one reason.
struct DecodeFallback {
  std::string reason;  // DecodedGemmReason, plus cuBLASLt's words where it refused
  int64_t first_m = 0, last_m = 0;  // of the rows planned that take it
  friend bool operator==(const DecodeFallback&, const DecodeFallback&) = default;
};

struct MatMulLoadReport {
  std::vector<DecodeFallback> decoded;  // one per reason, in order of first_m
  // cuBLASLt refused the weight's scaled fp8 GEMM writing bf16 y [0] / f32 y [1]: CudaMatMul
  // takes the bf16 fallback for those at once (and never quantizes x first).
  bool fp8_refused[2] = {false, false};
};

// Plans `w` for every m of options.rows and each output type (bf16, f32): the fp8 scaled
// GEMMs asked of `answer` once per (m, y type) where the plan takes them (any UNIMPLEMENTED
// marks that y type refused for every m, as CudaMatMul remembers a refusal), and in
// deterministic mode every cuBLASLt GEMM of every plan. Errors: FAILED_PRECONDITION naming
// the role, format, [n, k], the batches and the reason when options.strict_kernels and some m
// takes kDecodedGemm; FAILED_PRECONDITION naming the role and M, N, K when a deterministic
// GEMM's answer is not OK; any other error of `answer` with the role and shape in front.
absl::StatusOr<MatMulLoadReport> CheckMatMulAtLoad(const LoadedWeight& w,
                                                   const MatMulLoadOptions& options,
                                                   GemmAnswer answer);

// The lines a rank prints for the decodes of the weights it loads: one per (role, reason),
// the first time that pair is seen.
class FallbackLog {
 public:
  // "CudaMatMul: <role> (<format> [n, k]): batches of <first>..<last> rows decode W to bf16
  // (decoded-bf16-gemm): <reason>" for each fallback of `report` not yet said for w.role.
  std::vector<std::string> Add(const LoadedWeight& w, const MatMulLoadReport& report);

 private:
  std::set<std::pair<std::string, std::string>> said_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MATMUL_PLAN_LOAD_H_
