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

absl::Status Scheduler::Add(int64_t seq_id, const std::vector<int32_t>* tokens,
                            bool score_prompt) {
  if (seqs_.count(seq_id)) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", seq_id, " is already scheduled"));
  }
  const int64_t num_tokens = static_cast<int64_t>(tokens->size());
  if (num_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence ", seq_id, " has ", num_tokens, " tokens, needs at least 1"));
  }
  if (blocks_->BlocksFor(num_tokens) > blocks_->blocks_per_partition()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sequence ", seq_id, " needs ", blocks_->BlocksFor(num_tokens), " KV blocks, ",
        blocks_->num_partitions() > 1 ? "one rank's cache (data-parallel attention)" : "the cache",
        " has ", blocks_->blocks_per_partition()));
  }
  SeqState& s = seqs_[seq_id];
  s.tokens = tokens;
  // The last prompt position's row is the one every sequence samples from; the others are
  // the prompt's scores.
  if (score_prompt) s.score_end = num_tokens - 1;
  waiting_.push_back(seq_id);
  return absl::OkStatus();
}

void Scheduler::Erase(std::vector<int64_t>& v, int64_t seq_id) {
  v.erase(std::remove(v.begin(), v.end(), seq_id), v.end());
}

std::vector<int64_t> Scheduler::PreemptAll() {
  const std::vector<int64_t> running = running_;
  ScheduledStep unused;
  // Newest first to the front, so the queue keeps the running order ahead of the waiting.
  for (auto it = running.rbegin(); it != running.rend(); ++it) Preempt(*it, unused);
  return running;
}

void Scheduler::Preempt(int64_t seq_id, ScheduledStep& step) {
  blocks_->Free(seq_id);
  seqs_[seq_id].num_computed = 0;
  seqs_[seq_id].pending.clear();
  Erase(running_, seq_id);
  waiting_.push_front(seq_id);
  step.preempted.push_back(seq_id);
}

std::vector<int32_t> Scheduler::RankBlockTable(int64_t seq_id) const {
  std::vector<int32_t> table = blocks_->BlockTable(seq_id);
  if (blocks_->num_partitions() > 1) {
    for (int32_t& b : table) b = blocks_->LocalBlock(b);
  }
  return table;
}

void Scheduler::AddToBatch(int64_t seq_id, const SeqState& s, int64_t n, StepBatch& batch) const {
  const absl::Span<const int32_t> known = absl::MakeConstSpan(*s.tokens).subspan(s.num_computed, n);
  StepBatch::Sequence* added;
  if (s.pending.empty()) {
    added = &batch.Add(seq_id, s.num_computed, known, RankBlockTable(seq_id), s.RowsFor(n));
    added->samples = s.num_computed + n == s.num_tokens();
  } else {
    // A decode token and its drafts: a row for each, to verify every draft and sample after
    // them.
    std::vector<int32_t> tokens(known.begin(), known.end());
    tokens.insert(tokens.end(), s.pending.begin(), s.pending.end());
    added = &batch.Add(seq_id, s.num_computed, tokens, RankBlockTable(seq_id),
                       static_cast<int64_t>(tokens.size()));
    added->samples = true;
    added->num_drafts = static_cast<int64_t>(s.pending.size());
  }
  if (blocks_->num_partitions() > 1) added->attention_rank = blocks_->PartitionOf(seq_id);
}

int64_t Scheduler::NewestRunningIn(int32_t partition) const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (blocks_->PartitionOf(*it) == partition) return *it;
  }
  return -1;  // not reached: the sequence asking is running there
}

void Scheduler::DropPending(int64_t seq_id, SeqState& s) {
  s.pending.clear();
  blocks_->Shrink(seq_id, s.num_computed);
}

ScheduledStep Scheduler::Schedule() { return Finish(Plan(), {}); }

PlannedStep Scheduler::Plan() {
  PlannedStep plan;
  ScheduledStep& step = plan.step;
  // Drafts the engine did not settle (a sequence that stopped mid-verification) are stale.
  for (int64_t id : running_) {
    SeqState& s = seqs_.at(id);
    if (!s.pending.empty()) DropPending(id, s);
  }
  int64_t& budget = plan.budget;
  int64_t& rows = plan.rows;
  budget = options_.max_tokens_per_step;
  rows = options_.max_logit_rows > 0 ? options_.max_logit_rows : options_.max_num_seqs;
  // (sequence, tokens it computes); the batch is built from them once their order is settled.
  std::vector<std::pair<int64_t, int64_t>>& chunks = plan.chunks;

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
      // The newest sequence of its partition (the only blocks it can take): may be `id` itself.
      Preempt(NewestRunningIn(blocks_->PartitionOf(id)), step);
      continue;  // retry the same index with more free blocks
    }
    blocks_->Grow(id, n).IgnoreError();  // CanGrow checked
    chunks.emplace_back(id, n);
    budget -= n;
    rows -= s.RowsFor(n);
    ++i;
  }
  for (const auto& [id, n] : chunks) {
    const SeqState& s = seqs_.at(id);
    if (n == 1 && s.num_tokens() - s.num_computed == 1 && !s.scoring()) plan.decoding.push_back(id);
  }
  return plan;
}

std::vector<DraftSlot> Scheduler::ReserveDrafts(PlannedStep& plan,
                                                absl::Span<const int64_t> wanted) {
  // From what the running sequences left: budget, rows and free blocks. Never by preempting,
  // and before admitting anyone (a running stream's speed comes first).
  std::vector<DraftSlot> slots;
  for (size_t i = 0; i < plan.decoding.size() && i < wanted.size(); ++i) {
    const int64_t id = plan.decoding[i];
    const SeqState& s = seqs_.at(id);
    int64_t k = std::min({wanted[i], plan.budget, plan.rows});
    while (k > 0 && !blocks_->CanGrow(id, k)) --k;
    if (k <= 0) continue;
    blocks_->Grow(id, k).IgnoreError();  // CanGrow checked
    plan.budget -= k;
    plan.rows -= k;
    DraftSlot& slot = slots.emplace_back();
    slot.seq_id = id;
    slot.tokens = *s.tokens;
    slot.max_tokens = k;
  }
  // After every Grow: a table read earlier could have moved.
  for (DraftSlot& slot : slots) slot.block_table = blocks_->BlockTable(slot.seq_id);
  return slots;
}

ScheduledStep Scheduler::Finish(PlannedStep plan, absl::Span<DraftSlot> slots) {
  ScheduledStep step = std::move(plan.step);
  std::vector<std::pair<int64_t, int64_t>> chunks = std::move(plan.chunks);
  int64_t budget = plan.budget, rows = plan.rows;
  // The drafts made: the room of those not made goes back.
  for (DraftSlot& slot : slots) {
    SeqState& s = seqs_.at(slot.seq_id);
    if (static_cast<int64_t>(slot.draft.size()) > slot.max_tokens) slot.draft.resize(slot.max_tokens);
    const int64_t unused = slot.max_tokens - static_cast<int64_t>(slot.draft.size());
    s.pending = std::move(slot.draft);
    blocks_->Shrink(slot.seq_id, s.num_tokens() + static_cast<int64_t>(s.pending.size()));
    budget += unused;
    rows += unused;
  }
  for (auto& [id, n] : chunks) n += static_cast<int64_t>(seqs_.at(id).pending.size());

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
  // contiguous row ranges (kernels/cuda/flashinfer/flashinfer_attention.h). A decode with
  // drafts is a multi-token chunk and goes with the rest. Nothing else depends on the order:
  // every sequence in the batch names itself.
  std::stable_partition(chunks.begin(), chunks.end(),
                        [](const std::pair<int64_t, int64_t>& c) { return c.second == 1; });
  // Data-parallel attention: each rank's sequences one run, in rank order (StepBatch's rule),
  // its decodes still first.
  if (blocks_->num_partitions() > 1) {
    std::stable_sort(chunks.begin(), chunks.end(),
                     [&](const std::pair<int64_t, int64_t>& a,
                         const std::pair<int64_t, int64_t>& b) {
                       return blocks_->PartitionOf(a.first) < blocks_->PartitionOf(b.first);
                     });
  }
  for (const auto& [id, n] : chunks) {
    const SeqState& s = seqs_.at(id);
    AddToBatch(id, s, n - static_cast<int64_t>(s.pending.size()), step.batch);
  }
  return step;
}

int64_t Scheduler::AdmitNext(int64_t& budget, int64_t& rows, ScheduledStep& step) {
  const int64_t id = waiting_.front();
  SeqState& s = seqs_[id];
  // Every known token is looked up: a preempted sequence may find its own blocks still cached.
  // A sequence still scoring its prompt needs the rows of what the cache would skip.
  // With partitions (data-parallel attention), in each: the sequence goes where the longest
  // prefix is cached, then where the fewest sequences run, then where the most blocks are free.
  const int32_t partitions = blocks_->num_partitions();
  std::vector<PrefixMatch> hits;
  std::vector<int64_t> running(partitions, 0);
  for (int32_t p = 0; p < partitions; ++p) {
    hits.push_back(blocks_->MatchPrefix(s.scoring() ? absl::Span<const int32_t>() : *s.tokens, p));
  }
  if (partitions > 1) {
    for (int64_t r : running_) ++running[blocks_->PartitionOf(r)];
    std::stable_sort(hits.begin(), hits.end(), [&](const PrefixMatch& a, const PrefixMatch& b) {
      if (a.num_tokens != b.num_tokens) return a.num_tokens > b.num_tokens;
      if (running[a.partition] != running[b.partition]) {
        return running[a.partition] < running[b.partition];
      }
      return blocks_->num_free_blocks(a.partition) > blocks_->num_free_blocks(b.partition);
    });
  }
  const PrefixMatch* chosen = nullptr;
  int64_t n = 0;
  for (const PrefixMatch& hit : hits) {
    s.num_computed = hit.num_tokens;
    n = s.CapToRows(std::min(s.num_tokens() - hit.num_tokens, budget), rows);
    if (n > 0 && blocks_->CanAdmit(hit, n)) {
      chosen = &hit;
      break;
    }
  }
  if (chosen == nullptr) {
    s.num_computed = 0;
    return 0;
  }
  const PrefixMatch& hit = *chosen;
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
    s.num_computed += b.num_tokens - static_cast<int64_t>(s.pending.size());
    if (s.scoring()) s.scored = std::max(s.scored, std::min(s.num_computed, s.score_end));
    blocks_->MarkComputed(b.seq_id, absl::MakeConstSpan(*s.tokens).first(s.num_computed));
  }
}

void Scheduler::TokenAppended(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqState& s = it->second;
  if (s.pending.empty()) return;
  const int32_t token_id = s.tokens->back();
  // The token lands where the first pending draft was computed: same token, same KV.
  if (token_id != s.pending.front() || s.num_computed != s.num_tokens() - 1) {
    DropPending(seq_id, s);
    return;
  }
  s.pending.erase(s.pending.begin());
  ++s.num_computed;
  blocks_->MarkComputed(seq_id, absl::MakeConstSpan(*s.tokens).first(s.num_computed));
}

absl::Status Scheduler::CheckBlocks() const {
  for (int64_t id : running_) {
    const SeqState& s = seqs_.at(id);
    const int64_t held = s.num_computed + static_cast<int64_t>(s.pending.size());
    const int64_t table = static_cast<int64_t>(blocks_->BlockTable(id).size());
    if (blocks_->NumTokens(id) != held || table != blocks_->BlocksFor(held)) {
      return absl::InternalError(absl::StrCat(
          "sequence ", id, " holds ", table, " blocks for ", blocks_->NumTokens(id),
          " tokens; its ", s.num_computed, " computed and ", s.pending.size(),
          " drafted tokens need ", blocks_->BlocksFor(held), " blocks"));
    }
  }
  for (int64_t id : waiting_) {
    if (blocks_->Contains(id)) {
      return absl::InternalError(absl::StrCat("waiting sequence ", id, " holds KV blocks"));
    }
  }
  if (blocks_->num_free_blocks() + blocks_->num_used_blocks() != blocks_->num_blocks()) {
    return absl::InternalError(absl::StrCat(
        blocks_->num_free_blocks(), " free and ", blocks_->num_used_blocks(), " used blocks of ",
        blocks_->num_blocks()));
  }
  return absl::OkStatus();
}

absl::Span<const int32_t> Scheduler::PendingDraft(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.pending;
}

void Scheduler::Remove(int64_t seq_id) {
  blocks_->Free(seq_id);
  Erase(running_, seq_id);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq_id), waiting_.end());
  seqs_.erase(seq_id);
}

}  // namespace tpserve
