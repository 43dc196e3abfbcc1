#include "step/step_batch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace tpserve {

StepBatch::Sequence& StepBatch::Add(int64_t seq_id, int64_t start_position,
                                    absl::Span<const int32_t> tokens,
                                    std::vector<int32_t> block_table, int64_t num_logits) {
  Sequence& s = sequences.emplace_back();
  s.seq_id = seq_id;
  s.first_token = num_tokens();
  s.num_tokens = static_cast<int64_t>(tokens.size());
  s.start_position = start_position;
  s.num_logits = num_logits;
  s.block_table = std::move(block_table);
  token_ids.insert(token_ids.end(), tokens.begin(), tokens.end());
  return s;
}

std::vector<StepBatch> MicroBatches(const StepBatch& batch, int parts) {
  const int64_t n = static_cast<int64_t>(batch.sequences.size());
  const int64_t count = std::max<int64_t>(1, std::min<int64_t>(parts, n));
  std::vector<StepBatch> out(count);
  int64_t part = 0, tokens = 0;
  for (int64_t i = 0; i < n; ++i) {
    const StepBatch::Sequence& s = batch.sequences[i];
    // Move on once this part has its share, keeping a sequence for every part still to come.
    if (part + 1 < count && !out[part].empty() &&
        (tokens * count >= (part + 1) * batch.num_tokens() || n - i == count - part - 1)) {
      ++part;
    }
    StepBatch::Sequence& copy =
        out[part].Add(s.seq_id, s.start_position, batch.tokens(s), s.block_table, s.num_logits);
    copy.attention_rank = s.attention_rank;
    copy.samples = s.samples;
    copy.num_drafts = s.num_drafts;
    tokens += s.num_tokens;
  }
  return out;
}

int64_t StepBatch::num_logit_rows() const {
  int64_t rows = 0;
  for (const Sequence& s : sequences) rows += s.num_logits;
  return rows;
}

absl::Status StepBatch::CheckShape() const {
  int64_t next = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Sequence& s = sequences[i];
    if (s.first_token != next) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: first_token = %d, expected %d (sequences tile token_ids in order)", i,
          s.first_token, next));
    }
    if (s.num_tokens < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("sequence %d: num_tokens = %d, needs at least 1", i, s.num_tokens));
    }
    if (s.num_logits < 0 || s.num_logits > s.num_tokens) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: num_logits = %d is outside [0, num_tokens = %d]", i, s.num_logits,
          s.num_tokens));
    }
    if (s.start_position < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: start_position = %d is negative", i, s.start_position));
    }
    if (i > 0 && (s.attention_rank < sequences[i - 1].attention_rank ||
                  (sequences[i - 1].attention_rank < 0) != (s.attention_rank < 0))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: attention_rank = %d after %d (every sequence names a rank or none does, "
          "in rank order)", i, s.attention_rank, sequences[i - 1].attention_rank));
    }
    if (s.attention_rank < -1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "sequence %d: attention_rank = %d is below -1", i, s.attention_rank));
    }
    next += s.num_tokens;
  }
  if (next != num_tokens()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the sequences cover %d tokens, token_ids has %d", next, num_tokens()));
  }
  return absl::OkStatus();
}

}  // namespace tpserve
