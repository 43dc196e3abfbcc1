#include "kernels/cuda/matmul_plan_load.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "base/str_cat.h"

namespace tpserve::cuda {
namespace {

// Where the step's x, y and the decoded W live: scratch and activation buffers, 16-byte
// aligned (deterministic mode stages any operand that is not).
void* AlignedOperand() { return reinterpret_cast<void*>(uintptr_t{1} << 20); }

bool IsScaledFp8(MatMulPath path) {
  return path == MatMulPath::kFp8RowScaledGemm || path == MatMulPath::kFp8BlockScaledGemm;
}

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

std::string Shape(const LoadedWeight& w) {
  return StrCat(w.role, " (", TensorFormatName(w.format), " [", w.n, ", ", w.k, "])");
}

// The cuBLASLt GEMM CudaMatMul runs for `path` at batch m (cuda_matmul.cc's Gemm and
// DecodedGemm, cuda_matmul_fp8.cc); none for the paths that run no cuBLASLt GEMM.
std::optional<GemmArgs> CublasGemmOf(const LoadedWeight& w, MatMulPath path, int64_t m,
                                     bool y_f32) {
  GemmArgs g;
  switch (path) {
    case MatMulPath::kBf16Gemm:
      g = MatMulGemmArgs(GemmType::kBF16, m, w.n, w.k, w.row_bytes / 2, y_f32);
      g.w = w.data;
      break;
    case MatMulPath::kWideGemm: {
      const bool f16 = w.format.kind == FormatKind::kF16;
      g = MatMulGemmArgs(f16 ? GemmType::kF16 : GemmType::kF32, m, w.n, w.k,
                         w.row_bytes / (f16 ? 2 : 4), y_f32);
      g.w = w.data;
      break;
    }
    case MatMulPath::kDecodedGemm:  // W decoded into dense scratch
      g = MatMulGemmArgs(GemmType::kBF16, m, w.n, w.k, w.k, y_f32);
      g.w = AlignedOperand();
      break;
    case MatMulPath::kFp8RowScaledGemm:
    case MatMulPath::kFp8BlockScaledGemm:
      g = Fp8ScaledGemmArgs(path == MatMulPath::kFp8BlockScaledGemm, m, w.n, w.k, w.row_bytes,
                            y_f32);
      g.w = w.data;
      break;
    default: return std::nullopt;
  }
  g.x = AlignedOperand();
  g.y = AlignedOperand();
  return g;
}

// Adds batch m to the fallback of `reason`, or a fallback for it.
void AddFallback(const std::string& reason, int64_t m, std::vector<DecodeFallback>* decoded) {
  for (DecodeFallback& d : *decoded) {
    if (d.reason != reason) continue;
    d.first_m = std::min(d.first_m, m);
    d.last_m = std::max(d.last_m, m);
    return;
  }
  decoded->push_back({reason, m, m});
}

// Asks `answer` for the scaled fp8 GEMM at every m the plan (told of no refusal) gives it to:
// the first UNIMPLEMENTED marks y_f32's output type refused, its message in *refusal.
absl::Status AskFp8Gemm(const LoadedWeight& w, const MatMulLoadOptions& o, GemmAnswer answer,
                        bool y_f32, MatMulLoadReport* report, std::string* refusal) {
  for (int64_t m : o.rows) {
    const MatMulPlan plan = ChooseMatMulPath(w.format, m, w.n, w.k, w.facts, o.deterministic);
    if (!IsScaledFp8(plan.path)) continue;
    const absl::Status st = answer(*CublasGemmOf(w, plan.path, m, y_f32));
    if (st.ok()) continue;
    if (st.code() != absl::StatusCode::kUnimplemented) {
      return absl::Status(st.code(), StrCat(Shape(w), " at m = ", m, ": ", st.message()));
    }
    report->fp8_refused[y_f32] = true;
    *refusal = std::string(st.message());
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

std::string WeightRoleName(std::string_view what) {
  std::string role;
  for (size_t i = 0; i < what.size();) {
    const bool token_start = i == 0 || !IsAlnum(what[i - 1]);
    size_t j = i;
    while (j < what.size() && std::isdigit(static_cast<unsigned char>(what[j])) != 0) ++j;
    if (j > i && token_start && (j == what.size() || !IsAlnum(what[j]))) {
      role += '*';
      i = j;
    } else {
      role += what[i++];
    }
  }
  return role;
}

std::vector<int64_t> MatMulLoadRows(int64_t max_tokens_per_step, bool deterministic) {
  const int64_t bound = max_tokens_per_step > 0 ? max_tokens_per_step : kGpuMaxTokensPerStep;
  std::vector<int64_t> rows;
  if (deterministic) {
    for (int64_t m = 1; m <= std::min<int64_t>(bound, 256); ++m) rows.push_back(m);
    for (int64_t m = 320; m < bound; m += 64) rows.push_back(m);
  } else {
    for (int64_t m : {int64_t{1}, kExactActivationRowsMax, kExactActivationRowsMax + 1}) {
      if (m < bound) rows.push_back(m);
    }
    for (int64_t m = 32; m < bound; m *= 2) rows.push_back(m);
  }
  if (rows.empty() || rows.back() != bound) rows.push_back(bound);
  return rows;
}

absl::StatusOr<MatMulLoadReport> CheckMatMulAtLoad(const LoadedWeight& w,
                                                   const MatMulLoadOptions& o,
                                                   GemmAnswer answer) {
  MatMulLoadReport report;
  std::string refusal[2];
  for (bool y_f32 : {false, true}) {
    if (absl::Status st = AskFp8Gemm(w, o, answer, y_f32, &report, &refusal[y_f32]); !st.ok()) {
      return st;
    }
  }
  // cuBLASLt's words for the reason: its first refusal's (bf16 y, the common output), the same
  // for both output types so that one line covers them.
  const std::string& words = report.fp8_refused[0] ? refusal[0] : refusal[1];
  for (bool y_f32 : {false, true}) {
    OperandFacts facts = w.facts;
    facts.fp8_gemm_refused = report.fp8_refused[y_f32];
    for (int64_t m : o.rows) {
      const MatMulPlan plan = ChooseMatMulPath(w.format, m, w.n, w.k, facts, o.deterministic);
      if (plan.path == MatMulPath::kDecodedGemm) {
        std::string reason = DecodedGemmReason(w.format, m, w.n, w.k, facts, o.deterministic);
        if (facts.fp8_gemm_refused &&
            IsScaledFp8(ChooseMatMulPath(w.format, m, w.n, w.k, w.facts, o.deterministic).path)) {
          reason = StrCat(reason, ": ", words);
        }
        if (o.strict_kernels) {
          return absl::FailedPreconditionError(StrCat(
              "--strict_kernels: ", Shape(w), " would take the ",
              MatMulPathName(MatMulPath::kDecodedGemm), " fallback (W decoded to bf16 on every "
              "call) at m = ", m, ": ", reason));
        }
        AddFallback(reason, m, &report.decoded);
      }
      if (!o.deterministic) continue;
      const std::optional<GemmArgs> gemm = CublasGemmOf(w, plan.path, m, y_f32);
      if (!gemm.has_value()) continue;
      const absl::Status st = answer(*gemm);
      if (st.ok()) continue;
      return absl::FailedPreconditionError(StrCat(
          "deterministic mode cannot run ", Shape(w), ": the pinned ", GemmTypeName(gemm->type),
          " -> ", GemmTypeName(gemm->out), " GEMM (", MatMulPathName(plan.path),
          ") does not take M = ", m, ", N = ", w.n, ", K = ", w.k, ": ", st.message()));
    }
  }
  return report;
}

std::vector<std::string> FallbackLog::Add(const LoadedWeight& w, const MatMulLoadReport& report) {
  std::vector<std::string> lines;
  for (const DecodeFallback& d : report.decoded) {
    if (!said_.emplace(w.role, d.reason).second) continue;
    lines.push_back(StrCat("CudaMatMul: ", Shape(w), ": batches of ", d.first_m, " to ",
                           d.last_m, " rows decode W to bf16 (",
                           MatMulPathName(MatMulPath::kDecodedGemm), "): ", d.reason));
  }
  return lines;
}

}  // namespace tpserve::cuda
