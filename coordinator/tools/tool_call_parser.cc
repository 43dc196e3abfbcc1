#include "coordinator/tools/tool_call_parser.h"

#include <algorithm>
#include <utility>

namespace tpserve {

using tools_internal::MarkerPrefixStart;
using tools_internal::TrimSpaceBack;
namespace m = tool_markers;

ToolCallParser::ToolCallParser(Options options)
    : options_(std::move(options)),
      ids_(options_.call_id_seed, options_.format == ToolCallFormat::kMistral
                                      ? CallIdStyle::kMistral
                                      : CallIdStyle::kOpenAi),
      mode_(Mode::kContent) {
  switch (options_.format) {
    case ToolCallFormat::kHermes:
      triggers_ = {m::kHermesBegin};
      break;
    case ToolCallFormat::kLlama3Json:
      mode_ = Mode::kLlamaStart;
      break;
    case ToolCallFormat::kMistral:
      triggers_ = {m::kMistralCalls};
      break;
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      // A section normally opens the calls; a bare call marker is taken too.
      triggers_ = {m::kDeepSeekCallsBegin, m::kDeepSeekCallBegin};
      break;
  }
}

ToolCallParser::Delta ToolCallParser::Feed(std::string_view text) {
  Delta out;
  if (finished_) return out;
  buf_.append(text);
  Run(/*final=*/false, &out);
  return out;
}

ToolCallParser::Delta ToolCallParser::Finish() {
  Delta out;
  if (finished_) return out;
  Run(/*final=*/true, &out);
  finished_ = true;
  return out;
}

void ToolCallParser::Run(bool final, Delta* out) {
  bool progress = true;
  while (progress) {
    switch (mode_) {
      case Mode::kContent:
        progress = StepContent(final, out);
        break;
      case Mode::kDeepSeekSection:
        progress = StepDeepSeekSection(final, out);
        break;
      case Mode::kLlamaStart:
        progress = StepLlama(final, out);
        break;
      case Mode::kPassThrough:
        EmitContent(buf_, out);
        Consume(buf_.size());
        progress = false;
        break;
    }
  }
}

bool ToolCallParser::StepContent(bool final, Delta* out) {
  size_t at = std::string::npos;
  std::string_view marker;
  for (std::string_view t : triggers_) {
    const size_t i = buf_.find(t);
    if (i < at) {
      at = i;
      marker = t;
    }
  }
  if (at == std::string::npos) {
    size_t keep = buf_.size();
    if (!final) {
      // Hold back the longest tail that may grow into a marker, and the whitespace before it.
      for (std::string_view t : triggers_) keep = std::min(keep, MarkerPrefixStart(buf_, t));
      keep = TrimSpaceBack(buf_, keep);
    }
    EmitContent(std::string_view(buf_).substr(0, keep), out);
    Consume(keep);
    return false;
  }
  CallRead read = ReadCallAt(at, final);
  switch (read.match) {
    case Match::kNeedMore: {
      const size_t keep = TrimSpaceBack(buf_, at);
      EmitContent(std::string_view(buf_).substr(0, keep), out);
      Consume(keep);
      return false;
    }
    case Match::kYes:
      EmitContent(std::string_view(buf_).substr(0, TrimSpaceBack(buf_, at)), out);
      EmitCalls(std::move(read.calls), out);
      Consume(read.end);
      if (options_.format == ToolCallFormat::kDeepSeekV3 ||
          options_.format == ToolCallFormat::kDeepSeekV31) {
        mode_ = Mode::kDeepSeekSection;
      }
      return true;
    case Match::kNo:
      // Not a call: its marker is content, and the search resumes after it.
      EmitContent(std::string_view(buf_).substr(0, at + marker.size()), out);
      Consume(at + marker.size());
      return true;
  }
  return false;
}

bool ToolCallParser::StepDeepSeekSection(bool final, Delta* out) {
  Cursor c(buf_, 0, final);
  c.SkipSpace();
  const size_t call_start = c.pos();
  size_t which = 0;
  switch (c.OneOf({m::kDeepSeekCallBegin, m::kDeepSeekCallsEnd}, &which)) {
    case Match::kNeedMore:
      return false;
    case Match::kNo:
      // The end of the output (its whitespace is dropped: it follows a call) or text.
      mode_ = Mode::kContent;
      return true;
    case Match::kYes:
      break;
  }
  if (which == 1) {  // <｜tool▁calls▁end｜>
    Consume(c.pos());
    mode_ = Mode::kContent;
    return true;
  }
  CallRead read = ReadCallAt(call_start, final);
  switch (read.match) {
    case Match::kNeedMore:
      return false;
    case Match::kYes:
      EmitCalls(std::move(read.calls), out);
      Consume(read.end);
      return true;
    case Match::kNo: {
      const size_t marker_end = call_start + m::kDeepSeekCallBegin.size();
      EmitContent(std::string_view(buf_).substr(0, marker_end), out);
      Consume(marker_end);
      mode_ = Mode::kContent;
      return true;
    }
  }
  return false;
}

bool ToolCallParser::StepLlama(bool final, Delta* out) {
  Cursor c(buf_, llama_pos_, final);
  if (!llama_started_) {
    c.SkipSpace();
    const Match tag = c.Literal(m::kPythonTag);
    if (tag == Match::kNeedMore) return false;
    c.SkipSpace();
    if (c.AtEnd()) {
      if (!final) return false;
      PassThrough();
      return true;
    }
    if (c.Peek() != '{') {
      PassThrough();
      return true;
    }
    llama_started_ = true;
    llama_pos_ = c.pos();
  }
  while (true) {
    c.SkipSpace();
    std::string_view json;
    const Match read = ReadJson(c, '{', &json);
    if (read == Match::kNeedMore) return false;
    std::optional<JsonCall> call;
    if (read == Match::kYes) call = DecodeJsonCall(json);
    if (!call.has_value() || !KnownName(call->name)) {
      PassThrough();
      return true;
    }
    c.SkipSpace();
    if (!c.AtEnd() && c.Peek() == ';') {
      c.Advance(1);
      llama_calls_.push_back(std::move(*call));
      llama_pos_ = c.pos();
      c.SkipSpace();
      if (!c.AtEnd()) continue;
    } else if (!c.AtEnd()) {
      PassThrough();
      return true;
    } else if (final) {
      llama_calls_.push_back(std::move(*call));
    }
    if (!final) return false;
    // The whole output was calls (a trailing ';' included).
    EmitCalls(std::move(llama_calls_), out);
    llama_calls_.clear();
    Consume(buf_.size());
    mode_ = Mode::kPassThrough;
    return false;
  }
}

void ToolCallParser::PassThrough() {
  llama_calls_.clear();
  mode_ = Mode::kPassThrough;
}

void ToolCallParser::EmitContent(std::string_view text, Delta* out) {
  if (after_call_) {
    text.remove_prefix(tools_internal::SkipSpace(text, 0));
    if (text.empty()) return;
    after_call_ = false;
  }
  out->content.append(text);
}

void ToolCallParser::EmitCalls(std::vector<JsonCall> calls, Delta* out) {
  for (JsonCall& call : calls) {
    ToolCallDelta d;
    d.index = num_calls_++;
    d.id = ids_.Next();
    d.name = std::move(call.name);
    d.arguments = std::move(call.arguments);
    out->tool_calls.push_back(std::move(d));
  }
  after_call_ = true;
}

void ToolCallParser::Consume(size_t n) {
  buf_.erase(0, n);
  buf_offset_ += n;
}

}  // namespace tpserve
