#include "coordinator/tokenizer/special_token_splitter.h"

#include <algorithm>
#include <utility>

namespace tpserve {

SpecialTokenSplitter::SpecialTokenSplitter(std::vector<Entry> entries) {
  for (Entry& entry : entries) {
    if (entry.text.empty()) continue;
    has_user_defined_ |= !entry.is_control;
    entries_.push_back(std::move(entry));
  }
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
  });
}

std::vector<SpecialTokenSplitter::Fragment> SpecialTokenSplitter::Split(std::string_view text,
                                                                        bool match_control) const {
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back(Fragment{text, -1});
  if (!match_control && !has_user_defined_) return fragments;

  std::vector<Fragment> next;
  for (const Entry& entry : entries_) {
    if (entry.is_control && !match_control) continue;
    next.clear();
    bool found_any = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.special_id >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (size_t at = rest.find(entry.text); at != std::string_view::npos;
           at = rest.find(entry.text)) {
        found_any = true;
        if (at > 0) next.push_back(Fragment{rest.substr(0, at), -1});
        next.push_back(Fragment{rest.substr(at, entry.text.size()), entry.id});
        rest.remove_prefix(at + entry.text.size());
      }
      if (!rest.empty()) next.push_back(Fragment{rest, -1});
    }
    if (found_any) fragments.swap(next);
  }
  return fragments;
}

}  // namespace tpserve
