// The filter table: which names jinja2 (as transformers configures it) knows as filters, and
// which of them this interpreter implements (filters_text.cc, filters_sequence.cc).
#include <algorithm>

#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/filters_internal.h"

namespace tpserve::jinja {

FilterFn FindFilter(std::string_view name) {
  for (absl::Span<const FilterEntry> table : {TextFilters(), SequenceFilters()}) {
    for (const FilterEntry& e : table) {
      if (e.name == name) return e.fn;
    }
  }
  return nullptr;
}

bool IsUnsupportedFilter(std::string_view name) {
  static constexpr std::string_view kJinjaOnly[] = {
      "filesizeformat", "pprint", "random",   "striptags",
      "urlencode",      "urlize", "wordwrap", "xmlattr",
  };
  return std::find(std::begin(kJinjaOnly), std::end(kJinjaOnly), name) != std::end(kJinjaOnly);
}

}  // namespace tpserve::jinja
