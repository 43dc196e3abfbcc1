// Splits a reasoning model's output into its reasoning (<think>...</think> at the start) and
// the content after it, as the output streams.
//
//   ReasoningParser parser({.format = ReasoningFormat::kQwen3,
//                           .starts_in_reasoning = PromptOpensReasoning(prompt)});
//   ReasoningParser::Delta d = parser.Feed(text);   // d.reasoning, d.content
//   d = parser.Finish();
//
// Only a think block at the very start counts (whitespace before it aside); later "<think>"
// text is content. When the prompt already opened the block (DeepSeek R1's template ends the
// prompt with "<think>\n"), the output starts inside it and only "</think>" appears; a repeated
// "<think>" at its start is dropped. Without "</think>" everything after the opening is
// reasoning. Whitespace around the reasoning, and between "</think>" and the content, is
// dropped. Concatenated deltas equal the whole output's split for every way of chunking it.
//
// Threading: one instance per choice, one thread at a time.
#ifndef TPSERVE_COORDINATOR_TOOLS_REASONING_PARSER_H_
#define TPSERVE_COORDINATOR_TOOLS_REASONING_PARSER_H_

#include <string>
#include <string_view>

#include "coordinator/tools/tool_call_format.h"

namespace tpserve {

// Whether a rendered prompt leaves the model inside a think block: it ends with "<think>" and
// whitespace (DeepSeek R1, V3.1 thinking, Qwen3 thinking-only models).
bool PromptOpensReasoning(std::string_view prompt);

class ReasoningParser {
 public:
  struct Options {
    // Both formats write <think>...</think>; they differ in whether the prompt opens the block,
    // which is starts_in_reasoning's to say.
    ReasoningFormat format = ReasoningFormat::kQwen3;
    bool starts_in_reasoning = false;
  };
  struct Delta {
    std::string reasoning;
    std::string content;
  };

  explicit ReasoningParser(Options options);

  Delta Feed(std::string_view text);
  Delta Finish();

 private:
  enum class Mode { kStart, kReasoning, kContent };

  void Run(bool final, Delta* out);
  void Emit(std::string_view text, bool* trim_front, std::string* out);
  void Consume(size_t n) { buf_.erase(0, n); }

  Options options_;
  Mode mode_ = Mode::kStart;
  bool finished_ = false;
  std::string buf_;  // text not yet decided
  bool trim_reasoning_front_ = true;
  bool trim_content_front_ = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_REASONING_PARSER_H_
