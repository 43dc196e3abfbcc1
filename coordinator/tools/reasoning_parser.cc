#include "coordinator/tools/reasoning_parser.h"

#include "coordinator/tools/text_cursor.h"

namespace tpserve {
namespace {

namespace m = tool_markers;
using tools_internal::MarkerPrefixStart;
using tools_internal::SkipSpace;
using tools_internal::TrimSpaceBack;

bool IsPrefixOf(std::string_view text, std::string_view of) {
  return text.size() <= of.size() && of.substr(0, text.size()) == text;
}

}  // namespace

bool PromptOpensReasoning(std::string_view prompt) {
  const size_t end = TrimSpaceBack(prompt, prompt.size());
  return end >= m::kThinkBegin.size() &&
         prompt.substr(end - m::kThinkBegin.size(), m::kThinkBegin.size()) == m::kThinkBegin;
}

ReasoningParser::ReasoningParser(Options options) : options_(options) {}

ReasoningParser::Delta ReasoningParser::Feed(std::string_view text) {
  Delta out;
  if (finished_) return out;
  buf_.append(text);
  Run(/*final=*/false, &out);
  return out;
}

ReasoningParser::Delta ReasoningParser::Finish() {
  Delta out;
  if (finished_) return out;
  Run(/*final=*/true, &out);
  finished_ = true;
  return out;
}

void ReasoningParser::Run(bool final, Delta* out) {
  if (mode_ == Mode::kStart) {
    const size_t p = SkipSpace(buf_, 0);
    const std::string_view rest = std::string_view(buf_).substr(p);
    if (!final && rest.size() < m::kThinkBegin.size() && IsPrefixOf(rest, m::kThinkBegin)) {
      return;  // may still open a think block
    }
    if (rest.substr(0, m::kThinkBegin.size()) == m::kThinkBegin) {
      Consume(p + m::kThinkBegin.size());
      mode_ = Mode::kReasoning;
    } else {
      mode_ = options_.starts_in_reasoning ? Mode::kReasoning : Mode::kContent;
    }
  }
  if (mode_ == Mode::kReasoning) {
    const size_t end = buf_.find(m::kThinkEnd);
    if (end != std::string::npos) {
      Emit(std::string_view(buf_).substr(0, TrimSpaceBack(buf_, end)), &trim_reasoning_front_,
           &out->reasoning);
      Consume(end + m::kThinkEnd.size());
      mode_ = Mode::kContent;
      trim_content_front_ = true;
    } else {
      size_t keep = buf_.size();
      if (!final) {
        // Hold back a tail that may grow into "</think>", and the whitespace before it.
        keep = MarkerPrefixStart(buf_, m::kThinkEnd);
      }
      // Trailing whitespace waits for more reasoning, or is dropped at the end.
      keep = TrimSpaceBack(buf_, keep);
      Emit(std::string_view(buf_).substr(0, keep), &trim_reasoning_front_, &out->reasoning);
      Consume(final ? buf_.size() : keep);
      return;
    }
  }
  Emit(buf_, &trim_content_front_, &out->content);
  Consume(buf_.size());
}

void ReasoningParser::Emit(std::string_view text, bool* trim_front, std::string* out) {
  if (*trim_front) {
    text.remove_prefix(SkipSpace(text, 0));
    if (text.empty()) return;
    *trim_front = false;
  }
  out->append(text);
}

}  // namespace tpserve
