// The ways models write tool calls and reasoning, by the names of the --tool_call_parser and
// --reasoning_parser flags, and how to tell a model's format from its chat template (the
// template shows how calls are rendered back into the prompt, which is how the model writes
// them).
//
//   TP_ASSIGN_OR_RETURN(ToolCallFormat f, ParseToolCallFormatName(flag));   // "hermes"
//   std::optional<ToolCallFormat> guess = DetectToolCallFormat(template_source);
//
// Pure functions; thread-safe.
#ifndef TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_FORMAT_H_
#define TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_FORMAT_H_

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"

namespace tpserve {

enum class ToolCallFormat {
  // Hermes 2 Pro/3, Qwen2.5, Qwen3, QwQ:
  //   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (any number, text before)
  kHermes,
  // Llama 3.1/3.2/3.3: the whole output is {"name": "f", "parameters": {...}} (or "arguments"),
  // optionally after <|python_tag|>, several separated by ';'.
  kLlama3Json,
  // Mistral: [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]  (Nemo, v3 tokenizers) or
  //          [TOOL_CALLS]f[ARGS]{...}  (Small 3.2, Devstral; [CALL_ID]id before [ARGS] allowed).
  kMistral,
  // DeepSeek V3 / R1:
  //   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```
  //   <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  kDeepSeekV3,
  // DeepSeek V3.1:
  //   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...
  //   <｜tool▁calls▁end｜>
  kDeepSeekV31,
};

// <think>...</think> at the start of the output is reasoning.
enum class ReasoningFormat {
  kDeepSeekR1,  // "deepseek_r1"
  kQwen3,       // "qwen3"
};

// "hermes", "llama3_json", "mistral", "deepseek_v3", "deepseek_v31".
std::string_view ToolCallFormatName(ToolCallFormat format);
// INVALID_ARGUMENT naming the valid names when `name` is none of them.
absl::StatusOr<ToolCallFormat> ParseToolCallFormatName(std::string_view name);

std::string_view ReasoningFormatName(ReasoningFormat format);
absl::StatusOr<ReasoningFormat> ParseReasoningFormatName(std::string_view name);

// The format whose markers `template_source` (a Jinja chat template) renders, or nullopt when
// it shows none we parse: DeepSeek's call markers (with "```json": V3/R1, without: V3.1),
// [TOOL_CALLS], <tool_call>, <|python_tag|> or Llama 3's ipython role with "parameters".
std::optional<ToolCallFormat> DetectToolCallFormat(std::string_view template_source);

// The marker strings of each format, shared by the parser and the structural tags.
namespace tool_markers {
inline constexpr std::string_view kHermesBegin = "<tool_call>";
inline constexpr std::string_view kHermesEnd = "</tool_call>";
inline constexpr std::string_view kPythonTag = "<|python_tag|>";
inline constexpr std::string_view kMistralCalls = "[TOOL_CALLS]";
inline constexpr std::string_view kMistralArgs = "[ARGS]";
inline constexpr std::string_view kMistralCallId = "[CALL_ID]";
inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
inline constexpr std::string_view kThinkBegin = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
}  // namespace tool_markers

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_FORMAT_H_
