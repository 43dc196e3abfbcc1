#include "step/step_sampling.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

absl::Status Bad(const SequenceSampling& s, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("sampling: sequence ", s.seq_id, ": ", what));
}

absl::Status CheckSequence(const SequenceSampling& s, int64_t vocab_size) {
  const int64_t sampling_rows = s.samples ? 1 + static_cast<int64_t>(s.draft.size()) : 0;
  const int64_t rows = static_cast<int64_t>(s.scored_ids.size()) + sampling_rows;
  if (rows != s.num_rows) {
    return Bad(s, absl::StrCat("num_rows is ", s.num_rows, " but its ", s.scored_ids.size(),
                               " scored ids and ", sampling_rows, " sampling rows make ", rows));
  }
  if (!s.samples && !s.draft.empty()) {
    return Bad(s, absl::StrCat("a draft of ", s.draft.size(), " tokens but no sampling rows"));
  }
  if (!s.masks.empty() && static_cast<int64_t>(s.masks.size()) != sampling_rows) {
    return Bad(s, absl::StrCat("masks has ", s.masks.size(), " entries, expected 0 or ",
                               sampling_rows, " (one per sampling row)"));
  }
  const int64_t words = (vocab_size + 31) / 32;
  for (size_t i = 0; i < s.masks.size(); ++i) {
    if (static_cast<int64_t>(s.masks[i].size()) > words) {
      return Bad(s, absl::StrCat("masks[", i, "] has ", s.masks[i].size(), " words, at most ",
                                 words, " for a vocabulary of ", vocab_size));
    }
  }
  const auto check_ids = [&](const std::vector<int32_t>& ids, const char* field) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] >= vocab_size) {
        return Bad(s, absl::StrCat(field, "[", i, "] = ", ids[i], " is outside [0, ",
                                   vocab_size, ")"));
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status st = check_ids(s.scored_ids, "scored_ids"); !st.ok()) return st;
  if (absl::Status st = check_ids(s.draft, "draft"); !st.ok()) return st;
  if (s.samples) return ValidateSamplingParams(s.params, vocab_size);
  return absl::OkStatus();
}

}  // namespace

bool UsesHistory(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f;
}

absl::StatusOr<std::vector<SequenceSamples>> SampleStep(absl::Span<const float> logits,
                                                        int64_t vocab_size,
                                                        const StepSampling& sampling) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: vocab_size ", vocab_size));
  }
  int64_t total_rows = 0;
  for (const SequenceSampling& s : sampling.sequences) {
    if (absl::Status st = CheckSequence(s, vocab_size); !st.ok()) return st;
    total_rows += s.num_rows;
  }
  if (total_rows * vocab_size != static_cast<int64_t>(logits.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampling: the sequences ask for ", total_rows, " rows of logits; the step has ",
        static_cast<int64_t>(logits.size()) / vocab_size));
  }
  std::vector<SequenceSamples> out(sampling.sequences.size());
  int64_t row = 0;
  const auto row_of = [&](int64_t r) { return logits.subspan(r * vocab_size, vocab_size); };
  for (size_t k = 0; k < sampling.sequences.size(); ++k) {
    const SequenceSampling& s = sampling.sequences[k];
    SequenceSamples& o = out[k];
    for (int32_t id : s.scored_ids) o.scored.push_back(ScoreToken(row_of(row++), id, s.top_logprobs));
    o.draws = s.draws;
    if (!s.samples) continue;
    Sampler sampler(s.params, s.key, s.draws);
    std::vector<int32_t> history = s.history;
    const bool uses_history = UsesHistory(s.params);
    for (size_t i = 0; i <= s.draft.size(); ++i) {
      const absl::Span<const int32_t> mask =
          s.masks.empty() ? absl::Span<const int32_t>() : absl::MakeConstSpan(s.masks[i]);
      o.sampled.push_back(sampler.Sample(row_of(row + static_cast<int64_t>(i)), history, mask));
      const int32_t id = o.sampled.back().id;
      if (i == s.draft.size() || id != s.draft[i]) break;  // the target's own token ends them
      if (uses_history) history.push_back(id);
    }
    o.draws = sampler.draws();
    row += 1 + static_cast<int64_t>(s.draft.size());
  }
  return out;
}

}  // namespace tpserve
