// Finds the tool calls in a model's output as it streams, in the model's own format
// (tool_call_format.h), and passes everything else through as content.
//
//   ToolCallParser parser({.format = ToolCallFormat::kHermes, .tool_names = {"get_weather"}});
//   ToolCallParser::Delta d = parser.Feed(text_of_new_tokens);  // d.content, d.tool_calls
//   ...
//   d = parser.Finish();                                         // at the end of generation
//
// Input: the generated text including the text of special tokens ("[TOOL_CALLS]"), in chunks of
// whole UTF-8 characters, split anywhere.
//
// Promises (output_parser_test.cc checks them over every 2- and 3-way split of its samples and
// over random outputs cut at random):
// - The deltas of any split of an output, concatenated (content; each call's id, name and
//   arguments), equal those of the output fed whole: every decision is taken only once the text
//   it depends on has arrived, and the same way however that text was split.
// - A call is emitted whole, in one delta, once it is complete and valid: its arguments are the
//   exact bytes of the JSON object the model wrote and parse as JSON. A call that turns out
//   malformed, names a function the request does not have, or is unfinished at Finish() is
//   content, marker and all; since it was never emitted as a call, nothing is taken back.
//   (Arguments are therefore not streamed piece by piece: only a finished call is known good.)
// - Markers of well-formed calls never reach content; whitespace next to a call is dropped
//   (content that is only whitespace between or after calls disappears).
// - Text that merely looks like JSON is content: llama3_json counts an output as calls only
//   when the whole of it is calls to the request's functions.
// Content is held back only while it may still be the start of a call: a possible marker
// prefix, the whitespace before it, an unfinished call (for llama3_json, the whole output
// while it still reads as calls).
//
// Threading: one instance per choice, one thread at a time.
#ifndef TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_PARSER_H_
#define TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_PARSER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/tools/call_id.h"
#include "coordinator/tools/json_text.h"
#include "coordinator/tools/text_cursor.h"
#include "coordinator/tools/tool_call_format.h"

namespace tpserve {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON object text, as the model wrote it
};

// One streamed piece of call `index` (0, 1, ... in order of appearance). This parser emits each
// call in a single delta with all three fields set.
struct ToolCallDelta {
  int index = 0;
  std::string id;         // set on a call's first delta only
  std::string name;       // set on a call's first delta only
  std::string arguments;  // appended across a call's deltas
};

class ToolCallParser {
 public:
  struct Options {
    ToolCallFormat format = ToolCallFormat::kHermes;
    // The request's functions. A call to another name is not a call (it stays content). Empty
    // accepts any name, except for llama3_json, whose calls are bare JSON and must name one.
    std::vector<std::string> tool_names;
    uint64_t call_id_seed = 0;
  };
  struct Delta {
    std::string content;
    std::vector<ToolCallDelta> tool_calls;
  };

  explicit ToolCallParser(Options options);

  // Takes the next chunk; returns what it decides. After Finish() returns nothing.
  Delta Feed(std::string_view text);
  // End of generation: decides what was held back.
  Delta Finish();

  bool saw_tool_calls() const { return num_calls_ > 0; }

 private:
  enum class Mode {
    kContent,          // text, watching for a call marker
    kDeepSeekSection,  // between calls inside <｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜>
    kLlamaStart,       // llama3_json: the output so far may still be all calls
    kPassThrough,      // everything from here is content
  };
  using Match = tools_internal::Match;
  using Cursor = tools_internal::TextCursor;
  struct CallRead {
    Match match = Match::kNo;
    size_t end = 0;  // kYes: one past the call's text in buf_
    std::vector<JsonCall> calls;
  };

  void Run(bool final, Delta* out);
  bool StepContent(bool final, Delta* out);
  bool StepDeepSeekSection(bool final, Delta* out);
  bool StepLlama(bool final, Delta* out);
  void PassThrough();  // llama3_json: the output is content after all

  // tool_call_readers.cc: the call(s) whose marker starts at buf_[pos].
  CallRead ReadCallAt(size_t pos, bool final);
  Match ReadHermes(Cursor& c, std::vector<JsonCall>* calls);
  Match ReadMistral(Cursor& c, std::vector<JsonCall>* calls);
  Match ReadDeepSeek(Cursor& c, std::vector<JsonCall>* calls);
  // A JSON object or array opening with `open` at the cursor; `json` its text.
  Match ReadJson(Cursor& c, char open, std::string_view* json);
  bool KnownName(std::string_view name) const;

  void EmitContent(std::string_view text, Delta* out);
  void EmitCalls(std::vector<JsonCall> calls, Delta* out);
  void Consume(size_t n);

  Options options_;
  CallIdGenerator ids_;
  std::vector<std::string_view> triggers_;  // markers that may start a call in content
  Mode mode_;
  bool finished_ = false;
  std::string buf_;          // text not yet decided
  size_t buf_offset_ = 0;    // offset of buf_[0] in the whole output
  bool after_call_ = false;  // drop whitespace: the last thing decided was a call
  int num_calls_ = 0;

  // The JSON value being read, cached across Feeds so a long call is scanned once.
  size_t json_start_ = std::string::npos;  // offset in the whole output
  JsonExtentScanner json_scan_;
  std::optional<bool> json_valid_;

  // llama3_json: calls read so far and where the next one starts in buf_ (after a ';').
  bool llama_started_ = false;
  size_t llama_pos_ = 0;
  std::vector<JsonCall> llama_calls_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_TOOL_CALL_PARSER_H_
