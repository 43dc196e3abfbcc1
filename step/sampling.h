// Turns one row of logits into the next token: repetition/presence/frequency penalties, then
// temperature, top-k, top-p (nucleus) and min-p truncation, then a seeded Gumbel-max draw (each
// token id has its own noise, so logits that differ only by rounding give the same token).
// Temperature 0 is greedy. Also reports the chosen token's log-probability and the top-n alternatives.
//
//   TP_RETURN_IF_ERROR(ValidateSamplingParams(params, vocab_size));
//   Sampler sampler(params);  SampledToken t = sampler.Sample(logits, history);
//
// Threading: a Sampler holds the RNG of one sequence; use it from one thread at a time.
#ifndef TPSERVE_STEP_SAMPLING_H_
#define TPSERVE_STEP_SAMPLING_H_

#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpserve {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy; otherwise in (0, kMaxTemperature]
  int32_t top_k = 0;                // 0 = off; else keep the k most likely
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1]; drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // (0, kMaxRepetitionPenalty]; 1 = off (CTRL-style)
  float presence_penalty = 0.0f;    // [-2, 2], OpenAI semantics
  float frequency_penalty = 0.0f;   // [-2, 2], OpenAI semantics
  std::optional<uint64_t> seed;     // same seed, same logits -> same tokens
  int32_t top_logprobs = 0;         // [0, kMaxTopLogprobs] alternatives to report
  // Added to the logits of these ids before anything else (OpenAI's logit_bias): at most
  // kMaxLogitBiasEntries ids, each bias in [-kMaxLogitBias, kMaxLogitBias].
  std::vector<std::pair<int32_t, float>> logit_bias;
};

inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int32_t kMaxLogitBiasEntries = 300;
inline constexpr float kMaxLogitBias = 100.0f;

// INVALID_ARGUMENT naming the field, the value and the bound (NaN included).
absl::Status ValidateSamplingParams(const SamplingParams& params, int64_t vocab_size);

struct SampledToken {
  int32_t id = -1;
  // log-softmax of the model's logits after logit_bias and the structured-output mask (before
  // penalties or truncation); 0 for a token the constraint forced (jump-forward)
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top_logprobs;  // most likely first
};

// A token that was given, not drawn (a prompt token): its logprob under log-softmax(logits), the
// model's raw distribution, and the `top_logprobs` most likely alternatives.
// REQUIRES: 0 <= id < logits.size().
SampledToken ScoreToken(absl::Span<const float> logits, int32_t id, int32_t top_logprobs);

class Sampler {
 public:
  // REQUIRES: ValidateSamplingParams(params, ...) is OK.
  explicit Sampler(const SamplingParams& params);
  // The same stream elsewhere (the rank that samples): key() and draws() of the original.
  Sampler(const SamplingParams& params, uint64_t key, uint64_t draws);

  const SamplingParams& params() const { return params_; }
  uint64_t key() const { return key_; }
  uint64_t draws() const { return draws_; }  // draws so far (greedy rows draw nothing)
  // Catches up with draws made by a copy elsewhere (SequenceSamples::draws).
  void set_draws(uint64_t draws) { draws_ = draws; }

  // `logits` is one row over the vocabulary; `history` holds the ids the penalties look at
  // (prompt and generated so far). `allowed`, when not empty, is a structured-output bitmask
  // (coordinator/structured/matcher.h: bit id % 32 of word id / 32): only those ids can be
  // chosen or reported, and the logprobs are of the distribution over them.
  SampledToken Sample(absl::Span<const float> logits, absl::Span<const int32_t> history,
                      absl::Span<const int32_t> allowed = {});

 private:
  // The id a draw numbered `draw` picks from these (penalised) logits.
  int32_t Choose(const std::vector<float>& logits, uint64_t draw) const;
  int32_t Draw(const std::vector<float>& logits, uint64_t draw) const;

  SamplingParams params_;
  uint64_t key_;       // the seed, or a random one
  uint64_t draws_ = 0;  // Sample calls so far: each draw gets fresh noise
};

}  // namespace tpserve

#endif  // TPSERVE_STEP_SAMPLING_H_
