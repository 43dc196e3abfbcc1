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
#include "step/sampling.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/chat/chat_template.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "coordinator/tools/output_parser.h"
#include "coordinator/tools/tool_call_format.h"
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
  // The compiled structured-output constraint; null for free text. A chat with tools (and
  // tool_choice other than none) is constrained by its calls' structural tag.
  const std::shared_ptr<const CompiledConstraint>& constraint() const { return constraint_; }
  // Chat output that is read for tool calls and/or reasoning (coordinator/tools): how each
  // choice's text is parsed (the frontend runs one OutputParser per choice); nullopt: the
  // text is content as generated.
  const std::optional<OutputParser::Options>& output_parsing() const { return output_parsing_; }
  // Whether the text of control tokens the model generates is kept (the formats that mark calls
  // with them: [TOOL_CALLS], <|python_tag|>); otherwise it is dropped. EOS and stop tokens never
  // become text either way.
  bool keep_control_text() const { return keep_control_text_; }
  // Whether the request may be decoded speculatively where the server speculates (default
  // true; GenerateRequest.speculative = false turns it off). Its tokens are the same either
  // way: this only trades the server's work for the request's speed.
  bool speculative() const { return speculative_; }

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
  std::optional<OutputParser::Options> output_parsing_;
  bool keep_control_text_ = false;
  bool speculative_ = true;
};

// How the served model writes tool calls and reasoning: --tool_call_parser (else the format its
// chat template renders calls in, DetectToolCallFormat, else hermes) and --reasoning_parser.
struct OutputFormats {
  ToolCallFormat tool_calls = ToolCallFormat::kHermes;
  std::optional<ReasoningFormat> reasoning;  // nullopt: <think> text stays in the content
};

// A request's prompt: its ids and, for chat input, the rendered template (exactly what the ids
// encode; empty for text and token ids, whose text the caller already has).
struct BuiltPrompt {
  std::vector<int32_t> ids;
  std::string text;
};

class Admitter {
 public:
  // The pointers must outlive the admitter. `chat_template` may be null: chat input is then
  // FAILED_PRECONDITION. `constraints` may be null: a constrained request is then
  // FAILED_PRECONDITION.
  Admitter(const Tokenizer* tokenizer, const ChatTemplate* chat_template, ModelLimits limits,
           KvCapacity kv, const ConstraintCompiler* constraints = nullptr,
           OutputFormats formats = {});

  // INVALID_ARGUMENT naming the field (ErrorField, base/field_error.h) for any field out of
  // bounds; INVALID_ARGUMENT with ErrorReason "context_length_exceeded" when prompt +
  // max_new_tokens does not fit the window, or naming max_new_tokens when they would need
  // more KV blocks than the whole cache has (no retry can succeed: the request must ask for
  // less); FAILED_PRECONDITION for chat input without a template; the tokenizer's errors; the
  // constraint compiler's (INVALID_ARGUMENT naming the constraint's field). A chat with tools:
  // INVALID_ARGUMENT naming chat.tools when it also carries a constraint; FAILED_PRECONDITION
  // naming chat.tool_choice when `required` or a named function cannot be enforced (no
  // compiler, or the format's call marker is a control token the grammar cannot produce;
  // `auto` then runs unconstrained, its calls still parsed).
  absl::StatusOr<AdmittedRequest> Admit(const tpserve::v1::GenerateRequest& request,
                                        absl::Time deadline = absl::InfiniteFuture()) const;

  // The prompt for any input kind (also what Tokenize and CountTokens return).
  absl::StatusOr<BuiltPrompt> BuildPrompt(const ValidatedInput& input) const;

  const ModelLimits& limits() const { return limits_; }
  const KvCapacity& kv_capacity() const { return kv_; }
  const OutputFormats& output_formats() const { return formats_; }

 private:
  // A chat's tools and reasoning: the output parsing, and the tool calls' constraint.
  absl::Status AdmitChatOutput(const ValidatedInput& in, const std::string& prompt_text,
                               absl::Time deadline, AdmittedRequest& r) const;

  const Tokenizer* const tokenizer_;
  const ChatTemplate* const chat_template_;
  const ModelLimits limits_;
  const KvCapacity kv_;
  const ConstraintCompiler* const constraints_;
  const OutputFormats formats_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_ADMISSION_H_
