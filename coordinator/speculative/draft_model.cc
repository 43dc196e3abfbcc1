#include "coordinator/speculative/draft_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tpserve {

DraftModelProposer::DraftModelProposer(std::unique_ptr<ModelExecutor> draft,
                                       DraftModelOptions options)
    : draft_(std::move(draft)), options_(options) {}

std::optional<double> DraftModelProposer::SecondsPerDraftToken(int64_t num_sequences) const {
  return costs_.Seconds(static_cast<double>(std::max<int64_t>(1, num_sequences)));
}

std::string DraftModelProposer::Describe() const {
  return absl::StrCat("draft model (", draft_->Describe(), ")");
}

void DraftModelProposer::Propose(absl::Span<DraftSlot> slots,
                                 absl::Span<const DraftSampling> sampling) {
  struct Active {
    size_t slot;
    std::vector<int32_t> history;  // known tokens, then the drafts so far
  };
  const absl::Time start = absl::Now();
  std::vector<Active> active;
  StepBatch batch;
  int64_t budget = options_.max_tokens_per_step;
  for (size_t i = 0; i < slots.size(); ++i) {
    DraftSlot& slot = slots[i];
    if (static_cast<int64_t>(active.size()) >= options_.max_logit_rows) break;
    std::vector<int32_t>& computed = computed_[slot.seq_id];
    // The draft's KV is good for the longest common prefix of what it computed and the known
    // tokens, short of the last known token, whose logits are needed.
    const int64_t known = static_cast<int64_t>(slot.tokens.size());
    int64_t valid = std::mismatch(computed.begin(), computed.end(), slot.tokens.begin(),
                                  slot.tokens.end()).first - computed.begin();
    valid = std::min(valid, known - 1);
    computed.resize(valid);
    const int64_t catch_up = known - valid;
    if (catch_up > budget) continue;  // a long prompt: catch up in a later step, draft then
    budget -= catch_up;
    const std::vector<int32_t> table(slot.block_table.begin(), slot.block_table.end());
    batch.Add(slot.seq_id, valid, slot.tokens.subspan(valid), table, /*num_logits=*/1);
    active.push_back(Active{i, std::vector<int32_t>(slot.tokens.begin(), slot.tokens.end())});
  }
  // Round r proposes every active slot's draft r (the token at position known + r), drawn
  // where the draft's logits are (ModelExecutor::Sample: rank 0 of the worker processes) with
  // the noise the target will sample that position with: the sampler's draw r ahead, as
  // the target's own row draws it then (logit bias and penalties; no mask, no draw taken).
  for (int64_t round = 0; !active.empty(); ++round) {
    absl::StatusOr<StepResult> result = draft_->Execute(batch);
    ++steps_;
    if (!result.ok()) return;  // no drafts: the target's own step reports a failed rank
    StepSampling proposals;
    for (size_t a = 0; a < active.size(); ++a) {
      const Sampler& sampler = *sampling[active[a].slot].sampler;
      SequenceSampling& p = proposals.sequences.emplace_back();
      p.seq_id = batch.sequences[a].seq_id;
      p.num_rows = 1;
      p.samples = true;
      p.params = sampler.params();
      p.params.top_logprobs = 0;
      p.key = sampler.key();
      p.draws = sampler.draws() + static_cast<uint64_t>(round);
      if (UsesHistory(p.params)) p.history = active[a].history;
    }
    absl::StatusOr<std::vector<SequenceSamples>> drawn = draft_->Sample(*result, proposals);
    if (!drawn.ok()) return;  // as a failed step
    StepBatch next;
    std::vector<Active> still;
    for (size_t a = 0; a < active.size(); ++a) {
      DraftSlot& slot = slots[active[a].slot];
      std::vector<int32_t>& computed = computed_[slot.seq_id];
      const StepBatch::Sequence& s = batch.sequences[a];
      const absl::Span<const int32_t> fed = batch.tokens(s);
      computed.insert(computed.end(), fed.begin(), fed.end());
      const int32_t token = (*drawn)[a].sampled.at(0).id;
      slot.draft.push_back(token);
      if (static_cast<int64_t>(slot.draft.size()) >= slot.max_tokens) continue;
      active[a].history.push_back(token);
      const std::vector<int32_t> table(slot.block_table.begin(), slot.block_table.end());
      next.Add(slot.seq_id, s.end_position(), {token}, table, /*num_logits=*/1);
      still.push_back(std::move(active[a]));
    }
    batch = std::move(next);
    active = std::move(still);
  }
  // What a drafted token cost each sequence this call, catching up included.
  int64_t drafted = 0, drafting = 0;
  for (const DraftSlot& slot : slots) {
    drafted += static_cast<int64_t>(slot.draft.size());
    drafting += slot.draft.empty() ? 0 : 1;
  }
  if (drafted > 0) {
    costs_.Observe(static_cast<double>(drafting),
                   absl::ToDoubleSeconds(absl::Now() - start) / static_cast<double>(drafted));
  }
}

}  // namespace tpserve
