#include "coordinator/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

absl::Status OutOfRange(const char* field, double value, const std::string& bound) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling.", field, " = ", value, " is out of range: must be ", bound));
}

absl::Status CheckRange(const char* field, float value, float lo, float hi, bool lo_open,
                        const std::string& bound) {
  if (std::isnan(value) || value > hi || value < lo || (lo_open && value == lo)) {
    return OutOfRange(field, value, bound);
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
    return OutOfRange("temperature", p.temperature,
                      absl::StrCat("0 (greedy) or in (0, ", kMaxTemperature, "]"));
  }
  if (p.top_k < 0 || p.top_k > vocab_size) {
    return OutOfRange("top_k", p.top_k, absl::StrCat("in [0, ", vocab_size, "] (0 = off)"));
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
  return s;
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed.has_value() ? *params.seed : std::random_device{}()) {}

SampledToken Sampler::Sample(absl::Span<const float> logits, absl::Span<const int32_t> history) {
  const int32_t vocab = static_cast<int32_t>(logits.size());
  SampledToken out;
  const std::vector<float> model_logprobs = LogSoftmax(logits);

  std::vector<float> x(logits.begin(), logits.end());
  ApplyPenalties(params_, history, x);

  if (params_.temperature == 0.0f) {
    // Greedy; ties go to the lowest id, as in llama.cpp and transformers.
    out.id = static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
  } else {
    // Candidates sorted by descending logit: only top_k of them when top-k is on.
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    const auto by_logit = [&x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    size_t keep = params_.top_k > 0 ? static_cast<size_t>(params_.top_k) : order.size();
    std::partial_sort(order.begin(), order.begin() + keep, order.end(), by_logit);
    order.resize(keep);

    std::vector<double> probs(keep);
    const double inv_t = 1.0 / params_.temperature;
    double sum = 0.0;
    for (size_t i = 0; i < keep; ++i) {
      probs[i] = std::exp((x[order[i]] - x[order[0]]) * inv_t);
      sum += probs[i];
    }
    for (double& p : probs) p /= sum;
    // Nucleus: the smallest prefix whose mass reaches top_p.
    if (params_.top_p < 1.0f) {
      double mass = 0.0;
      size_t n = 0;
      while (n < keep && mass < params_.top_p) mass += probs[n++];
      keep = std::max<size_t>(n, 1);
    }
    // min-p relative to the most likely token (probs[0]).
    if (params_.min_p > 0.0f) {
      const double floor = params_.min_p * probs[0];
      size_t n = 1;
      while (n < keep && probs[n] >= floor) ++n;
      keep = n;
    }
    double kept_mass = 0.0;
    for (size_t i = 0; i < keep; ++i) kept_mass += probs[i];
    // A 53-bit uniform in [0, kept_mass): std::uniform_real_distribution is not specified to be
    // the same across standard libraries, this is.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * kept_mass;
    double acc = 0.0;
    out.id = order[keep - 1];
    for (size_t i = 0; i < keep; ++i) {
      acc += probs[i];
      if (u < acc) {
        out.id = order[i];
        break;
      }
    }
  }
  out.logprob = model_logprobs[out.id];
  if (params_.top_logprobs > 0) {
    std::vector<int32_t> top(vocab);
    std::iota(top.begin(), top.end(), 0);
    const size_t n = std::min<size_t>(params_.top_logprobs, top.size());
    std::partial_sort(top.begin(), top.begin() + n, top.end(), [&](int32_t a, int32_t b) {
      return model_logprobs[a] > model_logprobs[b] || (model_logprobs[a] == model_logprobs[b] && a < b);
    });
    for (size_t i = 0; i < n; ++i) out.top_logprobs.emplace_back(top[i], model_logprobs[top[i]]);
  }
  return out;
}

}  // namespace tpserve
