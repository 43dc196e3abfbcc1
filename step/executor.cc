#include "step/executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpserve {

void ExpertLoad::AddLayer(absl::Span<const int32_t> ids, int64_t num_experts) {
  if (num_experts <= 0 || ids.empty()) return;  // nothing routed: no layer to count
  tokens.resize(num_experts, 0);
  std::vector<int64_t> layer(num_experts, 0);
  for (int32_t id : ids) {
    if (id >= 0 && id < num_experts) ++layer[id];
  }
  for (int64_t e = 0; e < num_experts; ++e) tokens[e] += layer[e];
  ++layers;
  const double mean = static_cast<double>(ids.size()) / static_cast<double>(num_experts);
  imbalance_sum += static_cast<double>(*std::max_element(layer.begin(), layer.end())) / mean;
}

void ExpertLoad::Add(const ExpertLoad& other) {
  if (other.tokens.size() > tokens.size()) tokens.resize(other.tokens.size(), 0);
  for (size_t e = 0; e < other.tokens.size(); ++e) tokens[e] += other.tokens[e];
  layers += other.layers;
  imbalance_sum += other.imbalance_sum;
}

absl::Status ModelExecutor::Recover(const absl::Status& failure) {
  return absl::UnimplementedError(
      absl::StrCat(Describe(), " replaces no rank in place (", failure.message(), ")"));
}

absl::StatusOr<std::vector<SequenceSamples>> ModelExecutor::Sample(
    const StepResult& step, const StepSampling& sampling) {
  if (step.logits_held) {
    return absl::FailedPreconditionError(
        "the step's logits were held by its executor, which does not sample them");
  }
  return SampleStep(step.logits, step.vocab_size, sampling);
}

}  // namespace tpserve
