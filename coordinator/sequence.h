// One sequence of a request, as the engine runs it: its token list (the prompt, then what it
// generated) and what turns sampled tokens into a stream: the sampler's state, the incremental
// detokenizer, the stop matcher, the constraint matcher and the speculation state.
//
//   Sequence seq(id, id, 0, request, on_event, &tokenizer);
//   scheduler.Add(seq.id(), &seq.tokens());  // the scheduler reads this very list
//   seq.Append(token, limits, event);  scheduler.TokenAppended(seq.id());
//   GenerationEvent last = seq.FinishEvent(FinishReason::kEos, absl::OkStatus(), "");
//
// The token list is the one copy: the scheduler keeps a pointer to it, so it grows only here,
// one known token at a time (Append), and never shrinks.
// Threading: none; the engine's step thread owns its sequences.
#ifndef TPSERVE_COORDINATOR_SEQUENCE_H_
#define TPSERVE_COORDINATOR_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "coordinator/admission.h"
#include "coordinator/generation_event.h"
#include "coordinator/speculative/speculation.h"
#include "coordinator/stop_matcher.h"
#include "coordinator/structured/matcher.h"
#include "coordinator/tokenizer/incremental_detokenizer.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "step/sampling.h"

namespace tpserve {

// The model's limits a sequence ends on besides its request's own.
struct SequenceLimits {
  absl::Span<const int32_t> eos_token_ids;
  int64_t context_length = 0;
};

class Sequence {
 public:
  // Sequence `index` of the request whose sequence 0 has id `request_id`; it samples with
  // seed + index when the request is seeded. `tokenizer` must outlive it.
  Sequence(int64_t id, int64_t request_id, int32_t index,
           std::shared_ptr<const AdmittedRequest> request, EventCallback on_event,
           const Tokenizer* tokenizer);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t id() const { return id_; }
  int64_t request_id() const { return request_id_; }  // sequence 0's id
  int32_t index() const { return index_; }            // of the request's best_of sequences
  const AdmittedRequest& request() const { return *request_; }
  // Known tokens: the prompt, then the generated ones. The list's address is stable for the
  // sequence's life (the scheduler holds it).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t num_generated() const { return num_generated_; }
  double cumulative_logprob() const { return cumulative_logprob_; }

  // Appends a sampled (or forced) token and adds what it means to `event`: the token and its
  // text (whole characters, held back while a stop sequence may be starting), or the end it
  // makes (EOS or a stop token, a stop sequence, max_new_tokens or the context length), or the
  // detokenizer's error (kError). Counts the token's logprob. The caller tells the scheduler.
  void Append(const SampledToken& token, const SequenceLimits& limits, GenerationEvent& event);

  // The sequence's last event, for an end `reason`: the text held back (unless it ended on an
  // error or a stop sequence), the constraint's outcome and the usage.
  GenerationEvent FinishEvent(FinishReason reason, absl::Status error,
                              std::string matched_stop_sequence);

  // The engine's bookkeeping, read and written by its step.
  EventCallback on_event;
  Sampler sampler;
  std::optional<ConstraintMatcher> matcher;  // structured output
  std::vector<int32_t> mask;                 // the constraint's mask for the next token
  bool admitted = false;                     // scheduled at least once
  int32_t cached_tokens = 0;  // prompt tokens found in the prefix cache at first admission
  // Sequence 0: the request's other sequences, queued once the prompt's KV is in the cache.
  std::vector<std::unique_ptr<Sequence>> followers;
  // Sequence 0 with prompt_logprobs: the prompt's scores so far, sent with its first token
  // (never when it ends before: partial scores are not sent).
  std::vector<SampledToken> prompt_logprobs;
  // Mixtures of experts: the imbalance of each step this sequence was in, summed.
  double expert_imbalance_sum = 0.0;
  int32_t moe_steps = 0;
  // Speculative decoding: how its drafts fare (the drafts the running step verifies are the
  // scheduler's: Scheduler::PendingDraft).
  SpeculationState spec;

 private:
  const int64_t id_;
  const int64_t request_id_;
  const int32_t index_;
  const std::shared_ptr<const AdmittedRequest> request_;
  std::vector<int32_t> tokens_;
  int32_t num_generated_ = 0;
  double cumulative_logprob_ = 0.0;
  IncrementalDetokenizer detokenizer_;
  StopMatcher stops_;
  absl::Time submitted_ = absl::Now();
  absl::Time first_token_ = absl::InfinitePast();
  absl::Time last_token_ = absl::InfinitePast();
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SEQUENCE_H_
