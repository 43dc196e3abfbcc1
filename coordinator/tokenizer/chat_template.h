// Chat templates: turn a conversation into the prompt a chat model was trained on, as a list
// of segments so that template markers become special tokens while message contents are
// encoded as plain text (a user typing "<|im_end|>" cannot end their turn early).
//
//   TP_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::FromJinja(gguf_chat_template));
//   TP_ASSIGN_OR_RETURN(auto segments, chat.Render(messages, /*add_generation_prompt=*/true));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodeSegments(tokenizer, segments));
//
// Supported: ChatML (SmolLM2, with its default system message when the first message is not
// a system one) and Llama 3 (contents trimmed, as its Jinja template does; the rendering
// starts with <|begin_of_text|>, so do not also ask Encode for a BOS). Rendering reproduces
// the models' Jinja templates exactly for roles system/user/assistant.
//
// Threading: immutable after creation; safe from many threads.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_CHAT_TEMPLATE_H_
#define TPSERVE_COORDINATOR_TOKENIZER_CHAT_TEMPLATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

enum class ChatTemplateKind { kChatMl, kLlama3 };

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A run of the rendered prompt: a template marker to encode as one special token, or text
// to encode with allow_special=false. Adjacent text is always merged into one segment, so
// when no content holds marker text, encoding segment by segment gives the same ids as
// encoding SegmentsToText() with allow_special=true.
struct PromptSegment {
  bool is_special;
  std::string text;
  bool operator==(const PromptSegment& other) const = default;
};

class ChatTemplate {
 public:
  // Recognises the template by its markers (<|im_start|> -> ChatML, <|start_header_id|> and
  // <|eot_id|> -> Llama 3) and takes ChatML's default system message from a literal
  // "<|im_start|>system\n...<|im_end|>" in it. UNIMPLEMENTED if neither marker set is found.
  static absl::StatusOr<ChatTemplate> FromJinja(std::string_view template_text);
  // "chatml" (no default system message), "smollm2", "llama3"; UNIMPLEMENTED otherwise.
  static absl::StatusOr<ChatTemplate> FromName(std::string_view name);

  // INVALID_ARGUMENT naming the message index and role for a role outside
  // system/user/assistant.
  absl::StatusOr<std::vector<PromptSegment>> Render(absl::Span<const ChatMessage> messages,
                                                    bool add_generation_prompt) const;

  ChatTemplateKind kind() const { return kind_; }
  const std::optional<std::string>& default_system_message() const {
    return default_system_message_;
  }

 private:
  ChatTemplate(ChatTemplateKind kind, std::optional<std::string> default_system_message)
      : kind_(kind), default_system_message_(std::move(default_system_message)) {}

  ChatTemplateKind kind_;
  std::optional<std::string> default_system_message_;
};

// The prompt as one string (markers included), e.g. to compare with a Jinja rendering.
std::string SegmentsToText(absl::Span<const PromptSegment> segments);

// Token ids of the prompt. NOT_FOUND naming the marker when a special segment is not a
// control/user-defined token of `tokenizer`.
absl::StatusOr<std::vector<int32_t>> EncodeSegments(const Tokenizer& tokenizer,
                                                    absl::Span<const PromptSegment> segments);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_CHAT_TEMPLATE_H_
