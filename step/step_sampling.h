// What a step's logits are for, said once, and done in one place: the rows of each sequence
// that score given tokens (prompt logprobs) and the rows that sample, with everything sampling
// needs (parameters, the sampler's seeded stream, the penalties' history, structured-output
// bitmasks, the draft the step verifies). The engine builds a StepSampling after the forward
// pass and hands it to ModelExecutor::Sample, which runs SampleStep where the logits are.
//
//   StepSampling sampling;  sampling.sequences.push_back(...);  // in batch order
//   TP_ASSIGN_OR_RETURN(std::vector<SequenceSamples> out,
//                       SampleStep(result.logits, vocab_size, sampling));
//
// Speculative acceptance happens here too: a sequence's sampling rows are drawn in order, row i
// with the draft's first i tokens in its history, and the first token that differs from the
// draft ends them (the target's own choice there is the step's last token), so a verified
// draft gives exactly the tokens one-at-a-time decoding would.
// Thread-safe: pure functions.
#ifndef TPSERVE_STEP_STEP_SAMPLING_H_
#define TPSERVE_STEP_STEP_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/sampling_rows.h"
#include "step/sampling.h"

namespace tpserve {

// One sequence's logit rows, in the step's order (a sequence with num_logits == 0 has none).
struct SequenceSampling {
  int64_t seq_id = 0;
  int64_t num_rows = 0;  // its StepBatch::Sequence::num_logits
  // The first scored_ids.size() rows each score a given token: row i the id scored_ids[i],
  // with `top_logprobs` alternatives (ScoreToken).
  std::vector<int32_t> scored_ids;
  int32_t top_logprobs = 0;
  // The rest, 1 + draft.size() rows when `samples` (none otherwise), draw tokens.
  bool samples = false;
  SamplingParams params;
  uint64_t key = 0;    // the sampler's stream (Sampler::key())
  uint64_t draws = 0;  // its draws so far (Sampler::draws())
  // The ids the penalties look at (prompt and generated so far); empty when none applies
  // (UsesHistory). Row i adds the draft's first i tokens.
  std::vector<int32_t> history;
  std::vector<int32_t> draft;  // the tokens the step verifies, in order
  // Structured output: none, or one bitmask per sampling row (bit id % 32 of word id / 32; an
  // empty one allows every id, ids past a shorter one's words none). Row i's is the
  // constraint's after the draft's first i tokens.
  std::vector<std::vector<int32_t>> masks;
};

struct StepSampling {
  std::vector<SequenceSampling> sequences;  // those with rows, in the batch's order
};

struct SequenceSamples {
  std::vector<SampledToken> scored;  // one per scored id
  // The draft's tokens the target drew too, then the target's own next token: 1 to
  // 1 + draft.size() tokens when the sequence samples, none otherwise.
  std::vector<SampledToken> sampled;
  uint64_t draws = 0;  // the sampler's draws after these (SequenceSampling::draws + rows drawn)
};

// Whether sampling with `params` reads the history (a penalty applies).
bool UsesHistory(const SamplingParams& params);

// Scores and samples every sequence's rows of `logits` ([rows, vocab_size], rows the sum of
// num_rows). INVALID_ARGUMENT naming the sequence and the field when the rows do not add up,
// a sequence's rows are not its scored ids plus 1 + draft.size() sampling rows, a mask count
// or width is off, or an id is outside [0, vocab_size).
absl::StatusOr<std::vector<SequenceSamples>> SampleStep(absl::Span<const float> logits,
                                                        int64_t vocab_size,
                                                        const StepSampling& sampling);

// The same work as rows a backend samples where the logits are (Backend::SampleRows): one
// SamplingRow per logit row, every sampling row of a verified draft drawn at once (row i with
// the draft's first i tokens in its history and its own draw), SampleStep's errors when
// `sampling` is malformed. FromRowSamples then keeps what SampleStep would: a draft's tokens up
// to the first the target drew otherwise, and the draws those rows made. Together they give
// SampleStep's results (sampling_rows_test, through the host run of the CUDA kernel's
// algorithm).
absl::StatusOr<SamplingRows> ToSamplingRows(int64_t vocab_size, const StepSampling& sampling);
// INVALID_ARGUMENT when `rows` is not one result per row of `sampling`.
absl::StatusOr<std::vector<SequenceSamples>> FromRowSamples(const StepSampling& sampling,
                                                            absl::Span<const RowSample> rows);

}  // namespace tpserve

#endif  // TPSERVE_STEP_STEP_SAMPLING_H_
