#include "coordinator/speculative/ngram.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpserve {

std::vector<int32_t> NgramProposer::Lookup(absl::Span<const int32_t> tokens,
                                           int64_t max_tokens) const {
  const int64_t len = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_, len - 1); n >= min_; --n) {
    const absl::Span<const int32_t> suffix = tokens.subspan(len - n);
    // Latest first: the most recent context is the likeliest to continue the same way.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t take = std::min(max_tokens, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + take);
    }
  }
  return {};
}

void NgramProposer::Propose(absl::Span<DraftSlot> slots, absl::Span<const DraftSampling>) {
  for (DraftSlot& slot : slots) slot.draft = Lookup(slot.tokens, slot.max_tokens);
}

std::string NgramProposer::Describe() const {
  return absl::StrCat("prompt lookup, n-grams of ", min_, "..", max_, " tokens");
}

}  // namespace tpserve
