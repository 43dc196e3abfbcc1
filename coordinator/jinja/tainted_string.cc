// TString span bookkeeping.
#include "coordinator/jinja/tainted_string.h"

#include <algorithm>

namespace tpserve::jinja {

TString TString::Input(std::string bytes) {
  TString s(std::move(bytes));
  s.MarkAllInput();
  return s;
}

TString TString::Derived(std::string bytes, bool any_input) {
  TString s(std::move(bytes));
  if (any_input) s.MarkAllInput();
  return s;
}

void TString::AddSpan(size_t begin, size_t end) {
  if (begin >= end) return;
  if (!spans_.empty() && spans_.back().end >= begin) {
    spans_.back().end = std::max(spans_.back().end, end);
    return;
  }
  spans_.push_back({begin, end});
}

void TString::Append(const TString& other) {
  const size_t offset = bytes_.size();
  bytes_ += other.bytes_;
  for (const InputSpan& span : other.spans_) AddSpan(span.begin + offset, span.end + offset);
}

void TString::Append(std::string_view bytes, bool from_input) {
  const size_t offset = bytes_.size();
  bytes_.append(bytes);
  if (from_input) AddSpan(offset, bytes_.size());
}

TString TString::Substr(size_t begin, size_t end) const {
  TString out(bytes_.substr(begin, end - begin));
  // First span that ends after `begin`.
  auto it = std::upper_bound(spans_.begin(), spans_.end(), begin,
                             [](size_t v, const InputSpan& s) { return v < s.end; });
  for (; it != spans_.end() && it->begin < end; ++it) {
    out.AddSpan(std::max(it->begin, begin) - begin, std::min(it->end, end) - begin);
  }
  return out;
}

void TString::MarkAllInput() {
  spans_.clear();
  AddSpan(0, bytes_.size());
}

}  // namespace tpserve::jinja
