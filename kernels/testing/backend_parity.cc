#include "kernels/testing/backend_parity.h"

#include <algorithm>

#include "kernels/testing/parity_cases.h"
#include "kernels/testing/parity_util.h"

namespace tpserve {

std::vector<ParityResult> RunBackendParity(Backend& candidate, Backend& reference,
                                           const ParityOptions& options) {
  parity::ParityContext ctx(candidate, reference, options);
  parity::RunMatMulCases(ctx);
  parity::RunOpCases(ctx);
  parity::RunAttentionCases(ctx);
  return ctx.TakeResults();
}

std::vector<ParityResult> RunStepBatchParity(Backend& candidate, Backend& reference) {
  const ParityOptions all;
  parity::ParityContext ctx(candidate, reference, all);
  parity::RunStepBatchCases(ctx);
  return ctx.TakeResults();
}

int64_t CountParityFailures(const std::vector<ParityResult>& results) {
  return std::count_if(results.begin(), results.end(), [](const ParityResult& r) {
    return r.outcome == ParityOutcome::kFailed;
  });
}

void PrintParityTable(const std::vector<ParityResult>& results, std::FILE* out,
                      bool failures_only) {
  int64_t ok = 0, failed = 0, unsupported = 0;
  std::fprintf(out, "%-22s %-32s %-58s %10s %10s  %s\n", "op", "dtype", "shape", "error", "bound",
               "result");
  for (const ParityResult& r : results) {
    const char* verdict = "ok";
    switch (r.outcome) {
      case ParityOutcome::kOk: ++ok; break;
      case ParityOutcome::kFailed: ++failed; verdict = "FAILED"; break;
      case ParityOutcome::kNotSupported: ++unsupported; verdict = "not supported"; break;
    }
    if (failures_only && r.outcome != ParityOutcome::kFailed) continue;
    std::fprintf(out, "%-22s %-32s %-58s %10.3e %10.3e  %s%s%s\n", r.op.c_str(), r.dtype.c_str(),
                 r.shape.c_str(), r.error, r.bound, verdict, r.detail.empty() ? "" : ": ",
                 r.detail.c_str());
  }
  std::fprintf(out, "parity: %lld ok, %lld failed, %lld not supported (%zu cases)\n",
               static_cast<long long>(ok), static_cast<long long>(failed),
               static_cast<long long>(unsupported), results.size());
}

}  // namespace tpserve
