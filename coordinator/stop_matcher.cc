#include "coordinator/stop_matcher.h"

#include <algorithm>

namespace tpserve {

StopMatcher::StopMatcher(std::vector<std::string> stop_sequences)
    : stops_(std::move(stop_sequences)) {}

StopMatcher::Result StopMatcher::Append(std::string_view text) {
  Result r;
  if (done_) return r;
  pending_.append(text);
  // Earliest complete match wins; among matches at the same place, the longest.
  size_t best = std::string::npos;
  const std::string* best_stop = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at != std::string::npos &&
        (at < best || (at == best && s.size() > best_stop->size()))) {
      best = at;
      best_stop = &s;
    }
  }
  if (best_stop != nullptr) {
    r.emit = pending_.substr(0, best);
    r.matched = *best_stop;
    pending_.clear();
    done_ = true;
    return r;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of some stop sequence.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
      if (std::string_view(pending_).substr(pending_.size() - n) == std::string_view(s).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  r.emit = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopMatcher::Flush() {
  std::string out;
  if (!done_) out.swap(pending_);
  return out;
}

}  // namespace tpserve
