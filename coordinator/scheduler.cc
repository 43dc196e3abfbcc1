#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpserve {

int64_t StepPlan::num_tokens() const {
  int64_t n = 0;
  for (const ScheduledChunk& c : chunks) n += c.num_tokens;
  return n;
}

Scheduler::Scheduler(const SchedulerOptions& options, BlockManager* blocks)
    : options_(options), blocks_(blocks) {}

absl::Status Scheduler::Add(int64_t seq_id, absl::Span<const int32_t> prompt_ids) {
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
  seqs_[seq_id] = SeqState{{prompt_ids.begin(), prompt_ids.end()}, 0};
  waiting_.push_back(seq_id);
  return absl::OkStatus();
}

void Scheduler::Erase(std::vector<int64_t>& v, int64_t seq_id) {
  v.erase(std::remove(v.begin(), v.end(), seq_id), v.end());
}

bool Scheduler::Preempt(int64_t seq_id, StepPlan& plan) {
  blocks_->Free(seq_id);
  seqs_[seq_id].num_computed = 0;
  Erase(running_, seq_id);
  waiting_.push_front(seq_id);
  plan.preempted.push_back(seq_id);
  return true;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  int64_t budget = options_.max_tokens_per_step;

  // Running sequences keep going; when blocks run short the newest one makes room.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    const int64_t id = running_[i];
    SeqState& s = seqs_[id];
    const int64_t n = std::min(s.num_tokens() - s.num_computed, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!blocks_->CanGrow(id, n)) {
      Preempt(running_.back(), plan);  // may be `id` itself
      continue;                        // retry the same index with more free blocks
    }
    blocks_->Grow(id, n).IgnoreError();  // CanGrow checked
    plan.chunks.push_back({id, s.num_computed, n, s.num_computed + n == s.num_tokens()});
    budget -= n;
    ++i;
  }

  // Admit waiting sequences in order while the budget, the blocks and the batch size allow.
  // A sequence preempted in this very step is not readmitted until the next one.
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    const int64_t id = waiting_.front();
    if (std::find(plan.preempted.begin(), plan.preempted.end(), id) != plan.preempted.end()) break;
    if (!AdmitNext(budget, plan)) break;  // FIFO: don't let later ones jump the queue
  }
  // One-token chunks (decodes) lead the step: a GPU rank attends to that leading run with
  // split-key kernels and to the rest with Hopper's prefill kernels, two launches over two
  // contiguous row ranges (kernels/cuda/flashinfer/flashinfer_attention.h). Nothing else
  // depends on the order: every chunk names its sequence.
  std::stable_partition(plan.chunks.begin(), plan.chunks.end(),
                        [](const ScheduledChunk& c) { return c.num_tokens == 1; });
  return plan;
}

bool Scheduler::AdmitNext(int64_t& budget, StepPlan& plan) {
  const int64_t id = waiting_.front();
  SeqState& s = seqs_[id];
  // Every known token is looked up: a preempted sequence may find its own blocks still cached.
  const PrefixMatch hit = blocks_->MatchPrefix(s.tokens);
  const int64_t n = std::min(s.num_tokens() - hit.num_tokens, budget);
  if (!blocks_->CanAdmit(hit, n)) return false;
  blocks_->Admit(id, hit, n).IgnoreError();  // CanAdmit checked
  s.num_computed = hit.num_tokens;
  waiting_.pop_front();
  running_.push_back(id);
  ScheduledChunk& c = plan.chunks.emplace_back();
  c.seq_id = id;
  c.start_position = s.num_computed;
  c.num_tokens = n;
  c.completes_prompt = s.num_computed + n == s.num_tokens();
  c.admitted = true;
  c.num_cached_tokens = hit.num_tokens;
  budget -= n;
  return true;
}

void Scheduler::Commit(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    auto it = seqs_.find(c.seq_id);
    if (it == seqs_.end()) continue;
    SeqState& s = it->second;
    s.num_computed += c.num_tokens;
    blocks_->MarkComputed(c.seq_id, absl::MakeConstSpan(s.tokens).first(s.num_computed));
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
