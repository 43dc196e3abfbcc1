#include "deploy/loadgen_workload.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tpserve {

uint64_t SplitMix64::Next() {
  state_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix64::NextUnit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int32_t LengthMix::Pick(double unit) const {
  double total = 0.0;
  for (const auto& [tokens, weight] : buckets) total += weight;
  double cumulative = 0.0;
  for (const auto& [tokens, weight] : buckets) {
    cumulative += weight;
    if (unit < cumulative / total) return tokens;
  }
  return buckets.back().first;
}

int32_t LengthMix::Max() const {
  int32_t m = 0;
  for (const auto& [tokens, weight] : buckets) m = std::max(m, tokens);
  return m;
}

absl::StatusOr<LengthMix> ParseLengthMix(const std::string& spec, const std::string& flag_name) {
  LengthMix mix;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag_name, " = \"", spec, "\": ", why,
                     " (want TOKENS or TOKENS:WEIGHT,TOKENS:WEIGHT,...)"));
  };
  if (spec.empty()) return bad("is empty");
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(item, absl::MaxSplits(':', 1));
    int32_t tokens = 0;
    double weight = 1.0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(parts.first), &tokens) || tokens <= 0) {
      return bad(absl::StrCat("token count \"", parts.first, "\" is not an integer > 0"));
    }
    if (item.find(':') != absl::string_view::npos &&
        (!absl::SimpleAtod(absl::StripAsciiWhitespace(parts.second), &weight) || !(weight > 0) ||
         !std::isfinite(weight))) {
      return bad(absl::StrCat("weight \"", parts.second, "\" is not a number > 0"));
    }
    mix.buckets.emplace_back(tokens, weight);
  }
  return mix;
}

Workload::Workload(LengthMix prompt_mix, LengthMix output_mix, double rate, uint64_t seed)
    : prompt_mix_(std::move(prompt_mix)),
      output_mix_(std::move(output_mix)),
      rate_(rate),
      rng_(seed) {}

WorkloadRequest Workload::Next() {
  WorkloadRequest r;
  r.index = next_index_++;
  r.prompt_tokens = prompt_mix_.Pick(rng_.NextUnit());
  r.output_tokens = output_mix_.Pick(rng_.NextUnit());
  const double u = rng_.NextUnit();
  r.arrival_gap_s = rate_ > 0 ? -std::log1p(-u) / rate_ : 0.0;
  for (int32_t i = 0; i < r.prompt_tokens; ++i) {
    if (i > 0) r.prompt += ' ';
    r.prompt += kPromptWords[rng_.Next() % kPromptWords.size()];
  }
  return r;
}

}  // namespace tpserve
