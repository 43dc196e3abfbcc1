#include "planner/fit.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

std::vector<std::pair<int, int>> Layouts(const ModelSpec& config, const FitOptions& options) {
  std::vector<int> pps = {1};
  if (options.allow_pipeline) pps = ValidPipelineDegrees(config);
  std::vector<std::pair<int, int>> layouts;
  for (int tp : ValidTpDegrees(config)) {
    for (int pp : pps) {
      if (int64_t{tp} * pp <= options.max_gpus) layouts.emplace_back(tp, pp);
    }
  }
  // Fewest GPUs first; among equals, fewer pipeline stages (stages add latency, not speed).
  std::sort(layouts.begin(), layouts.end(), [](const auto& a, const auto& b) {
    const int ga = a.first * a.second, gb = b.first * b.second;
    return ga != gb ? ga < gb : a.second < b.second;
  });
  return layouts;
}

std::string LayoutName(const PlanInputs& in) {
  return StrCat(in.tp * in.pp, " x ", in.device.name, " (tp=", in.tp, ", pp=", in.pp, ")");
}

// The longest context (a multiple of the KV block, shorter than the current) whose plan
// meets the target at the current layout; nullopt when even one block does not.
std::optional<MemoryPlan> LongestFittingContext(const PlanInputs& base) {
  const int64_t block = base.kv_block_size_tokens;
  int64_t lo = 0, hi = (base.max_context_tokens - 1) / block;  // in blocks
  std::optional<MemoryPlan> best;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    PlanInputs in = base;
    in.max_context_tokens = mid * block;
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    if (plan.ok() && plan->meets_target) {
      lo = mid;
      best = *std::move(plan);
    } else {
      hi = mid - 1;
    }
  }
  if (lo == 0) return std::nullopt;
  if (!best || best->inputs.max_context_tokens != lo * block) {
    PlanInputs in = base;
    in.max_context_tokens = lo * block;
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    if (!plan.ok()) return std::nullopt;
    best = *std::move(plan);
  }
  return best;
}

// Projections in int4 (embedding, LM head and norms as they were), group 128 or the largest
// smaller group that the shapes and the layout allow.
std::optional<Suggestion> Int4Weights(const PlanInputs& base) {
  if (BitsPerValue(base.weights[TensorRole::kQ]) <= 4.5) return std::nullopt;
  for (int64_t group : {128, 64, 32}) {
    PlanInputs in = base;
    for (TensorRole role : kAllTensorRoles) {
      if (!IsVectorRole(role) && role != TensorRole::kEmbedding && role != TensorRole::kLmHead &&
          role != TensorRole::kRouter) {
        in.weights[role] = TensorFormat::Int4(group);
      }
    }
    in.weights.preset = StrCat(base.weights.preset, "+int4-g", group);
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    if (plan.ok()) {
      return Suggestion{StrCat("int4-g", group, " projection weights"), *std::move(plan)};
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<int64_t> WeightsOnlyMinGpus(const PlanInputs& inputs) {
  const GpuSpec& d = inputs.device;
  TP_ASSIGN_OR_RETURN(ShardingTable whole,
                      PlanSharding(inputs.model, inputs.weights, 1, 1, WeightDeviceOf(d)));
  const int64_t reserve = inputs.runtime_reserve_bytes.value_or(d.runtime_reserve_bytes);
  const double safety = inputs.safety_fraction.value_or(d.safety_fraction);
  const double usable = (1.0 - safety) * static_cast<double>(d.memory_bytes - reserve);
  if (!(usable > 0)) return absl::InvalidArgumentError("device has no usable memory");
  const int64_t held = whole.checkpoint_bytes + whole.backend_form_bytes;
  return static_cast<int64_t>(std::ceil(static_cast<double>(held) / usable));
}

absl::StatusOr<FitResult> FitGpuCount(const PlanInputs& inputs, const FitOptions& options) {
  PlanInputs in = inputs;
  in.tp = in.pp = 1;
  TP_RETURN_IF_ERROR(PlanMemory(in).status());  // errors that no layout can fix
  FitResult result;
  TP_ASSIGN_OR_RETURN(result.weights_only_min_gpus, WeightsOnlyMinGpus(inputs));
  for (const auto& [tp, pp] : Layouts(inputs.model, options)) {
    in.tp = tp;
    in.pp = pp;
    absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
    const std::string name = StrCat("tp=", tp, " pp=", pp, ": ");
    if (!plan.ok()) {
      result.rejected.push_back(StrCat(name, plan.status().message()));
    } else if (!plan->meets_target) {
      result.rejected.push_back(StrCat(name, plan->verdict));
    } else {
      result.found = true;
      result.plan = *std::move(plan);
      break;
    }
  }
  return result;
}

absl::StatusOr<std::vector<Suggestion>> SuggestAlternatives(const PlanInputs& inputs,
                                                            const FitOptions& options) {
  std::vector<Suggestion> out;
  TP_ASSIGN_OR_RETURN(FitResult fit, FitGpuCount(inputs, options));
  if (fit.found) out.push_back({LayoutName(fit.plan->inputs), *fit.plan});
  absl::StatusOr<MemoryPlan> current = PlanMemory(inputs);
  if (!current.ok()) return out;  // the layout itself is invalid: only a new layout helps
  if (std::optional<MemoryPlan> shorter = LongestFittingContext(inputs)) {
    out.push_back(
        {StrCat("context ", shorter->inputs.max_context_tokens, " tokens"), *std::move(shorter)});
  }
  if (inputs.kv_cache_dtype != FormatKind::kF8E4M3) {
    PlanInputs in = inputs;
    in.kv_cache_dtype = FormatKind::kF8E4M3;
    TP_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(in));
    out.push_back({"fp8 KV cache", std::move(plan)});
  }
  if (std::optional<Suggestion> int4 = Int4Weights(inputs)) out.push_back(*std::move(int4));
  const int64_t most = current->max_concurrent_sequences;
  if (most >= 1 && most < inputs.target_concurrent_sequences) {
    PlanInputs in = inputs;
    in.target_concurrent_sequences = most;
    TP_ASSIGN_OR_RETURN(MemoryPlan plan, PlanMemory(in));
    out.push_back({StrCat(most, " concurrent sequences"), std::move(plan)});
  }
  return out;
}

}  // namespace tpserve
