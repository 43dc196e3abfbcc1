// Shared by the filter files: builtin_filters.cc (the lookup), filters_text.cc and
// filters_sequence.cc (the implementations, each with its table of names).
// Threading: constant tables and pure helpers.
#ifndef TPSERVE_COORDINATOR_JINJA_FILTERS_INTERNAL_H_
#define TPSERVE_COORDINATOR_JINJA_FILTERS_INTERNAL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};
absl::Span<const FilterEntry> TextFilters();
absl::Span<const FilterEntry> SequenceFilters();

inline absl::Status Error(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}
inline Value Str(TString s) { return Value::String(std::move(s)); }
// markupsafe's soft_str / str(): the text of any value.
inline TString Text(const Value& v) { return PyStr(v); }

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_FILTERS_INTERNAL_H_
