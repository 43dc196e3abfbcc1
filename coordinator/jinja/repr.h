// Python's text forms of values: str(), repr() and json.dumps() as transformers calls it
// (ensure_ascii=False by default), byte for byte.
//
//   PyStr(v)              // what {{ v }} prints: "1.0", "None", "[1, 'a']", "{'k': True}"
//   FloatRepr(1e16)       // "1e+16"
//   JsonDumps(v, {.indent = 2})
//
// Threading: pure functions.
#ifndef TPSERVE_COORDINATOR_JINJA_REPR_H_
#define TPSERVE_COORDINATOR_JINJA_REPR_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/jinja/tainted_string.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

std::string FloatRepr(double d);          // repr(float)
std::string StrRepr(std::string_view s);  // repr(str), with Python's choice of quotes
std::string PyRepr(const Value& v);       // repr(v)
// markupsafe.escape of a str: & < > ' " as entities (the whole result is input if any was).
TString HtmlEscape(const TString& s);
// markupsafe.escape(v): a Markup unchanged, anything else escaped str(v).
Value EscapeToMarkup(const Value& v);
// str(v), keeping the provenance of strings; other values are marked as input as a whole when
// anything inside them came from input. Undefined prints as "".
TString PyStr(const Value& v);

struct JsonOptions {
  std::optional<std::string> indent;          // None: one line
  std::optional<std::string> item_separator;  // default ", " (or "," with indent)
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// json.dumps(v, ...); INVALID_ARGUMENT "Object of type X is not JSON serializable" etc.
absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonOptions& options);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_REPR_H_
