// The one door into the engine. Admitter::Admit takes a public GenerateRequest and does all that
// stands between it and a running sequence: validation (coordinator/validation.h: every field,
// each error naming it), the chat template, tokenizing, the context window, the KV bound, and
// compiling a structured-output constraint (coordinator/structured/compiler.h: on the caller's
// thread, never the engine's, so a slow schema stalls no other request).
// What comes out is an AdmittedRequest: immutable, complete (the prompt's ids and a resolved
// max_new_tokens), and constructible only here, so the engine never sees a request that has not
// passed every check. The gRPC and HTTP servers (through the Frontend) and the terminal chat
// all come in this way.
//
//   Admitter door(&tokenizer, &chat_template, limits, engine.kv_capacity());
//   TP_ASSIGN_OR_RETURN(AdmittedRequest r, door.Admit(proto, deadline));
//   TP_ASSIGN_OR_RETURN(int64_t id, engine.Submit(std::move(r), on_event));
//
// Threading: Admit is const and thread-safe.
#ifndef TPSERVE_COORDINATOR_ADMISSION_H_
#define TPSERVE_COORDINATOR_ADMISSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/request.h"
#include "coordinator/sampling.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/tokenizer/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "coordinator/validation.h"
#include "proto/tpserve.pb.h"

namespace tpserve {

// The whole paged KV cache, in blocks: no sequence may need more than all of it.
struct KvCapacity {
  int64_t num_blocks = 0;
  int64_t block_size_tokens = 16;
  int64_t BlocksFor(int64_t tokens) const {
    return (tokens + block_size_tokens - 1) / block_size_tokens;
  }
};

class AdmittedRequest {
 public:
  AdmittedRequest(const AdmittedRequest&) = default;
  AdmittedRequest(AdmittedRequest&&) = default;
  AdmittedRequest& operator=(const AdmittedRequest&) = delete;
  AdmittedRequest& operator=(AdmittedRequest&&) = delete;

  const std::string& request_id() const { return request_id_; }  // the client's, or made here
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  const SamplingParams& sampling() const { return sampling_; }
  const StopConditions& stop() const { return stop_; }  // max_new_tokens resolved, >= 1
  bool logprobs() const { return logprobs_; }
  bool prompt_logprobs() const { return prompt_logprobs_; }
  // Choices returned (n) and candidates generated (best_of >= n): the engine runs best_of
  // sequences of this prompt; the frontend returns the best n of them.
  int32_t n() const { return n_; }
  int32_t best_of() const { return best_of_; }
  absl::Time deadline() const { return deadline_; }
  // The compiled structured-output constraint; null for free text.
  const std::shared_ptr<const CompiledConstraint>& constraint() const { return constraint_; }

 private:
  friend class Admitter;
  AdmittedRequest() = default;

  std::string request_id_;
  std::vector<int32_t> prompt_ids_;
  SamplingParams sampling_;
  StopConditions stop_;
  bool logprobs_ = false;
  bool prompt_logprobs_ = false;
  int32_t n_ = 1;
  int32_t best_of_ = 1;
  absl::Time deadline_ = absl::InfiniteFuture();
  std::shared_ptr<const CompiledConstraint> constraint_;
};

class Admitter {
 public:
  // The pointers must outlive the admitter. `chat_template` may be null: chat input is then
  // FAILED_PRECONDITION. `constraints` may be null: a constrained request is then
  // FAILED_PRECONDITION.
  Admitter(const Tokenizer* tokenizer, const ChatTemplate* chat_template, ModelLimits limits,
           KvCapacity kv, const ConstraintCompiler* constraints = nullptr);

  // INVALID_ARGUMENT naming the field (ErrorField, base/field_error.h) for any field out of
  // bounds; INVALID_ARGUMENT with ErrorReason "context_length_exceeded" when prompt +
  // max_new_tokens does not fit the window, or naming max_new_tokens when they would need
  // more KV blocks than the whole cache has (no retry can succeed: the request must ask for
  // less); FAILED_PRECONDITION for chat input without a template; the tokenizer's errors; the
  // constraint compiler's (INVALID_ARGUMENT naming the constraint's field).
  absl::StatusOr<AdmittedRequest> Admit(const tpserve::v1::GenerateRequest& request,
                                        absl::Time deadline = absl::InfiniteFuture()) const;

  // The prompt's token ids for any input kind (also what Tokenize and CountTokens return).
  absl::StatusOr<std::vector<int32_t>> BuildPrompt(const ValidatedInput& input) const;

  const ModelLimits& limits() const { return limits_; }
  const KvCapacity& kv_capacity() const { return kv_; }

 private:
  const Tokenizer* const tokenizer_;
  const ChatTemplate* const chat_template_;
  const ModelLimits limits_;
  const KvCapacity kv_;
  const ConstraintCompiler* const constraints_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_ADMISSION_H_
