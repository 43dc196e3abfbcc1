#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpserve {

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* blocks)
    : options_(options), blocks_(blocks) {}

int64_t Scheduler::SeqState::RowsFor(int64_t n) const {
  const int64_t end = num_computed + n;
  if (scoring()) return std::max<int64_t>(0, end - std::max(num_computed, scored));
  return end == num_tokens() ? 1 : 0;
}

int64_t Scheduler::SeqState::CapToRows(int64_t n, int64_t rows) const {
  if (!scoring()) return RowsFor(n) <= rows ? n : 0;
  // Rows are wanted from max(num_computed, scored) on, one per token.
  return std::clamp<int64_t>(std::max(num_computed, scored) + rows - num_computed, 0, n);
}

absl::Status Scheduler::Add(int64_t seq_id, absl::Span<const int32_t> prompt_ids,
                            bool score_prompt) {
  if (seqs_.count(seq_id)) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", seq_id, " is already scheduled"));
  }
  const int64_t num_tokens = static_cast<int64_t>(prompt_ids.size());
  if (num_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", seq_id, " has ", num_tokens, " tokens, needs at least 1"));
  }
  if (blocks_->BlocksFor(num_tokens) > blocks_->num_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sequence ", seq_id, " needs ", blocks_->BlocksFor(num_tokens), " KV blocks, the cache has ",
        blocks_->num_blocks()));
  }
  SeqState& s = seqs_[seq_id];
  s.tokens.assign(prompt_ids.begin(), prompt_ids.end());
  // The last prompt position's row is the one every sequence samples from; the others are
  // the prompt's scores.
  if (score_prompt) s.score_end = num_tokens - 1;
  waiting_.push_back(seq_id);
  return absl::OkStatus();
}

void Scheduler::Erase(std::vector<int64_t>& v, int64_t seq_id) {
  v.erase(std::remove(v.begin(), v.end(), seq_id), v.end());
}

void Scheduler::Preempt(int64_t seq_id, ScheduledStep& step) {
  blocks_->Free(seq_id);
  seqs_[seq_id].num_computed = 0;
  Erase(running_, seq_id);
  waiting_.push_front(seq_id);
  step.preempted.push_back(seq_id);
}

void Scheduler::AddToBatch(int64_t seq_id, const SeqState& s, int64_t n, StepBatch& batch) const {
  batch.Add(seq_id, s.num_computed, absl::MakeConstSpan(s.tokens).subspan(s.num_computed, n),
            blocks_->BlockTable(seq_id), /*num_logits=*/s.RowsFor(n));
}

ScheduledStep Scheduler::Schedule() {
  ScheduledStep step;
  int64_t budget = options_.max_tokens_per_step;
  int64_t rows = options_.max_logit_rows > 0 ? options_.max_logit_rows : options_.max_num_seqs;
  // (sequence, tokens it computes); the batch is built from them once their order is settled.
  std::vector<std::pair<int64_t, int64_t>> chunks;

  // Running sequences keep going; when blocks run short the newest one makes room. A scoring
  // chunk leaves a row for each running sequence after it.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const int64_t id = running_[i];
    SeqState& s = seqs_[id];
    const int64_t later = static_cast<int64_t>(running_.size() - i - 1);
    const int64_t n = s.CapToRows(std::min(s.num_tokens() - s.num_computed, budget), rows - later);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!blocks_->CanGrow(id, n)) {
      Preempt(running_.back(), step);  // may be `id` itself
      continue;                        // retry the same index with more free blocks
    }
    blocks_->Grow(id, n).IgnoreError();  // CanGrow checked
    chunks.emplace_back(id, n);
    budget -= n;
    rows -= s.RowsFor(n);
    ++i;
  }

  // Admit waiting sequences in order while the budget, the blocks and the batch size allow.
  // A sequence preempted in this very step is not readmitted until the next one.
  while (!waiting_.empty() && budget > 0 && rows > 0 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    const int64_t id = waiting_.front();
    if (std::find(step.preempted.begin(), step.preempted.end(), id) != step.preempted.end()) break;
    const int64_t n = AdmitNext(budget, rows, step);
    if (n == 0) break;  // FIFO: don't let later ones jump the queue
    chunks.emplace_back(id, n);
  }
  // One-token chunks (decodes) lead the step: a GPU rank attends to that leading run with
  // split-key kernels and to the rest with Hopper's prefill kernels, two launches over two
  // contiguous row ranges (kernels/cuda/flashinfer/flashinfer_attention.h). Nothing else
  // depends on the order: every sequence in the batch names itself.
  std::stable_partition(chunks.begin(), chunks.end(),
                        [](const std::pair<int64_t, int64_t>& c) { return c.second == 1; });
  for (const auto& [id, n] : chunks) AddToBatch(id, seqs_.at(id), n, step.batch);
  return step;
}

int64_t Scheduler::AdmitNext(int64_t& budget, int64_t& rows, ScheduledStep& step) {
  const int64_t id = waiting_.front();
  SeqState& s = seqs_[id];
  // Every known token is looked up: a preempted sequence may find its own blocks still cached.
  // A sequence still scoring its prompt needs the rows of what the cache would skip.
  const PrefixMatch hit = s.scoring() ? PrefixMatch{} : blocks_->MatchPrefix(s.tokens);
  s.num_computed = hit.num_tokens;
  const int64_t n = s.CapToRows(std::min(s.num_tokens() - hit.num_tokens, budget), rows);
  if (n <= 0 || !blocks_->CanAdmit(hit, n)) {
    s.num_computed = 0;
    return 0;
  }
  blocks_->Admit(id, hit, n).IgnoreError();  // CanAdmit checked
  waiting_.pop_front();
  running_.push_back(id);
  step.admitted.push_back(Admission{id, hit.num_tokens});
  budget -= n;
  rows -= s.RowsFor(n);
  return n;
}

void Scheduler::Commit(const StepBatch& batch) {
  for (const StepBatch::Sequence& b : batch.sequences) {
    auto it = seqs_.find(b.seq_id);
    if (it == seqs_.end()) continue;
    SeqState& s = it->second;
    s.num_computed += b.num_tokens;
    if (s.scoring()) s.scored = std::max(s.scored, std::min(s.num_computed, s.score_end));
    blocks_->MarkComputed(b.seq_id, absl::MakeConstSpan(s.tokens).first(s.num_computed));
  }
}

void Scheduler::AppendToken(int64_t seq_id, int32_t token_id) {
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end()) it->second.tokens.push_back(token_id);
}

void Scheduler::Remove(int64_t seq_id) {
  blocks_->Free(seq_id);
  Erase(running_, seq_id);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq_id), waiting_.end());
  seqs_.erase(seq_id);
}

}  // namespace tpserve
