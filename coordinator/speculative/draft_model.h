// Draft-model drafting: a smaller model with the target's vocabulary proposes the next K tokens
// one step at a time, through its own ModelExecutor on the same ranks as the target. Its KV
// lives in the same paged pool: the draft's cache has a slot for every block of the target's,
// so one block table (the scheduler's) serves both, and the memory plan sizes the pool for the
// two together (planner/memory_plan.h). Prefix-cache sharing carries over: a block shared by
// two sequences holds the same tokens at the same positions for both models.
//
// Each step, a sequence's first draft step also computes whatever the draft has not seen yet
// (the prompt, the target's corrections); later ones carry one token each. Drafts are chosen
// with the target's sampler's stream at the positions they stand for (its draw that many
// ahead, drawn where the draft's logits are: ModelExecutor::Sample): greedy drafts
// are the draft's argmax, sampled ones share the target's noise, so where the two models agree
// the target draws the very token drafted.
//
//   DraftModelProposer draft(std::move(draft_executor), {.max_tokens_per_step = 512});
//   Engine engine(options, std::move(target), &tokenizer, std::make_unique<...>(...));
//
// Threading: the engine's step thread only.
#ifndef TPSERVE_COORDINATOR_SPECULATIVE_DRAFT_MODEL_H_
#define TPSERVE_COORDINATOR_SPECULATIVE_DRAFT_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/step_budget.h"
#include "coordinator/speculative/speculation.h"
#include "step/executor.h"

namespace tpserve {

struct DraftModelOptions {
  int64_t max_tokens_per_step = kCpuMaxTokensPerStep;  // the draft executor's bound per step
  int64_t max_logit_rows = 64;    // and on rows of logits (sequences per draft step)
  // One draft token's cost relative to a target decode step until the draft's steps have been
  // timed (then SecondsPerDraftToken measures it).
  double assumed_cost_per_token = 0.3;
};

class DraftModelProposer final : public Proposer {
 public:
  DraftModelProposer(std::unique_ptr<ModelExecutor> draft, DraftModelOptions options);

  void Propose(absl::Span<DraftSlot> slots, absl::Span<const DraftSampling> sampling) override;
  void Forget(int64_t seq_id) override { computed_.erase(seq_id); }
  std::optional<double> SecondsPerDraftToken(int64_t num_sequences) const override;
  double assumed_cost_per_token() const override { return options_.assumed_cost_per_token; }
  std::string Describe() const override;

  // Draft steps run so far (for tests and stats).
  int64_t steps() const { return steps_; }

 private:
  const std::unique_ptr<ModelExecutor> draft_;
  const DraftModelOptions options_;
  // Per sequence: the tokens whose draft KV is in the cache (a prefix of what it has fed the
  // draft), checked against the known tokens before each use.
  std::unordered_map<int64_t, std::vector<int32_t>> computed_;
  int64_t steps_ = 0;
  // Seconds per drafted token of a sequence (a call's time over its drafts, catching up
  // included), against the sequences drafting together.
  StepCostModel costs_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SPECULATIVE_DRAFT_MODEL_H_
