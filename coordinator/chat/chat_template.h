// A model's chat template: its own Jinja source (the GGUF key `tokenizer.chat_template`,
// tokenizer_config.json's `chat_template`, or --chat_template=FILE) run by our Jinja engine
// (coordinator/jinja) exactly as transformers' apply_chat_template runs it, over a chat request
// (proto Chat: messages, tools, tool calls and results, template kwargs).
//
//   TP_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::Create(source, ChatTemplateTokensOf(tok)));
//   TP_ASSIGN_OR_RETURN(RenderedPrompt prompt, chat.Render(request.chat()));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodeRenderedPrompt(tok, prompt));
//
// The promise: every byte that came from the request (message contents, tool definitions and
// arguments, names, template kwargs) is encoded as plain text, even where it spells a special
// token, so a user cannot end a turn or forge a tool result by typing "<|im_end|>". Only the
// template's own text (and the server's bos/eos strings) can become special tokens. The engine
// tracks where each rendered byte came from (jinja::OutputRun::from_input).
//
// What the template sees is what vLLM and transformers pass: `messages` (each {role, content}
// plus `tool_calls` [{id, type: "function", function: {name, arguments: <object>}}] for an
// assistant's calls, `tool_call_id`/`name` for a tool result, `reasoning_content` when set;
// content null for an assistant message with calls and no text), `tools` (null or
// [{type: "function", function: {name, description, parameters}}]), `documents` (null),
// `add_generation_prompt`, the special token strings (bos_token, eos_token, ...), the
// request's template kwargs, and the functions raise_exception and strftime_now.
//
// A template the engine cannot run is refused by Create, with line and column: it is parsed,
// then rendered once over a one-message conversation.
//
// Threading: immutable after Create; Render is safe from many threads.
#ifndef TPSERVE_COORDINATOR_CHAT_CHAT_TEMPLATE_H_
#define TPSERVE_COORDINATOR_CHAT_CHAT_TEMPLATE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/jinja/template.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "proto/tpserve.pb.h"

namespace tpserve {

// The special-token strings a template may print ({{ bos_token }}); empty: the model has none.
struct ChatTemplateTokens {
  std::string bos_token;
  std::string eos_token;
  std::string unk_token;
  std::string pad_token;
};

// The strings of the tokenizer's BOS/EOS/UNK/PAD ids.
ChatTemplateTokens ChatTemplateTokensOf(const Tokenizer& tokenizer);

struct ChatTemplateOptions {
  // What strftime_now formats; the wall clock unless a test fixes it.
  std::function<absl::Time()> now = absl::Now;
  jinja::Limits limits;
};

// A rendered prompt: runs of template text (may hold special tokens) and request text (never
// does), in order.
struct RenderedPrompt {
  std::vector<jinja::OutputRun> runs;
  std::string Text() const;  // the runs joined: what transformers' apply_chat_template returns
};

class ChatTemplate {
 public:
  // `source` is the Jinja text; `tool_use_source`, when given, is the template a request with
  // tools renders with (tokenizer_config.json may name one "tool_use"). INVALID_ARGUMENT
  // "chat template: line L, column C: ..." for a template that does not parse or whose probe
  // render fails.
  static absl::StatusOr<ChatTemplate> Create(std::string_view source, ChatTemplateTokens tokens,
                                             ChatTemplateOptions options = {},
                                             std::optional<std::string> tool_use_source = {});

  // Renders a validated chat (coordinator/validation.h checked roles, tools and arguments).
  // INVALID_ARGUMENT with the template's own message for raise_exception ("Conversation roles
  // must alternate ...") and for runtime errors (with line and column); RESOURCE_EXHAUSTED
  // naming the limit when a render exceeds one.
  absl::StatusOr<RenderedPrompt> Render(const tpserve::v1::Chat& chat) const;

  const std::string& source() const { return source_; }
  // The source that renders requests with tools (the tool_use variant when there is one): it
  // shows how the model writes calls (DetectToolCallFormat).
  const std::string& tool_call_source() const {
    return tool_use_source_.has_value() ? *tool_use_source_ : source_;
  }

 private:
  ChatTemplate(std::string source, jinja::Template main,
               std::optional<std::string> tool_use_source, std::optional<jinja::Template> tool_use,
               ChatTemplateTokens tokens, ChatTemplateOptions options);
  absl::StatusOr<RenderedPrompt> RenderWith(const jinja::Template& tmpl,
                                            const tpserve::v1::Chat& chat) const;

  std::string source_;
  std::optional<std::string> tool_use_source_;
  jinja::Template main_;
  std::optional<jinja::Template> tool_use_;
  ChatTemplateTokens tokens_;
  ChatTemplateOptions options_;
};

// Token ids of a rendered prompt. Special-token text counts only inside template runs; the
// text between special tokens is encoded whole (so ids equal encoding Text() with special
// tokens allowed, whenever no request text spells a special token).
absl::StatusOr<std::vector<int32_t>> EncodeRenderedPrompt(const Tokenizer& tokenizer,
                                                          const RenderedPrompt& prompt);

// The template source inside a tokenizer_config.json: its "chat_template" string, or from a
// list of {name, template} the "default" one (and "tool_use" into *tool_use if present).
// NOT_FOUND when there is none; INVALID_ARGUMENT naming the field when it is malformed.
absl::StatusOr<std::string> ChatTemplateFromTokenizerConfig(std::string_view config_json,
                                                            std::optional<std::string>* tool_use);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_CHAT_CHAT_TEMPLATE_H_
