#include "step/step_sampling.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

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

static_assert(kMaxRowTopLogprobs == kMaxTopLogprobs, "a row reports every alternative asked for");

SampledToken FromRow(const RowSample& r) {
  SampledToken t;
  t.id = r.id;
  t.logprob = r.logprob;
  for (int32_t i = 0; i < r.num_top; ++i) t.top_logprobs.emplace_back(r.top_ids[i], r.top_logprobs[i]);
  return t;
}

// The step's rows, when every sequence is well formed.
absl::StatusOr<int64_t> CheckSampling(int64_t vocab_size, const StepSampling& sampling) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: vocab_size ", vocab_size));
  }
  int64_t total_rows = 0;
  for (const SequenceSampling& s : sampling.sequences) {
    if (absl::Status st = CheckSequence(s, vocab_size); !st.ok()) return st;
    total_rows += s.num_rows;
  }
  return total_rows;
}

}  // namespace

bool UsesHistory(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
         p.frequency_penalty != 0.0f;
}

absl::StatusOr<std::vector<SequenceSamples>> SampleStep(absl::Span<const float> logits,
                                                        int64_t vocab_size,
                                                        const StepSampling& sampling) {
  TP_ASSIGN_OR_RETURN(const int64_t total_rows, CheckSampling(vocab_size, sampling));
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

absl::StatusOr<SamplingRows> ToSamplingRows(int64_t vocab_size, const StepSampling& sampling) {
  TP_ASSIGN_OR_RETURN(const int64_t total_rows, CheckSampling(vocab_size, sampling));
  SamplingRows out;
  out.rows.reserve(static_cast<size_t>(total_rows));
  const auto index = [](size_t n) { return static_cast<int32_t>(n); };
  for (const SequenceSampling& s : sampling.sequences) {
    for (int32_t id : s.scored_ids) {
      SamplingRow row;
      row.kind = RowKind::kScore;
      row.scored_id = id;
      row.top_n = s.top_logprobs;
      out.rows.push_back(row);
    }
    if (!s.samples) continue;
    const SamplingParams& p = s.params;
    SamplingRow row;
    row.kind = RowKind::kSample;
    row.top_n = p.top_logprobs;
    row.temperature = p.temperature;
    row.top_k = p.top_k;
    row.top_p = p.top_p;
    row.min_p = p.min_p;
    row.repetition_penalty = p.repetition_penalty;
    row.presence_penalty = p.presence_penalty;
    row.frequency_penalty = p.frequency_penalty;
    row.key = s.key;
    row.bias_begin = index(out.bias_ids.size());
    for (const auto& [id, bias] : p.logit_bias) {
      out.bias_ids.push_back(id);
      out.bias_values.push_back(bias);
    }
    row.bias_end = index(out.bias_ids.size());
    // The history's counts; row i adds the draft's first i tokens.
    std::map<int32_t, int32_t> counts;
    const bool penalises = UsesHistory(p);
    if (penalises) {
      for (int32_t id : s.history) {
        if (id >= 0 && id < vocab_size) ++counts[id];
      }
    }
    for (size_t i = 0; i <= s.draft.size(); ++i) {
      // Greedy rows draw nothing; each drawing row makes the draw after the one before it.
      row.draw = s.draws + (p.temperature != 0.0f ? i : 0);
      if (penalises) {
        if (i > 0) ++counts[s.draft[i - 1]];
        row.penalty_begin = index(out.penalty_ids.size());
        for (const auto& [id, count] : counts) {
          out.penalty_ids.push_back(id);
          out.penalty_counts.push_back(count);
        }
        row.penalty_end = index(out.penalty_ids.size());
      }
      row.mask_begin = -1;
      row.mask_word_count = 0;
      if (!s.masks.empty() && !s.masks[i].empty()) {  // an empty mask allows every id
        row.mask_begin = index(out.mask_words.size());
        row.mask_word_count = index(s.masks[i].size());
        out.mask_words.insert(out.mask_words.end(), s.masks[i].begin(), s.masks[i].end());
      }
      out.rows.push_back(row);
    }
  }
  return out;
}

absl::StatusOr<std::vector<SequenceSamples>> FromRowSamples(const StepSampling& sampling,
                                                            absl::Span<const RowSample> rows) {
  size_t total_rows = 0;  // the rows read below
  for (const SequenceSampling& s : sampling.sequences) {
    total_rows += s.scored_ids.size() + (s.samples ? 1 + s.draft.size() : 0);
  }
  if (total_rows != rows.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: ", rows.size(),
                                                   " row results for a step of ", total_rows,
                                                   " rows"));
  }
  std::vector<SequenceSamples> out(sampling.sequences.size());
  size_t row = 0;
  for (size_t k = 0; k < sampling.sequences.size(); ++k) {
    const SequenceSampling& s = sampling.sequences[k];
    SequenceSamples& o = out[k];
    for (size_t i = 0; i < s.scored_ids.size(); ++i) o.scored.push_back(FromRow(rows[row++]));
    o.draws = s.draws;
    if (!s.samples) continue;
    for (size_t i = 0; i <= s.draft.size(); ++i) {
      o.sampled.push_back(FromRow(rows[row + i]));
      if (i == s.draft.size() || o.sampled.back().id != s.draft[i]) break;
    }
    if (s.params.temperature != 0.0f) o.draws += o.sampled.size();
    row += 1 + s.draft.size();
  }
  return out;
}

}  // namespace tpserve
