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

absl::Status Scheduler::Add(int64_t seq_id, int64_t num_tokens) {
  if (seqs_.count(seq_id)) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", seq_id, " is already scheduled"));
  }
  if (num_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", seq_id, " has ", num_tokens, " tokens, needs at least 1"));
  }
  if (blocks_->BlocksFor(num_tokens) > blocks_->num_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sequence ", seq_id, " needs ", blocks_->BlocksFor(num_tokens), " KV blocks, the cache has ",
        blocks_->num_blocks()));
  }
  seqs_[seq_id] = SeqState{num_tokens, 0};
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
    const int64_t n = std::min(s.num_tokens - s.num_computed, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!blocks_->CanGrow(id, n)) {
      Preempt(running_.back(), plan);  // may be `id` itself
      continue;                        // retry the same index with more free blocks
    }
    blocks_->Grow(id, n).IgnoreError();  // CanGrow checked
    plan.chunks.push_back({id, s.num_computed, n, s.num_computed + n == s.num_tokens});
    budget -= n;
    ++i;
  }

  // Admit waiting sequences in order while the budget, the blocks and the batch size allow.
  // A sequence preempted in this very step is not readmitted until the next one.
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    const int64_t id = waiting_.front();
    if (std::find(plan.preempted.begin(), plan.preempted.end(), id) != plan.preempted.end()) break;
    SeqState& s = seqs_[id];
    const int64_t n = std::min(s.num_tokens - s.num_computed, budget);
    if (!blocks_->CanGrow(id, n)) break;  // FIFO: don't let later ones jump the queue
    blocks_->Grow(id, n).IgnoreError();
    waiting_.pop_front();
    running_.push_back(id);
    plan.chunks.push_back({id, s.num_computed, n, s.num_computed + n == s.num_tokens});
    budget -= n;
  }
  return plan;
}

void Scheduler::Commit(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    auto it = seqs_.find(c.seq_id);
    if (it != seqs_.end()) it->second.num_computed += c.num_tokens;
  }
}

void Scheduler::AppendToken(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it != seqs_.end()) ++it->second.num_tokens;
}

void Scheduler::Remove(int64_t seq_id) {
  blocks_->Free(seq_id);
  Erase(running_, seq_id);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq_id), waiting_.end());
  seqs_.erase(seq_id);
}

}  // namespace tpserve
