// JSON as the model wrote it: where an object or array that is still being generated ends, and
// the members of a finished object as the exact bytes of their values. Tool-call arguments are
// returned as those bytes, never re-serialised, so a streamed call and a whole one agree.
//
//   JsonExtentScanner scan;                  // the text starts at the value's '{' or '['
//   if (scan.Scan(text) == JsonExtentScanner::kComplete && IsValidJson(text.substr(0, scan.end())))
//     std::vector<JsonMember> members = ObjectMembers(text.substr(0, scan.end()));
//
// Threading: a scanner belongs to one parser; the functions are pure.
#ifndef TPSERVE_COORDINATOR_TOOLS_JSON_TEXT_H_
#define TPSERVE_COORDINATOR_TOOLS_JSON_TEXT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

// Finds the end of one JSON object or array by its brackets and strings, resuming where the
// previous Scan stopped, so a text that grows a token at a time is read once. kComplete says
// where the brackets close, not that the JSON is valid (IsValidJson decides that); kInvalid is
// certain: a byte no JSON may hold there (a letter outside a string other than those of
// true/false/null/exponents, a raw control character in a string, a mismatched bracket,
// nesting deeper than kMaxDepth).
class JsonExtentScanner {
 public:
  enum State { kIncomplete, kComplete, kInvalid };
  static constexpr int kMaxDepth = 256;

  // REQUIRES: `text` begins with '{' or '[', and extends the text of the previous call.
  State Scan(std::string_view text);
  // kComplete: one past the closing bracket.
  size_t end() const { return end_; }

 private:
  State state_ = kIncomplete;
  size_t scanned_ = 0;
  size_t end_ = 0;
  std::string open_;  // the open brackets, innermost last
  bool in_string_ = false;
  bool escape_ = false;
};

// RFC 8259 JSON (nothing after the value but whitespace).
bool IsValidJson(std::string_view text);

struct JsonMember {
  std::string key;         // decoded
  std::string_view value;  // the value's bytes, without surrounding whitespace
};
// REQUIRES: IsValidJson(object_text) and it is an object. Members in order, duplicates kept.
std::vector<JsonMember> ObjectMembers(std::string_view object_text);

// REQUIRES: IsValidJson(array_text) and it is an array. Each element's bytes, in order.
std::vector<std::string_view> ArrayElements(std::string_view array_text);

// A call written as a JSON object: {"name": "f", "arguments": {...}} ("parameters" also names
// the arguments; other members such as Mistral's "id" are ignored).
struct JsonCall {
  std::string name;
  std::string arguments;  // a JSON object's text
};
// The call in `object_text`, or nullopt when it is not one: not valid JSON, no string "name",
// two names or two argument members, or arguments that are not an object. Arguments written
// as a string holding an object's JSON are that string's text; absent or null are "{}".
std::optional<JsonCall> DecodeJsonCall(std::string_view object_text);

// `value` (a valid JSON value's text) as call arguments: the text itself for an object, the
// decoded string when it is a string that holds a JSON object, else nullopt.
std::optional<std::string> ArgumentsText(std::string_view value);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOOLS_JSON_TEXT_H_
