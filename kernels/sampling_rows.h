// A step's logit rows as a backend samples them where the logits are (Backend::SampleRows):
// one flat, self-contained record per row, with the variable parts (logit bias, the penalties'
// token counts, structured-output bitmask words) in shared arrays the rows index into, so a
// GPU backend uploads five arrays and runs one block per row. step/sampling_rows.h builds this
// from a StepSampling and assembles the results (speculative acceptance included); the row
// algorithm itself is kernels/cuda/row_sampling.h, run on the CPU by its test against the CPU
// sampler (step/sampling.h), whose semantics every field below has.
// Thread-safe: plain data.
#ifndef TPSERVE_KERNELS_SAMPLING_ROWS_H_
#define TPSERVE_KERNELS_SAMPLING_ROWS_H_

#include <cstdint>
#include <vector>

namespace tpserve {

// The most alternatives a row reports (step/sampling.h's kMaxTopLogprobs; asserted there).
inline constexpr int32_t kMaxRowTopLogprobs = 20;

enum class RowKind : int32_t {
  kScore = 0,   // a given token (prompt logprobs): logprob of scored_id under the raw logits
  kSample = 1,  // draw a token: bias, mask, penalties, temperature, truncation, Gumbel-max
};

struct SamplingRow {
  RowKind kind = RowKind::kSample;
  int32_t scored_id = -1;  // kScore: the token scored
  int32_t top_n = 0;       // alternatives to report, [0, kMaxRowTopLogprobs]
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t key = 0;   // the sampler's stream
  uint64_t draw = 0;  // the draw this row makes (its sequence's draws + its index)
  // [begin, end) of bias_ids / bias_values, added to the logits in order (duplicates add).
  int32_t bias_begin = 0, bias_end = 0;
  // [begin, end) of penalty_ids / penalty_counts: each id of the row's history once, with how
  // often it occurs (empty when no penalty applies).
  int32_t penalty_begin = 0, penalty_end = 0;
  // The row's structured-output bitmask: mask_word_count words from mask_begin of mask_words
  // (bit id % 32 of word id / 32); ids past them are forbidden. mask_begin < 0: no mask.
  int32_t mask_begin = -1, mask_word_count = 0;
};

struct SamplingRows {
  std::vector<SamplingRow> rows;  // row r reads logits row r
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  std::vector<int32_t> penalty_ids;
  std::vector<int32_t> penalty_counts;
  std::vector<int32_t> mask_words;
};

// What one row gave: the chosen (kSample) or scored (kScore) id, its logprob under the model's
// distribution (log-softmax after bias and mask, before penalties and truncation; the raw
// logits for kScore), and up to top_n alternatives, most likely first (forbidden ids never).
struct RowSample {
  int32_t id = -1;
  float logprob = 0.0f;
  int32_t num_top = 0;
  int32_t top_ids[kMaxRowTopLogprobs] = {};
  float top_logprobs[kMaxRowTopLogprobs] = {};
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_SAMPLING_ROWS_H_
