// Tool calls for constrained decoding: how each format writes one call, and the XGrammar
// (0.2.8) structural tag that makes a model write its calls correctly for a request's tools,
// tool_choice and parallel_tool_calls. The structured-output engine compiles the tag
// (coordinator/structured); the parser (tool_call_parser.h) reads what it produced.
//
//   TP_ASSIGN_OR_RETURN(std::string tag, ToolCallStructuralTag({
//       .format = ToolCallFormat::kHermes, .tools = {{"get_weather", schema_json}},
//       .mode = ToolChoiceMode::kRequired}));
//   // {"type":"structural_tag","format":{"type":"tags_with_separator","tags":[{"type":"tag",
//   //   "begin":"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",...}
//
// Modes: kAuto allows free text and calls (llama3_json: a call only as the whole output,
// as its parser reads it); kRequired one or more calls and nothing else; kNamed exactly one
// call of that function. parallel_tool_calls=false allows at most one call. With a reasoning
// format, a think block may (or, when the prompt opened it, must) come first.
//
// Markers that are control tokens ([TOOL_CALLS], <|python_tag|>, DeepSeek's) must be tokens
// the compiled vocabulary gives text to, or the grammar cannot produce them.
//
// Pure functions; thread-safe.
#ifndef TPSERVE_COORDINATOR_TOOLS_STRUCTURAL_TAG_H_
#define TPSERVE_COORDINATOR_TOOLS_STRUCTURAL_TAG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/tools/tool_call_format.h"

namespace tpserve {

// How a format writes one call: begin_prefix NAME begin_suffix {ARGUMENTS} end, calls joined by
// separator, all of them inside section_begin ... section_end where the format has a section.
struct CallSyntax {
  std::string trigger;        // free text turns into calls here (section_begin if any)
  std::string begin_prefix;   // "<tool_call>\n{\"name\": \""
  std::string begin_suffix;   // "\", \"arguments\": "
  std::string end;            // "}\n</tool_call>"
  std::string separator;      // between two calls
  std::string section_begin;  // DeepSeek: "<｜tool▁calls▁begin｜>"; else empty
  std::string section_end;
  bool name_is_json = false;  // the name sits inside a JSON string (escape it)
};

// Mistral: the [TOOL_CALLS]name[ARGS]{...} form. (Its structural tag also allows the
// [TOOL_CALLS][{...}, ...] list that older Mistral models write.)
CallSyntax ToolCallSyntax(ToolCallFormat format);

struct ToolSpec {
  std::string name;
  std::string parameters;  // JSON Schema of the arguments object; empty: any object
};

enum class ToolChoiceMode { kAuto, kRequired, kNamed };

struct StructuralTagRequest {
  ToolCallFormat format = ToolCallFormat::kHermes;
  std::vector<ToolSpec> tools;
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string named;  // kNamed: the function to call
  bool parallel_tool_calls = true;
  std::optional<ReasoningFormat> reasoning;
  bool starts_in_reasoning = false;  // the prompt opened <think> (PromptOpensReasoning)
};

// The structural tag's JSON text. INVALID_ARGUMENT when there are no tools, a tool's
// parameters are not a JSON object (or boolean) schema, or `named` is not one of the tools.
absl::StatusOr<std::string> ToolCallStructuralTag(const StructuralTagRequest& request);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_STRUCTURAL_TAG_H_
