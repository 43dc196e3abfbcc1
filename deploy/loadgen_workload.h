// The load generator's workload: a deterministic sequence of requests (prompt length, output
// length, Poisson arrival gap, prompt text) drawn from one seed, so that //deploy:loadgen and
// bench/llama_cpp_loadgen.py send exactly the same requests in the same order.
//
//   TP_ASSIGN_OR_RETURN(LengthMix prompts, ParseLengthMix("64:0.5,512:0.5", "--prompt_tokens"));
//   Workload w(prompts, outputs, /*rate=*/2.0, /*seed=*/1);
//   WorkloadRequest r = w.Next();  // r.prompt: r.prompt_tokens words, one token each
//
// The draw, which bench/loadgen_common.py repeats step for step: a SplitMix64 stream seeded with
// `seed`; for each request, in order: u = next()/2^64 picks the prompt length (the first
// bucket whose cumulative weight share exceeds u), the same for the output length, then one
// draw for the arrival gap -ln(1 - u) / rate (drawn, and 0, when rate == 0), then one draw per
// prompt word: kPromptWords[next() % 64]. Words are joined by single spaces; each " word" is
// one token of GPT-2-style byte-level BPE vocabularies (SmolLM2's included), so a prompt of N
// words is about N tokens. The API's usage count says what was really sent.
//
// Thread-compatible: a Workload is not locked; share it under a mutex.
#ifndef TPSERVE_DEPLOY_LOADGEN_WORKLOAD_H_
#define TPSERVE_DEPLOY_LOADGEN_WORKLOAD_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

// SplitMix64 (Steele, Lea, Flood 2014): tiny, and easy to repeat exactly in Python.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double NextUnit();  // [0, 1): the top 53 bits

 private:
  uint64_t state_;
};

// Lengths in tokens with relative weights: "200" or "64:0.5,512:0.5".
struct LengthMix {
  std::vector<std::pair<int32_t, double>> buckets;  // (tokens > 0, weight > 0)
  int32_t Pick(double unit) const;                  // unit in [0, 1)
  int32_t Max() const;
};
// INVALID_ARGUMENT naming `flag_name`, the value and what is wrong.
absl::StatusOr<LengthMix> ParseLengthMix(const std::string& spec, const std::string& flag_name);

inline constexpr std::array<std::string_view, 64> kPromptWords = {
    "the",   "of",     "and",   "to",   "in",   "is",   "was",     "for",    "on",    "that",
    "with",  "as",     "by",    "at",   "from", "it",   "an",      "be",     "this",  "which",
    "or",    "are",    "his",   "had",  "not",  "but",  "were",    "have",   "one",   "all",
    "their", "they",   "has",   "been", "its",  "also", "new",     "more",   "after", "who",
    "first", "two",    "other", "time", "when", "into", "some",    "would",  "there", "can",
    "over",  "people", "only",  "most", "made", "year", "between", "during", "under", "three",
    "such",  "world",  "many",  "these"};

struct WorkloadRequest {
  int64_t index = 0;
  int32_t prompt_tokens = 0;   // wanted (= words in `prompt`)
  int32_t output_tokens = 0;   // wanted: sent as max_new_tokens
  double arrival_gap_s = 0.0;  // after the previous request's arrival; 0 in a closed loop
  std::string prompt;
};

class Workload {
 public:
  // rate: requests/s of the Poisson arrivals; 0 = closed loop.
  Workload(LengthMix prompt_mix, LengthMix output_mix, double rate, uint64_t seed);
  WorkloadRequest Next();

 private:
  LengthMix prompt_mix_;
  LengthMix output_mix_;
  double rate_;
  SplitMix64 rng_;
  int64_t next_index_ = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_LOADGEN_WORKLOAD_H_
