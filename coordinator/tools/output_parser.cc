#include "coordinator/tools/output_parser.h"

#include <utility>

namespace tpserve {
namespace {

void AppendToolCallDeltas(ToolCallParser::Delta d, ParsedDelta* out) {
  out->content.append(d.content);
  for (ToolCallDelta& call : d.tool_calls) out->tool_calls.push_back(std::move(call));
}

}  // namespace

void AppendDelta(const ParsedDelta& delta, ParsedOutput* output) {
  output->content.append(delta.content);
  output->reasoning.append(delta.reasoning);
  for (const ToolCallDelta& d : delta.tool_calls) {
    if (d.index == static_cast<int>(output->tool_calls.size())) {
      output->tool_calls.push_back(ToolCall{d.id, d.name, d.arguments});
    } else if (d.index >= 0 && d.index < static_cast<int>(output->tool_calls.size())) {
      output->tool_calls[d.index].arguments.append(d.arguments);
    }
  }
}

OutputParser::OutputParser(const Options& options) {
  if (options.reasoning_format.has_value()) {
    reasoning_.emplace(
        ReasoningParser::Options{*options.reasoning_format, options.starts_in_reasoning});
  }
  if (options.tool_call_format.has_value()) {
    tools_.emplace(ToolCallParser::Options{*options.tool_call_format, options.tool_names,
                                           options.call_id_seed});
  }
}

void OutputParser::AddContent(std::string_view content, bool final, ParsedDelta* out) {
  if (!tools_.has_value()) {
    out->content.append(content);
    return;
  }
  if (!content.empty()) AppendToolCallDeltas(tools_->Feed(content), out);
  if (final) AppendToolCallDeltas(tools_->Finish(), out);
}

ParsedDelta OutputParser::Feed(std::string_view text) {
  ParsedDelta out;
  if (!reasoning_.has_value()) {
    AddContent(text, /*final=*/false, &out);
    return out;
  }
  ReasoningParser::Delta r = reasoning_->Feed(text);
  out.reasoning = std::move(r.reasoning);
  AddContent(r.content, /*final=*/false, &out);
  return out;
}

ParsedDelta OutputParser::Finish() {
  ParsedDelta out;
  if (!reasoning_.has_value()) {
    AddContent("", /*final=*/true, &out);
    return out;
  }
  ReasoningParser::Delta r = reasoning_->Finish();
  out.reasoning = std::move(r.reasoning);
  AddContent(r.content, /*final=*/true, &out);
  return out;
}

ParsedOutput ParseOutput(const OutputParser::Options& options, std::string_view text) {
  OutputParser parser(options);
  ParsedOutput output;
  AppendDelta(parser.Feed(text), &output);
  AppendDelta(parser.Finish(), &output);
  return output;
}

}  // namespace tpserve
