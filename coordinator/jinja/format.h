// Python string formatting: printf-style `fmt % args` (the `%` operator and the `format`
// filter) and str.format / format(value, spec) (the format-spec mini-language), as CPython
// implements them for str, int, float and bool arguments.
//
//   PercentFormat(TString("%s=%d"), Value::Tuple({name, count}), renderer)
//   StrFormat(renderer, TString("{}: {:>5}"), args)
//
// Provenance: text from the format string and "%s"/"{}" of a string argument keep their
// exact input spans; any other converted argument is input as a whole if it came from input.
// Threading: pure functions (the renderer supplies getattr/getitem and the size limit).
#ifndef TPSERVE_COORDINATOR_JINJA_FORMAT_H_
#define TPSERVE_COORDINATOR_JINJA_FORMAT_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/jinja/tainted_string.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

// escape_args: the format is a Markup, whose % escapes %s/%r/%a of non-Markup arguments.
absl::StatusOr<TString> PercentFormat(const TString& format, const Value& args, Renderer& renderer,
                                      bool escape_args = false);
absl::StatusOr<TString> StrFormat(Renderer& renderer, const TString& format, const CallArgs& args);
// format(value, spec) for one value; `renderer` (may be null) bounds the padded width.
absl::StatusOr<TString> FormatValue(const Value& value, std::string_view spec,
                                    const Renderer* renderer = nullptr);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_FORMAT_H_
