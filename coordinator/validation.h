// Every field of a public GenerateRequest checked, each error naming the field (as structured
// data: base/field_error.h), the value and the bound. The first step of the door
// (coordinator/admission.h), which then builds the prompt and checks the window and the KV.
//
//   TP_ASSIGN_OR_RETURN(ValidatedInput in, ValidateGenerateRequest(proto, limits));
//
// Thread-safe: pure functions.
#ifndef TPSERVE_COORDINATOR_VALIDATION_H_
#define TPSERVE_COORDINATOR_VALIDATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/request.h"
#include "step/sampling.h"
#include "coordinator/structured/constraint.h"
#include "google/protobuf/message.h"
#include "proto/tpserve.pb.h"

namespace tpserve {

struct ModelLimits {
  int64_t vocab_size = 0;
  int64_t context_length = 0;        // prompt + generated tokens per sequence
  int32_t max_stop_sequences = 16;
  int32_t max_stop_sequence_bytes = 256;
  int32_t max_prompt_bytes = 1 << 20;
  int32_t max_chat_messages = 512;
};

// What the request asks for, each field within its bounds; the prompt not yet tokenized.
struct ValidatedInput {
  enum class Kind { kText, kChat, kTokenIds } kind = Kind::kText;
  std::string text;
  tpserve::v1::Chat chat;  // kChat: messages, tools and tool choice, each checked
  std::vector<int32_t> token_ids;
  bool allow_special_tokens = false;
  std::optional<int32_t> max_new_tokens;  // absent: fill the context window
  std::string request_id;                 // empty: the door makes one
  SamplingParams sampling;
  std::vector<std::string> stop_sequences;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool logprobs = false;
  bool prompt_logprobs = false;
  bool speculative = true;  // GenerateRequest.speculative (unset: true)
  int32_t n = 1;        // choices returned, in [1, kMaxChoices]
  int32_t best_of = 1;  // candidates generated, in [n, kMaxChoices]
  ConstraintSpec constraint;  // kind kNone: free text
};

// The most choices (n) and candidates (best_of) one request may ask for.
inline constexpr int32_t kMaxChoices = 16;

// Parses a request message from its wire bytes. Protobuf rejects a string field holding invalid
// UTF-8 without saying which; this says: INVALID_ARGUMENT naming the field by its proto path
// ("chat.messages[1].content") and the offset of the first bad byte. Bytes that are no message
// of that type at all are INVALID_ARGUMENT too.
absl::Status ParseRequestBytes(std::string_view wire, google::protobuf::Message* out);

absl::StatusOr<ValidatedInput> ValidateGenerateRequest(const tpserve::v1::GenerateRequest& proto,
                                                       const ModelLimits& limits);

// The ErrorReason (base/field_error.h) of a prompt + max_new_tokens that does not fit.
inline constexpr char kContextLengthExceeded[] = "context_length_exceeded";

// Resolves max_new_tokens against the window. INVALID_ARGUMENT starting with
// "context_length_exceeded" (also its ErrorReason) and giving both numbers when prompt +
// max_new_tokens does not fit; never truncates.
absl::StatusOr<int32_t> CheckContextWindow(int64_t prompt_tokens,
                                           std::optional<int32_t> max_new_tokens,
                                           const ModelLimits& limits);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_VALIDATION_H_
