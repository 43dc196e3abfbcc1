// Continuous batching over the paged KV cache. Each step it decides which sequences run and how
// many of their tokens (a decode token, or a chunk of a prompt), within a token budget and the
// free KV blocks. A sequence admitted from the queue first takes the full blocks of its tokens
// that the prefix cache holds and starts computing after them. When blocks run out it preempts
// the newest running sequence: its blocks are freed (those already registered stay cached) and
// it goes back to the front of the queue, to look its tokens up again and recompute the rest.
//
//   Scheduler sched(options, &blocks);
//   sched.Add(seq.id(), &seq.tokens());
//   ScheduledStep step = sched.Schedule();
//   executor->Execute(step.batch);  sched.Commit(step.batch);
//   seq.Append(...);  sched.TokenAppended(seq.id());
//
// Speculative decoding: a running sequence that decodes may carry drafted tokens after its last
// known one. The step is then made in three calls, and the scheduler calls nothing of its
// caller's: Plan places the running sequences and names those that may draft; ReserveDrafts
// makes room for as many drafted tokens as the caller wants for each (never by preempting
// anyone: drafts take only what is spare) and hands back a slot per sequence that got room; the
// caller fills the slots (a proposer), and Finish puts the drafts in the batch with a row of
// logits each, gives back the room of drafts not made, admits from the queue and builds the
// batch. Schedule() is Finish(Plan(), {}). Commit counts only the known token as computed; the
// drafts wait: each appended token that equals the next draft keeps its KV (the token is
// computed), the first that differs drops the rest and gives their blocks back. Only known
// tokens ever reach the prefix cache.
//
// Data-parallel attention (the block manager's partitions, one per rank): a sequence is admitted
// into the partition that caches the longest prefix of it (then the one running the fewest
// sequences, then the one with the most free blocks), grows there, and preempts only within it;
// the batch names each sequence's rank and numbers its blocks in that rank's cache.
//
// The scheduler owns the queues, never a tensor, and no copy of a sequence's tokens: it reads
// the caller's list of each (coordinator/sequence.h), which only the caller appends to. It
// allocates and frees KV blocks through the engine's BlockManager, which it does not own.
// Threading: not thread-safe; driven by the engine's step thread.
#ifndef TPSERVE_COORDINATOR_SCHEDULER_H_
#define TPSERVE_COORDINATOR_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "base/step_budget.h"
#include "coordinator/block_manager.h"
#include "step/step_batch.h"

namespace tpserve {

struct SchedulerOptions {
  int32_t max_num_seqs = 64;            // sequences in one step
  int32_t max_tokens_per_step = kCpuMaxTokensPerStep;  // new tokens (prefill chunks + decodes)
  // Rows of logits one step may return (the executor's bound: its logits buffer is planned for
  // this many); 0 = max_num_seqs. Every sequence wants at most one row, except one that scores
  // its prompt (prompt logprobs), whose chunks are cut to the rows left.
  int32_t max_logit_rows = 0;
};

// A running sequence that may speculate this step: room for max_tokens drafted tokens, for the
// caller to fill.
struct DraftSlot {
  int64_t seq_id = 0;
  absl::Span<const int32_t> tokens;  // its known tokens; the last one is computed this step
  // Its KV blocks, covering the known tokens and max_tokens more.
  absl::Span<const int32_t> block_table;
  int64_t max_tokens = 0;
  std::vector<int32_t> draft;  // out: at most max_tokens tokens to follow `tokens`
};

// A sequence taken from the queue this step (the first time, or again after a preemption).
struct Admission {
  int64_t seq_id = 0;
  int64_t num_cached_tokens = 0;  // its leading tokens found in the prefix cache
};

// The next step: the batch to run, and what the scheduler did to the queues to make it.
struct ScheduledStep {
  // One sequence per running sequence that computes this step. A sequence wants one row of
  // logits (num_logits = 1) exactly when this step puts its last known token in the cache, so
  // that the next token can be sampled; a chunk of a longer prompt wants none.
  StepBatch batch;
  std::vector<Admission> admitted;
  std::vector<int64_t> preempted;  // sequences whose KV was dropped this step
};

// A step between Plan and Finish: the running sequences placed, and what is left of the step.
// Only the scheduler reads it, but for `decoding`.
struct PlannedStep {
  // The running sequences that decode one token this step (not a prompt chunk, not scoring):
  // those that may carry drafts, in batch order.
  std::vector<int64_t> decoding;

 private:
  friend class Scheduler;
  ScheduledStep step;  // preemptions so far
  std::vector<std::pair<int64_t, int64_t>> chunks;  // (sequence, tokens it computes)
  int64_t budget = 0;  // tokens left
  int64_t rows = 0;    // logit rows left
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, BlockManager* blocks);

  // Queues a sequence whose first tokens are known (the prompt). The scheduler reads `tokens`
  // from then on: the list must outlive the sequence's stay (until Remove) and may only grow,
  // by appends each followed by TokenAppended. With `score_prompt`, every prompt position gets
  // a row of logits once (prompt logprobs): its chunks want a row per token, and until the
  // whole prompt has been scored it takes nothing from the prefix cache. INVALID_ARGUMENT if
  // the id is already queued/running or the prompt is empty; RESOURCE_EXHAUSTED if it could
  // never fit in the whole KV cache.
  absl::Status Add(int64_t seq_id, const std::vector<int32_t>* tokens, bool score_prompt = false);

  // Picks the next step. Running sequences first (oldest first), then waiting ones (FIFO).
  // No drafts: Finish(Plan(), {}).
  ScheduledStep Schedule();

  // The same in three calls, for a step whose decoding sequences may carry drafted tokens
  // (speculative decoding). Plan places the running sequences (preempting the newest when
  // blocks run short). ReserveDrafts gives plan.decoding[i] room for up to wanted[i] drafted
  // tokens (0 = none), from what the running sequences left: budget, rows and free blocks,
  // in order; it returns a slot for each that got room, with its tokens and block table.
  // Finish takes the slots with their drafts filled in (at most max_tokens each; the room of
  // the rest goes back), then admits waiting sequences and builds the batch. Plan must be
  // followed by Finish before anything else is called. REQUIRES: wanted.size() ==
  // plan.decoding.size(); `slots` as ReserveDrafts returned them.
  PlannedStep Plan();
  std::vector<DraftSlot> ReserveDrafts(PlannedStep& plan, absl::Span<const int64_t> wanted);
  ScheduledStep Finish(PlannedStep plan, absl::Span<DraftSlot> slots);

  // After the step ran: marks the batch's known tokens as computed, which registers their full
  // blocks in the prefix cache. For each sequence that sampled a token, append it to the
  // sequence's list and call TokenAppended before the next Schedule.
  void Commit(const StepBatch& batch);
  // The sequence's list grew by one known token. After a step with drafts: a token equal to the
  // next draft takes its KV as computed; any other drops the remaining drafts and frees their
  // blocks.
  void TokenAppended(int64_t seq_id);
  // The drafted tokens of the sequence's last step not yet accepted or dropped.
  absl::Span<const int32_t> PendingDraft(int64_t seq_id) const;

  // Removes a sequence wherever it is (finished, cancelled, failed) and frees its blocks.
  void Remove(int64_t seq_id);

  // Every running sequence back to the front of the queue, in its order, its blocks freed and
  // nothing of it computed (its tokens stay): the ranks lost their KV. Returns their ids.
  std::vector<int64_t> PreemptAll();

  // OK when every running sequence holds exactly the KV room of its computed and pending
  // drafted tokens, counted from its block table, no waiting one holds any, and no block is
  // lost; else INTERNAL naming the sequence and the counts. A check for tests, O(blocks).
  absl::Status CheckBlocks() const;

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool Empty() const { return waiting_.empty() && running_.empty(); }

 private:
  struct SeqState {
    const std::vector<int32_t>* tokens = nullptr;  // known: prompt + generated (the caller's)
    int64_t num_computed = 0;     // tokens whose KV is in the cache
    // Prompt scoring: positions [0, score_end) each want a row once; [0, scored) have had it.
    int64_t score_end = 0;
    int64_t scored = 0;
    // Drafted tokens after the known ones whose KV the last step computed (positions
    // num_computed ...), waiting for TokenAppended to accept or drop them.
    std::vector<int32_t> pending;
    int64_t num_tokens() const { return static_cast<int64_t>(tokens->size()); }
    bool scoring() const { return scored < score_end; }
    // Rows of logits a chunk of `n` tokens from num_computed wants.
    int64_t RowsFor(int64_t n) const;
    // The longest chunk of at most `n` tokens that wants at most `rows` rows.
    int64_t CapToRows(int64_t n, int64_t rows) const;
  };

  void Preempt(int64_t seq_id, ScheduledStep& step);
  // Admits the front of the queue if the budget, the rows and the blocks allow, returning the
  // tokens it computes this step; 0 when they do not allow.
  int64_t AdmitNext(int64_t& budget, int64_t& rows, ScheduledStep& step);
  // Its block table as the ranks read it: with partitions, each block numbered in its rank's
  // cache.
  std::vector<int32_t> RankBlockTable(int64_t seq_id) const;
  // The most recently admitted running sequence of `partition`.
  int64_t NewestRunningIn(int32_t partition) const;
  // Adds `n` tokens of `seq_id` from its first uncomputed one to the batch.
  void AddToBatch(int64_t seq_id, const SeqState& s, int64_t n, StepBatch& batch) const;
  // Drops a sequence's pending drafts and gives their blocks back.
  void DropPending(int64_t seq_id, SeqState& s);
  void Erase(std::vector<int64_t>& v, int64_t seq_id);

  const SchedulerOptions options_;
  BlockManager* const blocks_;
  std::unordered_map<int64_t, SeqState> seqs_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;  // in admission order
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SCHEDULER_H_
