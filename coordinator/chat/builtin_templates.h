// Chat formats for models whose files carry no chat template, as llama.cpp applies them
// (llama_chat_apply_template's built-in formats): a GGUF of a base model, such as the Gemma 3
// 270M file the set-up fetches, is still served with its family's turn markers. Written as
// Jinja, so one engine renders every template; tested byte for byte against llama.cpp's own
// rendering (tests/golden/chat_templates/builtin_golden.json).
//
//   if (auto text = BuiltinChatTemplate(spec.builtin_chat_format)) template_text = *text;
#ifndef TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_
#define TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_

#include <optional>
#include <string_view>

namespace tpserve {

// The Jinja template of one of llama.cpp's built-in formats, by its llama.cpp name (what a
// family's ModelSpec::builtin_chat_format says), or nullopt:
//   gemma   <start_of_turn>user|model ... <end_of_turn>, system messages (trimmed,
//           concatenated) prefixed to the next user turn, every message trimmed; preceded by
//           the BOS token, which llama.cpp's tokenizer adds to such a prompt.
std::optional<std::string_view> BuiltinChatTemplate(std::string_view format);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_
