#include "step/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "base/field_error.h"
#include "kernels/cuda/row_sampling.h"

namespace tpserve {
namespace {

// `path` is the field's proto path in a GenerateRequest.
absl::Status OutOfRange(const std::string& path, double value, const std::string& bound) {
  return FieldError(path, absl::StrCat(" = ", value, " is out of range: must be ", bound));
}

absl::Status CheckRange(const char* field, float value, float lo, float hi, bool lo_open,
                        const std::string& bound) {
  if (std::isnan(value) || value > hi || value < lo || (lo_open && value == lo)) {
    return OutOfRange(absl::StrCat("sampling.", field), value, bound);
  }
  return absl::OkStatus();
}

// log-softmax over all of `logits`, in double for the normaliser.
std::vector<float> LogSoftmax(absl::Span<const float> logits) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  std::vector<float> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_z;
  return out;
}

void ApplyPenalties(const SamplingParams& p, absl::Span<const int32_t> history,
                    std::vector<float>& logits) {
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) {
    return;
  }
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t id : history) {
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) ++counts[id];
  }
  for (const auto& [id, count] : counts) {
    float& x = logits[id];
    if (p.repetition_penalty != 1.0f) {
      x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
    }
    x -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
  }
}

}  // namespace

absl::Status ValidateSamplingParams(const SamplingParams& p, int64_t vocab_size) {
  if (std::isnan(p.temperature) || p.temperature < 0.0f || p.temperature > kMaxTemperature) {
    return OutOfRange("sampling.temperature", p.temperature,
                      absl::StrCat("0 (greedy) or in (0, ", kMaxTemperature, "]"));
  }
  if (p.top_k < 0 || p.top_k > vocab_size) {
    return OutOfRange("sampling.top_k", p.top_k, absl::StrCat("in [0, ", vocab_size, "] (0 = off)"));
  }
  absl::Status s = CheckRange("top_p", p.top_p, 0.0f, 1.0f, /*lo_open=*/true, "in (0, 1]");
  if (s.ok()) s = CheckRange("min_p", p.min_p, 0.0f, 1.0f, false, "in [0, 1]");
  if (s.ok()) {
    s = CheckRange("repetition_penalty", p.repetition_penalty, 0.0f, kMaxRepetitionPenalty, true,
                   absl::StrCat("in (0, ", kMaxRepetitionPenalty, "]"));
  }
  if (s.ok()) s = CheckRange("presence_penalty", p.presence_penalty, -2.0f, 2.0f, false, "in [-2, 2]");
  if (s.ok()) {
    s = CheckRange("frequency_penalty", p.frequency_penalty, -2.0f, 2.0f, false, "in [-2, 2]");
  }
  if (s.ok() && (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)) {
    s = OutOfRange("top_logprobs", p.top_logprobs, absl::StrCat("in [0, ", kMaxTopLogprobs, "]"));
  }
  if (!s.ok()) return s;
  if (p.logit_bias.size() > static_cast<size_t>(kMaxLogitBiasEntries)) {
    return FieldError("sampling.logit_bias", absl::StrCat(" has ", p.logit_bias.size(),
                                                          " entries: at most ",
                                                          kMaxLogitBiasEntries));
  }
  for (const auto& [id, bias] : p.logit_bias) {
    const std::string path = absl::StrCat("sampling.logit_bias[", id, "]");
    if (id < 0 || id >= vocab_size) {
      return FieldError(path, absl::StrCat(": token id ", id, " is out of range: must be in [0, ",
                                           vocab_size, ")"));
    }
    if (std::isnan(bias) || bias < -kMaxLogitBias || bias > kMaxLogitBias) {
      return OutOfRange(path, bias, absl::StrCat("in [-", kMaxLogitBias, ", ", kMaxLogitBias, "]"));
    }
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params),
      key_(params.seed.has_value() ? *params.seed
                                   : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()) {}

Sampler::Sampler(const SamplingParams& params, uint64_t key, uint64_t draws)
    : params_(params), key_(key), draws_(draws) {}

// Truncates to the allowed candidates (top-k, then top-p, then min-p, all over the tempered
// distribution), then draws with the Gumbel-max trick: the token maximising
// logit / T + Gumbel noise, where each token id has its own seeded noise. That is an exact
// draw from softmax(logits / T) over the candidates, and unlike inverse-CDF sampling its choice
// depends on the order of the scores only, not on where every CDF boundary falls: logits that
// differ by rounding (another tensor-parallel degree, another summation order) pick the same
// token unless the top two perturbed scores are that close, as with greedy decoding.
int32_t Sampler::Draw(const std::vector<float>& x, uint64_t draw) const {
  const int32_t vocab = static_cast<int32_t>(x.size());
  const double inv_t = 1.0 / params_.temperature;
  std::vector<int32_t> candidates;
  const bool truncates = params_.top_k > 0 || params_.top_p < 1.0f || params_.min_p > 0.0f;
  if (truncates) {
    candidates.resize(vocab);
    std::iota(candidates.begin(), candidates.end(), 0);
    const auto by_logit = [&x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    size_t keep = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : candidates.size();
    std::partial_sort(candidates.begin(), candidates.begin() + keep, candidates.end(), by_logit);
    candidates.resize(keep);
    std::vector<double> probs(keep);
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      probs[i] = std::exp((x[candidates[i]] - x[candidates[0]]) * inv_t);
      sum += probs[i];
    }
    for (double& p : probs) p /= sum;
    if (params_.top_p < 1.0f) {  // nucleus: the smallest prefix whose mass reaches top_p
      double mass = 0.0;
      size_t n = 0;
      while (n < keep && mass < params_.top_p) mass += probs[n++];
      keep = std::max<size_t>(n, 1);
    }
    if (params_.min_p > 0.0f) {  // relative to the most likely token
      const double floor = params_.min_p * probs[0];
      size_t n = 1;
      while (n < keep && probs[n] >= floor) ++n;
      keep = n;
    }
    candidates.resize(keep);
  }
  int32_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  auto consider = [&](int32_t id) {
    const double gumbel = SamplingGumbel(key_, draw, static_cast<uint32_t>(id));
    const double score = x[id] * inv_t + gumbel;
    if (score > best_score) {
      best_score = score;
      best = id;
    }
  };
  if (truncates) {
    for (int32_t id : candidates) consider(id);
  } else {
    for (int32_t id = 0; id < vocab; ++id) consider(id);
  }
  return best;
}

namespace {

// The `n` most likely ids of a log-softmax row (ties to the lower id), skipping forbidden ones.
std::vector<std::pair<int32_t, float>> TopLogprobs(const std::vector<float>& logprobs, int32_t n) {
  std::vector<std::pair<int32_t, float>> out;
  if (n <= 0) return out;
  std::vector<int32_t> top(logprobs.size());
  std::iota(top.begin(), top.end(), 0);
  const size_t k = std::min<size_t>(n, top.size());
  std::partial_sort(top.begin(), top.begin() + k, top.end(), [&](int32_t a, int32_t b) {
    return logprobs[a] > logprobs[b] || (logprobs[a] == logprobs[b] && a < b);
  });
  for (size_t i = 0; i < k; ++i) {
    if (std::isinf(logprobs[top[i]])) break;  // forbidden: not an alternative
    out.emplace_back(top[i], logprobs[top[i]]);
  }
  return out;
}

}  // namespace

SampledToken ScoreToken(absl::Span<const float> logits, int32_t id, int32_t top_logprobs) {
  const std::vector<float> logprobs = LogSoftmax(logits);
  SampledToken out;
  out.id = id;
  out.logprob = logprobs.at(static_cast<size_t>(id));
  out.top_logprobs = TopLogprobs(logprobs, top_logprobs);
  return out;
}

SampledToken Sampler::Sample(absl::Span<const float> row, absl::Span<const int32_t> history,
                             absl::Span<const int32_t> allowed) {
  const int32_t vocab = static_cast<int32_t>(row.size());
  SampledToken out;
  // The row as sampling sees it: logit_bias added, what the constraint forbids at -inf.
  std::vector<float> adjusted;
  absl::Span<const float> logits = row;
  if (!params_.logit_bias.empty() || !allowed.empty()) {
    adjusted.assign(row.begin(), row.end());
    for (const auto& [id, bias] : params_.logit_bias) {
      if (id < vocab) adjusted[id] += bias;
    }
    if (!allowed.empty()) {
      // Word by word: a constraint mostly allows all of a word's 32 ids or none.
      constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
      for (int32_t base = 0; base < vocab; base += 32) {
        const size_t word = static_cast<size_t>(base) / 32;
        const uint32_t bits = word < allowed.size() ? static_cast<uint32_t>(allowed[word]) : 0u;
        if (bits == 0xffffffffu) continue;
        const int32_t end = std::min(vocab, base + 32);
        for (int32_t id = base; id < end; ++id) {
          if (((bits >> (id - base)) & 1u) == 0) adjusted[id] = kMinusInf;
        }
      }
    }
    logits = adjusted;
  }
  const std::vector<float> model_logprobs = LogSoftmax(logits);

  std::vector<float> x(logits.begin(), logits.end());
  ApplyPenalties(params_, history, x);
  out.id = Choose(x, draws_);
  if (params_.temperature != 0.0f) ++draws_;
  out.logprob = model_logprobs[out.id];
  out.top_logprobs = TopLogprobs(model_logprobs, params_.top_logprobs);
  return out;
}

int32_t Sampler::Choose(const std::vector<float>& x, uint64_t draw) const {
  if (params_.temperature == 0.0f) {
    // Greedy; ties go to the lowest id, as in llama.cpp and transformers.
    return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  }
  return Draw(x, draw);
}

}  // namespace tpserve
