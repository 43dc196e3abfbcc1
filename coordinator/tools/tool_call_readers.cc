// The per-format readers of ToolCallParser: each reads the call(s) whose marker starts at a
// position of the undecided text, as far as the text allows (see text_cursor.h).
#include <algorithm>
#include <string>
#include <utility>

#include "coordinator/tools/tool_call_parser.h"

namespace tpserve {

namespace m = tool_markers;

#define TP_MATCH_OR_RETURN(expr)                    \
  do {                                              \
    const Match tp_match_ = (expr);                 \
    if (tp_match_ != Match::kYes) return tp_match_; \
  } while (0)

ToolCallParser::CallRead ToolCallParser::ReadCallAt(size_t pos, bool final) {
  Cursor c(buf_, pos, final);
  CallRead read;
  switch (options_.format) {
    case ToolCallFormat::kHermes:
      read.match = ReadHermes(c, &read.calls);
      break;
    case ToolCallFormat::kMistral:
      read.match = ReadMistral(c, &read.calls);
      break;
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      read.match = ReadDeepSeek(c, &read.calls);
      break;
    case ToolCallFormat::kLlama3Json:
      read.match = Match::kNo;  // read by StepLlama
      break;
  }
  read.end = c.pos();
  return read;
}

ToolCallParser::Match ToolCallParser::ReadHermes(Cursor& c, std::vector<JsonCall>* calls) {
  TP_MATCH_OR_RETURN(c.Literal(m::kHermesBegin));
  c.SkipSpace();
  std::string_view json;
  TP_MATCH_OR_RETURN(ReadJson(c, '{', &json));
  std::optional<JsonCall> call = DecodeJsonCall(json);
  if (!call.has_value() || !KnownName(call->name)) return Match::kNo;
  c.SkipSpace();
  TP_MATCH_OR_RETURN(c.LiteralOrEnd(m::kHermesEnd));
  calls->push_back(std::move(*call));
  return Match::kYes;
}

ToolCallParser::Match ToolCallParser::ReadMistral(Cursor& c, std::vector<JsonCall>* calls) {
  TP_MATCH_OR_RETURN(c.Literal(m::kMistralCalls));
  c.SkipSpace();
  if (c.AtEnd()) return c.Starved();
  std::string_view json;
  if (c.Peek() == '[') {  // [{"name": ..., "arguments": ...}, ...]
    TP_MATCH_OR_RETURN(ReadJson(c, '[', &json));
    for (std::string_view element : ArrayElements(json)) {
      std::optional<JsonCall> call = DecodeJsonCall(element);
      if (!call.has_value() || !KnownName(call->name)) return Match::kNo;
      calls->push_back(std::move(*call));
    }
    return calls->empty() ? Match::kNo : Match::kYes;
  }
  JsonCall call;  // name[CALL_ID]id[ARGS]{...}, the id optional
  TP_MATCH_OR_RETURN(c.Name(&call.name));
  if (!KnownName(call.name)) return Match::kNo;
  size_t which = 0;
  TP_MATCH_OR_RETURN(c.OneOf({m::kMistralArgs, m::kMistralCallId}, &which));
  if (which == 1) {
    std::string ignored_id;
    TP_MATCH_OR_RETURN(c.Name(&ignored_id));
    TP_MATCH_OR_RETURN(c.Literal(m::kMistralArgs));
  }
  c.SkipSpace();
  TP_MATCH_OR_RETURN(ReadJson(c, '{', &json));
  call.arguments = std::string(json);
  calls->push_back(std::move(call));
  return Match::kYes;
}

ToolCallParser::Match ToolCallParser::ReadDeepSeek(Cursor& c, std::vector<JsonCall>* calls) {
  if (c.Literal(m::kDeepSeekCallsBegin) == Match::kYes) c.SkipSpace();
  TP_MATCH_OR_RETURN(c.Literal(m::kDeepSeekCallBegin));
  JsonCall call;
  std::string_view json;
  if (options_.format == ToolCallFormat::kDeepSeekV3) {
    // function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
    std::string type;
    TP_MATCH_OR_RETURN(c.Name(&type));
    TP_MATCH_OR_RETURN(c.Literal(m::kDeepSeekSep));
    TP_MATCH_OR_RETURN(c.Name(&call.name));
    c.SkipSpace();
    TP_MATCH_OR_RETURN(c.Literal("```json"));
    c.SkipSpace();
    TP_MATCH_OR_RETURN(ReadJson(c, '{', &json));
    c.SkipSpace();
    TP_MATCH_OR_RETURN(c.LiteralOrEnd("```"));
  } else {
    // NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
    TP_MATCH_OR_RETURN(c.Name(&call.name));
    TP_MATCH_OR_RETURN(c.Literal(m::kDeepSeekSep));
    c.SkipSpace();
    TP_MATCH_OR_RETURN(ReadJson(c, '{', &json));
  }
  if (!KnownName(call.name)) return Match::kNo;
  c.SkipSpace();
  TP_MATCH_OR_RETURN(c.LiteralOrEnd(m::kDeepSeekCallEnd));
  call.arguments = std::string(json);
  calls->push_back(std::move(call));
  return Match::kYes;
}

ToolCallParser::Match ToolCallParser::ReadJson(Cursor& c, char open, std::string_view* json) {
  if (c.AtEnd()) return c.Starved();
  if (c.Peek() != open) return Match::kNo;
  const size_t start = buf_offset_ + c.pos();
  if (start != json_start_) {
    json_start_ = start;
    json_scan_ = JsonExtentScanner();
    json_valid_.reset();
  }
  switch (json_scan_.Scan(c.rest())) {
    case JsonExtentScanner::kInvalid:
      return Match::kNo;
    case JsonExtentScanner::kIncomplete:
      return c.Starved();
    case JsonExtentScanner::kComplete:
      break;
  }
  *json = c.rest().substr(0, json_scan_.end());
  if (!json_valid_.has_value()) json_valid_ = IsValidJson(*json);
  if (!*json_valid_) return Match::kNo;
  c.Advance(json->size());
  return Match::kYes;
}

bool ToolCallParser::KnownName(std::string_view name) const {
  if (options_.tool_names.empty()) return options_.format != ToolCallFormat::kLlama3Json;
  return std::find(options_.tool_names.begin(), options_.tool_names.end(), name) !=
         options_.tool_names.end();
}

#undef TP_MATCH_OR_RETURN

}  // namespace tpserve
