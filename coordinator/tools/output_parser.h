// What a choice's generated text means to the OpenAI API: reasoning, content and tool calls.
// One parser per choice combines the reasoning parser (reasoning_parser.h) and the tool-call
// parser (tool_call_parser.h); either may be off. Calls are looked for only in the content,
// never in the reasoning.
//
//   OutputParser parser({.tool_call_format = ToolCallFormat::kHermes,
//                        .tool_names = {"get_weather"}, .call_id_seed = seed});
//   ParsedDelta d = parser.Feed(new_text);  // stream: delta.content / reasoning / tool_calls
//   d = parser.Finish();
//   finish_reason = parser.saw_tool_calls() ? "tool_calls" : ...;
//
//   ParsedOutput whole = ParseOutput(options, text);   // non-streamed: the same parser, merged
//
// The deltas of any chunking of an output, merged with AppendDelta, equal ParseOutput of it
// (see the promises in tool_call_parser.h and reasoning_parser.h).
//
// Threading: one instance per choice, one thread at a time; ParseOutput is thread-safe.
#ifndef TPSERVE_COORDINATOR_TOOLS_OUTPUT_PARSER_H_
#define TPSERVE_COORDINATOR_TOOLS_OUTPUT_PARSER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/tools/reasoning_parser.h"
#include "coordinator/tools/tool_call_format.h"
#include "coordinator/tools/tool_call_parser.h"

namespace tpserve {

struct ParsedDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

struct ParsedOutput {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
};

// Adds a delta to what came before it: text appended, a call's first delta (the next index)
// adds the call, later ones append to its arguments.
void AppendDelta(const ParsedDelta& delta, ParsedOutput* output);

class OutputParser {
 public:
  struct Options {
    std::optional<ToolCallFormat> tool_call_format;   // nullopt: no tool calls are parsed
    std::optional<ReasoningFormat> reasoning_format;  // nullopt: no reasoning is split off
    bool starts_in_reasoning = false;     // the prompt opened <think> (PromptOpensReasoning)
    std::vector<std::string> tool_names;  // the request's functions (ToolCallParser::Options)
    uint64_t call_id_seed = 0;
  };

  explicit OutputParser(const Options& options);

  ParsedDelta Feed(std::string_view text);
  ParsedDelta Finish();

  bool saw_tool_calls() const { return tools_.has_value() && tools_->saw_tool_calls(); }

 private:
  void AddContent(std::string_view content, bool final, ParsedDelta* out);

  std::optional<ReasoningParser> reasoning_;
  std::optional<ToolCallParser> tools_;
};

// The whole output at once: Feed(text), Finish(), merged.
ParsedOutput ParseOutput(const OutputParser::Options& options, std::string_view text);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_OUTPUT_PARSER_H_
