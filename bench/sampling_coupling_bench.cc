// What tpserve's way of drawing a draft's proposals costs and gives (the reason its device
// sampler, kernels/cuda/row_sampling.h, draws with the CPU sampler's per-id noise instead of
// FlashInfer's sampling kernels and their own Philox stream). A draft proposes the token the
// target's sampler would draw at that position with the noise it will draw with there (its draw r
// ahead: a Gumbel-max coupling), and the target keeps the proposal when its own draw gives the
// same token. So the tokens are exactly those of decoding without speculation, seed for seed, on
// any backend. The textbook rule (accept with min(1, p/q), else draw from the residual) keeps
// only the distribution, not the seeded tokens, and accepts with probability 1 - TV(p, q), the
// most any scheme can. Measured here through SampleStep, for draft logits that are the target's
// plus Gaussian error of stddev sigma (a draft model as good as that): the coupling's acceptance,
// the textbook rule's (computed exactly from the two distributions), and the agreement of two
// independent draws (a draft drawn with noise of its own, then checked for equality).
//
//   bazel run -c opt //bench:sampling_coupling_bench -- --rows=1000
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "step/sampling.h"
#include "step/step_sampling.h"

ABSL_FLAG(int, rows, 1000, "target rows per setting");
ABSL_FLAG(int, vocab, 32000, "vocabulary size");

namespace tpserve {
namespace {

int32_t Draw(const std::vector<float>& logits, const SamplingParams& params, uint64_t key,
             uint64_t draw) {
  StepSampling one;
  SequenceSampling& s = one.sequences.emplace_back();
  s.num_rows = 1;
  s.samples = true;
  s.params = params;
  s.key = key;
  s.draws = draw;
  absl::StatusOr<std::vector<SequenceSamples>> out =
      SampleStep(logits, static_cast<int64_t>(logits.size()), one);
  return out.ok() ? (*out)[0].sampled.at(0).id : -1;
}

// The distribution the sampler draws from: softmax(logits / T), cut to the shortest prefix
// (by probability) whose mass reaches top_p, renormalised.
std::vector<double> Distribution(const std::vector<float>& logits, float t, float top_p) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / t);
  for (double& v : p) v /= sum;
  if (top_p >= 1.0f) return p;
  std::vector<int32_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  double mass = 0;
  size_t n = 0;
  while (n < order.size() && mass < top_p) mass += p[order[n++]];
  std::vector<double> cut(p.size(), 0.0);
  for (size_t k = 0; k < n; ++k) cut[order[k]] = p[order[k]] / mass;
  return cut;
}

int Main() {
  const int rows = absl::GetFlag(FLAGS_rows), vocab = absl::GetFlag(FLAGS_vocab);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Setting {
    const char* name;
    float temperature, top_p;
  };
  const Setting settings[] = {{"T=1.0", 1.0f, 1.0f}, {"T=0.7, top-p 0.9", 0.7f, 0.9f}};
  std::printf("sampling_coupling_bench: %d rows per cell, vocabulary %d, target logits N(0, 2.5^2)\n",
              rows, vocab);
  std::printf("%-18s %-6s %-9s %-9s %-12s %s\n", "setting", "sigma", "coupled", "textbook",
              "independent", "tokens per step of 4 drafts (coupled / textbook)");
  for (const Setting& setting : settings) {
    for (float sigma : {0.0f, 0.1f, 0.3f, 1.0f}) {
      SamplingParams p;
      p.temperature = setting.temperature;
      p.top_p = setting.top_p;
      int coupled = 0, independent = 0;
      double textbook = 0;
      std::vector<float> target(vocab), draft(vocab);
      for (int r = 0; r < rows; ++r) {
        for (int i = 0; i < vocab; ++i) {
          target[i] = 2.5f * normal(rng);
          draft[i] = target[i] + sigma * normal(rng);
        }
        const uint64_t key = rng(), draw = static_cast<uint64_t>(r % 7);
        const int32_t taken = Draw(target, p, key, draw);
        coupled += Draw(draft, p, key, draw) == taken ? 1 : 0;
        independent += Draw(draft, p, key ^ 0x5DEECE66Dull, draw) == taken ? 1 : 0;
        const std::vector<double> pt = Distribution(target, p.temperature, p.top_p);
        const std::vector<double> pd = Distribution(draft, p.temperature, p.top_p);
        for (int i = 0; i < vocab; ++i) textbook += std::min(pt[i], pd[i]);
      }
      textbook /= rows;
      const double a = static_cast<double>(coupled) / rows;
      const double b = static_cast<double>(independent) / rows;
      // Tokens a step of 4 drafts yields when each is accepted with probability q, on its own:
      // 1 + q + q^2 + q^3 + q^4 (the target's own token after the first refusal, or a fifth).
      const auto yield = [](double q) { return 1 + q + q * q + q * q * q + q * q * q * q; };
      std::printf("%-18s %-6.1f %-9.3f %-9.3f %-12.3f %.2f / %.2f\n", setting.name, sigma, a,
                  textbook, b, yield(a), yield(textbook));
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
