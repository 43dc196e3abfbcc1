#include "coordinator/speculative/speculation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tpserve {

absl::StatusOr<SpeculativeMethod> ParseSpeculativeMethod(absl::string_view name) {
  if (name == "off") return SpeculativeMethod::kOff;
  if (name == "ngram") return SpeculativeMethod::kNgram;
  if (name == "draft") return SpeculativeMethod::kDraft;
  if (name == "mtp") return SpeculativeMethod::kMtp;
  return absl::InvalidArgumentError(absl::StrCat("--speculative=", std::string(name),
                                                 ": must be off, ngram, draft or mtp"));
}

const char* SpeculativeMethodName(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kOff:
      return "off";
    case SpeculativeMethod::kNgram:
      return "ngram";
    case SpeculativeMethod::kDraft:
      return "draft";
    case SpeculativeMethod::kMtp:
      return "mtp";
  }
  return "?";
}

absl::Status ValidateSpeculativeOptions(const SpeculativeOptions& o) {
  if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > kMaxSpeculativeTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_speculative_tokens=", o.num_speculative_tokens, ": must be in [1, ",
                     kMaxSpeculativeTokens, "]"));
  }
  if (o.method == SpeculativeMethod::kMtp && o.num_speculative_tokens != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--num_speculative_tokens=", o.num_speculative_tokens,
        ": --speculative=mtp drafts 1 token per step (the checkpoint's MTP layer predicts the "
        "token after the next one from the target's hidden state; chaining it is not built)"));
  }
  if (o.max_batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_max_batch=", o.max_batch, ": must be >= 0 (0 = no limit)"));
  }
  if (o.ngram_min < 1 || o.ngram_max < o.ngram_min || o.ngram_max > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt lookup n-gram sizes [", o.ngram_min, ", ", o.ngram_max,
        "]: need 1 <= min <= max <= 64"));
  }
  if (!(o.verify_cost_per_token >= 0.0 && o.verify_cost_per_token <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative verify_cost_per_token=", o.verify_cost_per_token, ": must be in [0, 1]"));
  }
  return absl::OkStatus();
}

void StepCostModel::Observe(double tokens, double seconds) {
  w_ = kForget * w_ + 1.0;
  sx_ = kForget * sx_ + tokens;
  sy_ = kForget * sy_ + seconds;
  sxx_ = kForget * sxx_ + tokens * tokens;
  sxy_ = kForget * sxy_ + tokens * seconds;
}

std::optional<double> StepCostModel::SecondsPerToken() const {
  const double var = sxx_ * w_ - sx_ * sx_;
  if (w_ <= 0 || var <= 1e-9 * std::max(1.0, sxx_ * w_)) return std::nullopt;
  return std::max(0.0, (sxy_ * w_ - sx_ * sy_) / var);
}

std::optional<double> StepCostModel::Seconds(double tokens) const {
  if (w_ <= 0) return std::nullopt;
  // One size seen so far: its mean time, whatever the size asked for.
  const double b = SecondsPerToken().value_or(0.0);
  // The intercept of the fit with the slope held at >= 0; a step never costs less than 0.
  return std::max(0.0, (sy_ - b * sx_) / w_ + b * tokens);
}

SpeculationPolicy::SpeculationPolicy(const SpeculativeOptions& options, const Proposer* proposer)
    : options_(options), proposer_(proposer) {}

int SpeculationPolicy::SizeClass(int64_t num_decoding) {
  int c = 0;
  for (int64_t n = std::max<int64_t>(1, num_decoding); n > 1 && c + 1 < kSizeClasses; n >>= 1) ++c;
  return c;
}

void SpeculationPolicy::ObserveStep(int64_t num_decoding, int64_t tokens, double seconds) {
  by_size_[SizeClass(num_decoding)].Observe(static_cast<double>(tokens), seconds);
  all_.Observe(static_cast<double>(tokens), seconds);
}

double SpeculationPolicy::CostPerDraftToken(int64_t num_decoding) const {
  const int64_t n = std::max<int64_t>(1, num_decoding);
  const StepCostModel& near = by_size_[SizeClass(n)];
  std::optional<double> step = near.Seconds(static_cast<double>(n));
  if (!step.has_value()) step = all_.Seconds(static_cast<double>(n));
  std::optional<double> verify = near.SecondsPerToken();
  if (!verify.has_value()) verify = all_.SecondsPerToken();
  const std::optional<double> draft =
      proposer_ != nullptr ? proposer_->SecondsPerDraftToken(n) : std::optional<double>(0.0);
  const double assumed_draft = proposer_ != nullptr ? proposer_->assumed_cost_per_token() : 0.0;
  if (!step.has_value() || *step <= 0) return options_.verify_cost_per_token + assumed_draft;
  const double verify_s = verify.has_value() ? *verify : options_.verify_cost_per_token * *step;
  // The step is shared: a draft's time delays all n sequences, so it pays only if its expected
  // tokens beat what the step already makes per second (n tokens per step(n)). Compute-bound
  // steps (step(n) growing with n) price drafts out as streams are added.
  return static_cast<double>(n) *
         (verify_s + (draft.has_value() ? *draft : assumed_draft * *step)) / *step;
}

int64_t SpeculationPolicy::DraftLength(SpeculationState& s, int64_t num_decoding,
                                       int64_t remaining) const {
  if (options_.max_batch > 0 && num_decoding > options_.max_batch) return 0;
  const int64_t cap = std::min<int64_t>(options_.num_speculative_tokens, remaining);
  if (cap <= 0) return 0;
  if (!options_.adaptive) return cap;
  // With per-token acceptance a, k drafts yield (1 - a^(k+1)) / (1 - a) tokens (the accepted
  // run plus the token sampled after it) for a step costing 1 + k * cost.
  const double cost = CostPerDraftToken(num_decoding);
  const double a = std::min(AcceptanceRate(s), 0.999);
  int64_t best_k = 0;
  double best_gain = 1.0;  // plain decoding: one token per step of cost 1
  for (int64_t k = 1; k <= cap; ++k) {
    const double tokens = (1.0 - std::pow(a, static_cast<double>(k + 1))) / (1.0 - a);
    const double gain = tokens / (1.0 + static_cast<double>(k) * cost);
    if (gain > best_gain * 1.02) {  // a 2% edge, so noise alone does not turn it on
      best_gain = gain;
      best_k = k;
    }
  }
  if (best_k > 0) return best_k;
  // Would any K pay if every draft were accepted (k + 1 tokens for 1 + k * cost)?
  bool could_pay = false;
  for (int64_t k = 1; k <= cap && !could_pay; ++k) {
    could_pay = static_cast<double>(k + 1) / (1.0 + static_cast<double>(k) * cost) > 1.02;
  }
  if (could_pay && ++s.idle_steps >= s.probe_interval) {
    s.idle_steps = 0;
    s.probe_interval = std::min(2 * s.probe_interval, kMaxProbeInterval);
    return 1;
  }
  return 0;
}

void SpeculationPolicy::Observe(SpeculationState& s, int64_t drafted, int64_t accepted) const {
  if (drafted <= 0) return;
  // The target rules on drafts up to and including the first it rejects.
  const int64_t tested = std::min(drafted, accepted + 1);
  constexpr double kWeight = 0.3;  // mostly the last few steps: text changes character
  s.acceptance += kWeight * (static_cast<double>(accepted) / static_cast<double>(tested) -
                             s.acceptance);
  s.idle_steps = 0;
  if (accepted > 0) s.probe_interval = kProbeInterval;
  s.draft_tokens += static_cast<int32_t>(drafted);
  s.accepted_tokens += static_cast<int32_t>(accepted);
  ++s.verify_steps;
}

}  // namespace tpserve
