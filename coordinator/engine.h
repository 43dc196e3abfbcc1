// The serving loop: continuous batching over the paged KV cache. Requests come in from any
// thread; one step thread schedules, runs the model through a ModelExecutor, samples, turns ids
// into whole-character text, applies stop conditions and delivers events.
//
//   Engine engine(options, std::move(executor), &tokenizer);
//   TP_ASSIGN_OR_RETURN(AdmittedRequest request, door.Admit(proto, deadline));
//   TP_ASSIGN_OR_RETURN(int64_t id, engine.Submit(std::move(request), on_event));
//   engine.Start();  ...  engine.Cancel(id);  ...  engine.Stop();
//
// A request with best_of = k runs k sequences of one prompt (GenerationEvent::index 0 .. k-1).
// Sequence 0 computes the prompt; the others are queued once it has, so the prefix cache hands
// them its full blocks and each computes only the prompt's last partial block itself (at most
// block_size_tokens tokens: the recomputed equivalent of a copy-on-write of that block).
// Sequence i samples with seed + i when the request has a seed.
//
// Threading: Submit, Cancel, health and Stop are thread-safe. Events are delivered on the step
// thread, in order for each sequence, each sequence ending with exactly one event whose
// `finish` is set (so a request ends after best_of of them); callbacks must not block.
// Cancel ends every sequence of the request. A cancelled or expired request's KV blocks are
// freed before the next step runs.
#ifndef TPSERVE_COORDINATOR_ENGINE_H_
#define TPSERVE_COORDINATOR_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/admission.h"
#include "coordinator/block_manager.h"
#include "step/executor.h"
#include "coordinator/request.h"
#include "coordinator/scheduler.h"
#include "coordinator/sequence.h"
#include "coordinator/speculative/speculation.h"
#include "coordinator/structured/mask_worker.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

struct EngineOptions {
  SchedulerOptions scheduler;
  int32_t num_kv_blocks = 0;       // from the memory plan (every partition's together)
  // Data-parallel attention: the blocks are kv_partitions pools of num_kv_blocks / kv_partitions,
  // one per rank, a sequence's blocks all in one (coordinator/block_manager.h).
  int32_t kv_partitions = 1;
  int32_t block_size_tokens = 16;
  int64_t context_length = 0;
  std::vector<int32_t> eos_token_ids;
  bool enable_prefix_caching = true;  // reuse the KV of full blocks of earlier prompts
  // Structured output: where the constraint admits exactly one continuation, append its tokens
  // without a sampling step each (they are computed in the next step, as a prompt chunk is).
  bool jump_forward = true;
  // Speculative decoding (coordinator/speculative): with a Proposer given to the engine, a
  // decoding sequence drafts tokens that the next step verifies. Its max_logit_rows must leave
  // room for the drafts' rows (a row per drafted token).
  SpeculativeOptions speculative;
};


// One step as the engine saw it, for metrics.
struct StepTiming {
  double wall_s = 0.0;                 // Execute, from the coordinator
  std::vector<double> rank_compute_s;  // each rank's model time (when the executor reports it)
  int64_t tokens = 0;
  ExpertLoad expert_load;  // how the step routed its tokens (mixtures of experts)
};

struct EngineStats {
  int64_t steps = 0;
  int64_t tokens_computed = 0;
  double step_wall_s = 0.0;   // Execute as the engine sees it: compute + control plane
  double execute_s = 0.0;     // rank 0's model time
  double allreduce_s = 0.0;   // of which inside collectives
  ExpertLoad expert_load;     // every step's routing, added up (mixtures of experts)
  // Tokens looked up in the prefix cache at every admission (a preempted sequence is looked up
  // again when readmitted): found (their KV reused) and not found (computed).
  int64_t prefix_cache_hits_tokens = 0;
  int64_t prefix_cache_misses_tokens = 0;
  int64_t preemptions = 0;    // sequences whose KV was dropped to make room
  // Failed steps after which the executor replaced the lost ranks in place (Recover) and every
  // sequence was recomputed from its tokens, and the seconds from the start of each failed
  // step (its wait for the lost rank included) to the group re-formed: the time without
  // service (the recomputation follows).
  int64_t rank_replacements = 0;
  double rank_replacement_s = 0.0;
  // Weight bytes rank 0 decoded whole to multiply them (a GEMM fallback; 0 normally).
  int64_t decoded_weight_bytes = 0;
  // Structured output: tokens appended by jump-forward (no sampling step of their own), and
  // the time steps waited for token masks after the forward pass (zero when masking is
  // entirely hidden behind it).
  int64_t jump_forward_tokens = 0;
  double mask_wait_s = 0.0;
  // Speculative decoding, as vLLM counts it: tokens drafted, drafts accepted, and tokens
  // emitted by steps that verified drafts (accepted ones plus the one sampled after them).
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_emitted_tokens = 0;
  int64_t spec_verify_steps = 0;
  int32_t free_kv_blocks = 0;    // allocatable: unused plus cached_kv_blocks
  int32_t cached_kv_blocks = 0;  // unreferenced but holding a cached prefix, evicted LRU first
  int32_t total_kv_blocks = 0;
  int64_t running = 0;
  int64_t waiting = 0;
};

class Engine {
 public:
  // `proposer` drafts tokens for speculative decoding (null: none, unless options.speculative
  // asks for prompt lookup, which needs no model and is made here).
  Engine(EngineOptions options, std::unique_ptr<ModelExecutor> executor, const Tokenizer* tokenizer,
         std::unique_ptr<Proposer> proposer = nullptr);
  ~Engine();

  // Queues a request that came through the door (Admitter::Admit, over this engine's
  // kv_capacity()): its best_of() sequences. UNAVAILABLE once the engine has failed.
  absl::StatusOr<int64_t> Submit(AdmittedRequest request, EventCallback on_event);
  // Ends every unfinished sequence of a request with kCancelled (no-op for unknown or
  // finished ids).
  void Cancel(int64_t request_id);

  // Runs steps on a thread of its own until Stop().
  void Start();
  void Stop();
  // One step on the caller's thread (for tests and the single-threaded CLI); false when idle.
  bool Step();

  // The KV cache the door bounds each request by: one partition's, where a sequence lives.
  KvCapacity kv_capacity() const {
    return KvCapacity{options_.num_kv_blocks / options_.kv_partitions,
                      options_.block_size_tokens};
  }
  // OK while serving; the executor's error once a step failed (e.g. a rank died) and the lost
  // ranks were not replaced (ModelExecutor::Recover).
  absl::Status health() const;
  // Whether a failed step's ranks are being replaced right now (the launcher's supervisor
  // waits for it rather than treat the lost rank as the end). Thread-safe.
  bool recovering() const;
  // Asks the step thread to replace lost ranks now (ModelExecutor::Recover), as after a failed
  // step: a rank seen dead while no step ran. Nothing happens when every rank answers; when
  // one is gone and is not replaced, every request fails as after a failed step. Thread-safe.
  void RecoverNow();
  EngineStats stats() const;
  // The scheduler's KV accounting (Scheduler::CheckBlocks). Call between steps, on the thread
  // that runs Step (tests).
  absl::Status CheckKvAccounting() const { return scheduler_.CheckBlocks(); }
  // Called on the step thread after every step that ran; null removes it. Thread-safe.
  void SetStepObserver(std::function<void(const StepTiming&)> observer);

 private:
  void DrainInbox();
  void Finish(Sequence& seq, FinishReason reason, absl::Status error = absl::OkStatus(),
              std::string matched_stop_sequence = "");
  void FailAll(const absl::Status& error);
  // A step failed (`error`, its message starting "model step failed: "): the executor replaces
  // the lost ranks and every sequence is recomputed from its tokens; or, when it cannot,
  // FailAll.
  // `asked` (RecoverNow): no failed step; when every rank answers there is nothing to do.
  // `since`: when the failed step began (the time without service counts from there).
  // True when the ranks were replaced (the sequences wait to be recomputed).
  bool RecoverOrFailAll(const absl::Status& error, bool asked, absl::Time since);
  void PublishStats();
  // Appends one sampled (or forced) token to the sequence and tells the scheduler.
  void Append(Sequence& seq, const SampledToken& token, GenerationEvent& event);
  // Appends the tokens the sequence's constraint forces next (EngineOptions::jump_forward).
  void JumpForward(Sequence& seq, GenerationEvent& event);
  // Starts filling the masks of the batch's constrained sequences that sample this step.
  void StartMasks(const StepBatch& batch);
  // After a step ran: the stats, the step observer and each admission's prefix-cache hits.
  void RecordStep(const ScheduledStep& step, StepResult& result, double wall_s,
                  double mask_wait_s);
  // What the batch's logit rows are for (StepSampling): each sequence's scored prompt tokens
  // and, where it samples, its sampler's stream, penalty history, draft and masks (row 0's
  // filled during the forward pass, the draft rows' along the draft here).
  StepSampling BuildSampling(const StepBatch& batch);
  // Applies what the executor sampled: prompt logprobs, tokens, events, ends.
  void Deliver(const StepSampling& sampling, const std::vector<SequenceSamples>& samples);
  // Appends the sequence's sampled tokens in order (speculative decoding's verified run: the
  // draft's tokens the model chose too, then its own), until one ends the sequence.
  void ApplySampled(Sequence& seq, const SequenceSampling& asked, const SequenceSamples& got,
                    GenerationEvent& event);
  // The next step from the scheduler; with speculation, in its three calls (Plan, then the
  // drafts each decoding sequence wants and the proposer's tokens for the room it got, then
  // Finish): the scheduler never calls back into the engine.
  ScheduledStep ScheduleStep();
  // Drafted tokens sequence `seq_id` wants this step (0 = none), when `num_decoding` running
  // sequences decode in it.
  int64_t WantedDraftTokens(int64_t seq_id, int64_t num_decoding);
  // Fills the slots' drafts (the proposer), cut where a constraint forbids.
  void ProposeDrafts(absl::Span<DraftSlot> slots);
  // Queues the sequences of `seq`'s request that waited for its prompt's KV.
  void ReleaseFollowers(Sequence& seq);

  const EngineOptions options_;
  std::unique_ptr<ModelExecutor> executor_;
  const Tokenizer* tokenizer_;
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;  // step thread only
  MaskWorker masks_;
  std::unique_ptr<Proposer> proposer_;  // null: no speculation
  std::optional<SpeculationPolicy> policy_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Sequence>> inbox_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> cancels_ ABSL_GUARDED_BY(mu_);
  absl::Status health_ ABSL_GUARDED_BY(mu_);
  bool recovering_ ABSL_GUARDED_BY(mu_) = false;
  bool recover_requested_ ABSL_GUARDED_BY(mu_) = false;  // RecoverNow's
  EngineStats stats_ ABSL_GUARDED_BY(mu_);  // a snapshot, published after every step
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::function<void(const StepTiming&)> step_observer_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_ENGINE_H_
