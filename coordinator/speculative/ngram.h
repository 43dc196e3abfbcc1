// Prompt lookup (n-gram) drafting: the text a sequence is writing often repeats text it has
// read or written (a summary quoting its source, an edit of given code, extracted fields). The
// draft is what followed the latest earlier occurrence of the sequence's last n tokens, for n
// from ngram_max down to ngram_min; no weights, no model step.
//
//   NgramProposer ngram(/*min=*/1, /*max=*/4);
//   std::vector<int32_t> draft = ngram.Lookup(tokens, /*max_tokens=*/5);
#ifndef TPSERVE_COORDINATOR_SPECULATIVE_NGRAM_H_
#define TPSERVE_COORDINATOR_SPECULATIVE_NGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/speculative/speculation.h"

namespace tpserve {

class NgramProposer final : public Proposer {
 public:
  NgramProposer(int32_t ngram_min, int32_t ngram_max) : min_(ngram_min), max_(ngram_max) {}

  // The (up to max_tokens) tokens that followed the latest earlier occurrence of the longest
  // suffix of `tokens` of ngram_min..ngram_max tokens; empty when there is none.
  std::vector<int32_t> Lookup(absl::Span<const int32_t> tokens, int64_t max_tokens) const;

  void Propose(absl::Span<DraftSlot> slots, absl::Span<const DraftSampling> sampling) override;
  std::optional<double> SecondsPerDraftToken(int64_t) const override { return 0.0; }
  double assumed_cost_per_token() const override { return 0.0; }
  std::string Describe() const override;

 private:
  const int32_t min_;
  const int32_t max_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_SPECULATIVE_NGRAM_H_
