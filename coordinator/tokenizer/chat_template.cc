#include "coordinator/tokenizer/chat_template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

constexpr std::string_view kSmolLmSystemMessage =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// Appends segments, merging adjacent text so segment boundaries match special tokens only.
class SegmentBuilder {
 public:
  void Special(std::string_view marker) { segments_.push_back({true, std::string(marker)}); }
  void Text(std::string_view text) {
    if (text.empty()) return;
    if (!segments_.empty() && !segments_.back().is_special) {
      segments_.back().text.append(text);
    } else {
      segments_.push_back({false, std::string(text)});
    }
  }
  std::vector<PromptSegment> Take() { return std::move(segments_); }

 private:
  std::vector<PromptSegment> segments_;
};

// Python's str.isspace() set, which Jinja's `trim` filter (str.strip) uses.
bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t CodePointAt(std::string_view text, size_t pos, size_t length) {
  const auto b = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i]));
  };
  if (length == 1) return b(0);
  if (length == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (length == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

// Jinja `trim`: strips Python whitespace from both ends. Stops at invalid UTF-8.
std::string_view TrimPythonSpace(std::string_view text) {
  while (!text.empty()) {
    const size_t n = Utf8SequenceLength(text, 0);
    if (n == 0 || !IsPythonSpace(CodePointAt(text, 0, n))) break;
    text.remove_prefix(n);
  }
  while (!text.empty()) {
    size_t start = text.size() - 1;
    while (start > 0 && text.size() - start < 4 &&
           (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    const size_t n = Utf8SequenceLength(text, start);
    if (n != text.size() - start || !IsPythonSpace(CodePointAt(text, start, n))) break;
    text.remove_suffix(n);
  }
  return text;
}

absl::Status CheckRoles(absl::Span<const ChatMessage> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrFormat("messages[%d].role '%s' is not one of system, user, assistant", i, role));
    }
  }
  return absl::OkStatus();
}

void RenderChatMl(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                  const std::optional<std::string>& default_system, SegmentBuilder* out) {
  if (!messages.empty() && messages[0].role != "system" && default_system.has_value()) {
    out->Special("<|im_start|>");
    out->Text(absl::StrCat("system\n", *default_system));
    out->Special("<|im_end|>");
    out->Text("\n");
  }
  for (const ChatMessage& message : messages) {
    out->Special("<|im_start|>");
    out->Text(absl::StrCat(message.role, "\n", message.content));
    out->Special("<|im_end|>");
    out->Text("\n");
  }
  if (add_generation_prompt) {
    out->Special("<|im_start|>");
    out->Text("assistant\n");
  }
}

void RenderLlama3(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                  SegmentBuilder* out) {
  // Meta's template prepends bos_token to the first message only.
  if (!messages.empty()) out->Special("<|begin_of_text|>");
  for (const ChatMessage& message : messages) {
    out->Special("<|start_header_id|>");
    out->Text(message.role);
    out->Special("<|end_header_id|>");
    out->Text(absl::StrCat("\n\n", std::string(TrimPythonSpace(message.content))));
    out->Special("<|eot_id|>");
  }
  if (add_generation_prompt) {
    out->Special("<|start_header_id|>");
    out->Text("assistant");
    out->Special("<|end_header_id|>");
    out->Text("\n\n");
  }
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromJinja(std::string_view template_text) {
  if (template_text.find("<|im_start|>") != std::string_view::npos) {
    std::optional<std::string> default_system;
    constexpr std::string_view kOpen = "<|im_start|>system\n";
    const size_t open = template_text.find(kOpen);
    if (open != std::string_view::npos) {
      const size_t begin = open + kOpen.size();
      const size_t end = template_text.find("<|im_end|>", begin);
      const std::string_view body = template_text.substr(begin, end - begin);
      // Only a literal string counts; "system\n' + message['content']" is not a default.
      if (end != std::string_view::npos && body.find_first_of("'\"{}+") == std::string_view::npos) {
        default_system = std::string(body);
      }
    }
    return ChatTemplate(ChatTemplateKind::kChatMl, std::move(default_system));
  }
  if (template_text.find("<|start_header_id|>") != std::string_view::npos &&
      template_text.find("<|eot_id|>") != std::string_view::npos) {
    return ChatTemplate(ChatTemplateKind::kLlama3, std::nullopt);
  }
  return absl::UnimplementedError(absl::StrCat(
      "chat template not recognised (no <|im_start|> or <|start_header_id|>/<|eot_id|> "
      "markers): ",
      std::string(template_text.substr(0, 120))));
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromName(std::string_view name) {
  if (name == "chatml") return ChatTemplate(ChatTemplateKind::kChatMl, std::nullopt);
  if (name == "smollm2") {
    return ChatTemplate(ChatTemplateKind::kChatMl, std::string(kSmolLmSystemMessage));
  }
  if (name == "llama3") return ChatTemplate(ChatTemplateKind::kLlama3, std::nullopt);
  return absl::UnimplementedError(absl::StrCat("chat template name '", std::string(name),
                                               "' is not one of chatml, smollm2, llama3"));
}

absl::StatusOr<std::vector<PromptSegment>> ChatTemplate::Render(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt) const {
  TP_RETURN_IF_ERROR(CheckRoles(messages));
  SegmentBuilder builder;
  if (kind_ == ChatTemplateKind::kChatMl) {
    RenderChatMl(messages, add_generation_prompt, default_system_message_, &builder);
  } else {
    RenderLlama3(messages, add_generation_prompt, &builder);
  }
  return builder.Take();
}

std::string SegmentsToText(absl::Span<const PromptSegment> segments) {
  std::string text;
  for (const PromptSegment& segment : segments) text += segment.text;
  return text;
}

absl::StatusOr<std::vector<int32_t>> EncodeSegments(const Tokenizer& tokenizer,
                                                    absl::Span<const PromptSegment> segments) {
  std::vector<int32_t> ids;
  for (const PromptSegment& segment : segments) {
    if (segment.is_special) {
      const std::optional<int32_t> id = tokenizer.SpecialTokenId(segment.text);
      if (!id.has_value()) {
        return absl::NotFoundError(absl::StrCat("chat template marker '", segment.text,
                                                "' is not a special token of this vocabulary"));
      }
      ids.push_back(*id);
      continue;
    }
    TP_ASSIGN_OR_RETURN(std::vector<int32_t> text_ids,
                        tokenizer.Encode(segment.text, EncodeOptions{.allow_special = false}));
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  }
  return ids;
}

}  // namespace tpserve
