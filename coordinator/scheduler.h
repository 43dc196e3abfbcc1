// Continuous batching over the paged KV cache. Each step it decides which sequences run and how
// many of their tokens (a decode token, or a chunk of a prompt), within a token budget and the
// free KV blocks. A sequence admitted from the queue first takes the full blocks of its tokens
// that the prefix cache holds and starts computing after them. When blocks run out it preempts
// the newest running sequence: its blocks are freed (those already registered stay cached) and
// it goes back to the front of the queue, to look its tokens up again and recompute the rest.
//
//   Scheduler sched(options, &blocks);
//   sched.Add(seq_id, prompt_ids);  StepPlan plan = sched.Schedule();  ...  sched.Commit(plan);
//
// The scheduler owns the queues and a copy of each sequence's token ids, never a tensor; it
// allocates and frees KV blocks through the engine's BlockManager, which it does not own.
// Threading: not thread-safe; driven by the engine's step thread.
#ifndef TPSERVE_COORDINATOR_SCHEDULER_H_
#define TPSERVE_COORDINATOR_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "coordinator/block_manager.h"

namespace tpserve {

struct SchedulerOptions {
  int32_t max_num_seqs = 64;            // sequences in one step
  int32_t max_tokens_per_step = 512;    // new tokens (prefill chunks + decodes) in one step
};

struct ScheduledChunk {
  int64_t seq_id = 0;
  int64_t start_position = 0;  // first token of the chunk (== tokens already in the KV cache)
  int64_t num_tokens = 0;      // new tokens this step
  bool completes_prompt = false;  // after this chunk every known token is in the cache: sample
  // Set on the chunk that admits a waiting sequence (first time or after a preemption).
  bool admitted = false;
  // On that chunk: the leading tokens found in the prefix cache (== start_position); else 0.
  int64_t num_cached_tokens = 0;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<int64_t> preempted;  // sequences whose KV was dropped this step
  int64_t num_tokens() const;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, BlockManager* blocks);

  // Queues a sequence whose first tokens are known (the prompt); the scheduler keeps a copy.
  // INVALID_ARGUMENT if the id is already queued/running or the prompt is empty;
  // RESOURCE_EXHAUSTED if it could never fit in the whole KV cache.
  absl::Status Add(int64_t seq_id, absl::Span<const int32_t> prompt_ids);

  // Picks the next step. Running sequences first (oldest first), then waiting ones (FIFO).
  StepPlan Schedule();

  // After the step ran: marks the chunks' tokens as computed, which registers their full blocks
  // in the prefix cache. For each sequence that sampled a token, call AppendToken before the
  // next Schedule.
  void Commit(const StepPlan& plan);
  void AppendToken(int64_t seq_id, int32_t token_id);

  // Removes a sequence wherever it is (finished, cancelled, failed) and frees its blocks.
  void Remove(int64_t seq_id);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool Empty() const { return waiting_.empty() && running_.empty(); }

 private:
  struct SeqState {
    std::vector<int32_t> tokens;  // known tokens: prompt + generated
    int64_t num_computed = 0;     // tokens whose KV is in the cache
    int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  };

  bool Preempt(int64_t seq_id, StepPlan& plan);
  // Admits the front of the queue if the budget and the blocks allow: false when they do not.
  bool AdmitNext(int64_t& budget, StepPlan& plan);
  void Erase(std::vector<int64_t>& v, int64_t seq_id);

  const SchedulerOptions options_;
  BlockManager* const blocks_;
  std::unordered_map<int64_t, SeqState> seqs_;
  std::deque<int64_t> waiting_;
  std::vector<int64_t> running_;  // in admission order
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SCHEDULER_H_
