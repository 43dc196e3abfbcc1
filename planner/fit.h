// Answers "how many GPUs of this type does this model need?" and, for a configuration that
// does not fit, "what would make it fit?" - both by re-running PlanMemory, never by a
// separate estimate.
//
//   TP_ASSIGN_OR_RETURN(FitResult fit, FitGpuCount(inputs, FitOptions{}));
//   if (fit.found) Use(fit.plan->inputs.tp, fit.plan->inputs.pp);
//
// Runnable layouts are tp in ValidTpDegrees (divisors of gcd(heads, kv_heads)) times, when
// allowed, pp in ValidPipelineDegrees (divisors of layers). WeightsOnlyMinGpus is the cruder
// capacity bound that ignores layouts: the fewest devices whose pooled usable memory holds the
// weights (so it can name a count, like 6 for Llama-3.1-405B FP8 on H100s, that no runnable
// layout uses). Thread-safe: pure functions.
#ifndef TPSERVE_PLANNER_FIT_H_
#define TPSERVE_PLANNER_FIT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/memory_plan.h"

namespace tpserve {

struct FitOptions {
  int max_gpus = 64;            // largest tp * pp considered
  bool allow_pipeline = false;  // also consider pp > 1 (else tensor parallelism only)
};

struct FitResult {
  bool found = false;
  std::optional<MemoryPlan> plan;  // the fewest-GPU plan meeting the target (most tp on ties)
  // Why each smaller runnable layout was rejected: "tp=4 pp=1: DOES NOT FIT: ...".
  std::vector<std::string> rejected;
  int64_t weights_only_min_gpus = 0;
};

// Ignores inputs.tp / inputs.pp. Errors only for inputs PlanMemory rejects regardless of the
// layout (bad context, bad formats); a layout that splits a quantization block is skipped
// and listed in `rejected`.
absl::StatusOr<FitResult> FitGpuCount(const PlanInputs& inputs, const FitOptions& options);

// ceil(weight bytes / (device - reserve - safety)): the fewest devices that could hold the
// weights alone if they could be split anywhere. Weight bytes: the checkpoint's, plus on a GPU
// what the CUDA backend holds beyond them (its mixed-input GEMM's scales).
absl::StatusOr<int64_t> WeightsOnlyMinGpus(const PlanInputs& inputs);

struct Suggestion {
  std::string change;  // "8 x h100-80g (tp=8)", "context 4096", "fp8 KV cache", ...
  MemoryPlan plan;     // the re-planned result (plan.meets_target says whether it fits)
};

// For inputs whose plan misses the target: re-plans with more GPUs (FitGpuCount), the longest
// context that fits (a multiple of the KV block), an fp8 KV cache, int4 weights, and the most
// sequences the current layout holds. Each entry is only present when it applies.
absl::StatusOr<std::vector<Suggestion>> SuggestAlternatives(const PlanInputs& inputs,
                                                            const FitOptions& options);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_FIT_H_
