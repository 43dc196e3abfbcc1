// Chat formats for models whose files carry no chat template, as llama.cpp applies them
// (llama_chat_apply_template's built-in formats): a GGUF of a base model, such as the Gemma 3
// 270M file the set-up fetches, is still served with its family's turn markers. Written as
// Jinja, so one engine renders every template; tested byte for byte against llama.cpp's own
// rendering (tests/golden/chat_templates/builtin_golden.json).
//
//   if (auto text = BuiltinChatTemplate(spec.family)) template_text = std::string(*text);
#ifndef TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_
#define TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_

#include <optional>
#include <string_view>

namespace tpserve {

// The template for a model family (ModelSpec::family) with a built-in format, or nullopt:
//   gemma2, gemma3   llama.cpp's "gemma": <start_of_turn>user|model ... <end_of_turn>, system
//                    messages (trimmed, concatenated) prefixed to the next user turn, every
//                    message trimmed; preceded by the BOS token, which llama.cpp's tokenizer
//                    adds to such a prompt.
std::optional<std::string_view> BuiltinChatTemplate(std::string_view family);

// What BuiltinChatTemplate's format is called in llama.cpp ("gemma"), for logs and errors.
std::optional<std::string_view> BuiltinChatTemplateName(std::string_view family);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_CHAT_BUILTIN_TEMPLATES_H_
