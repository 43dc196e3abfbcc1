#include "coordinator/speculative/speculation.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/speculative/ngram.h"

namespace tpserve {
namespace {

TEST(Ngram, ProposesWhatFollowedTheLatestOccurrenceOfTheLongestSuffix) {
  NgramProposer ngram(/*ngram_min=*/1, /*ngram_max=*/3);
  // "... 5 6 7 8 9 ... 5 6 7 1 2 ... 5 6 7": the suffix 5 6 7 occurs twice; the later one wins.
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9, 0, 5, 6, 7, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(ngram.Lookup(tokens, 3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ngram.Lookup(tokens, 10), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
  // A 3-gram that never occurred before falls back to shorter ones.
  EXPECT_EQ(ngram.Lookup({1, 2, 3, 9, 4, 2, 3}, 2), (std::vector<int32_t>{9, 4}));
  EXPECT_EQ(ngram.Lookup({1, 2, 3, 9, 4, 8, 3}, 2), (std::vector<int32_t>{9, 4}));
  // Nothing repeats: no draft. One token alone: nothing to look in.
  EXPECT_TRUE(ngram.Lookup({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(ngram.Lookup({1}, 4).empty());
}

TEST(Ngram, MinimumLengthIsRespected) {
  NgramProposer ngram(/*ngram_min=*/2, /*ngram_max=*/2);
  EXPECT_TRUE(ngram.Lookup({7, 1, 2, 8, 7}, 3).empty());  // only a 1-gram repeats
  EXPECT_EQ(ngram.Lookup({8, 7, 1, 2, 8, 7}, 3), (std::vector<int32_t>{1, 2, 8}));
}

TEST(Ngram, ProposeFillsEverySlotUpToItsRoom) {
  NgramProposer ngram(1, 4);
  const std::vector<int32_t> a = {1, 2, 3, 1, 2};
  const std::vector<int32_t> b = {4, 5, 6};
  std::vector<DraftSlot> slots(2);
  slots[0].tokens = a;
  slots[0].max_tokens = 1;
  slots[1].tokens = b;
  slots[1].max_tokens = 4;
  ngram.Propose(absl::MakeSpan(slots), {});
  EXPECT_EQ(slots[0].draft, (std::vector<int32_t>{3}));
  EXPECT_TRUE(slots[1].draft.empty());
}

SpeculativeOptions Options(int32_t k, int32_t max_batch) {
  SpeculativeOptions o;
  o.method = SpeculativeMethod::kNgram;
  o.num_speculative_tokens = k;
  o.max_batch = max_batch;
  o.verify_cost_per_token = 0.05;
  return o;
}

TEST(Policy, AcceptanceDrivesK) {
  SpeculationPolicy policy(Options(8, 4), nullptr);
  SpeculationState s;
  // Fresh: the 2/3 prior makes a few drafts worth it, not all eight.
  const int64_t fresh = policy.DraftLength(s, 1, 100);
  EXPECT_GE(fresh, 2);
  EXPECT_LT(fresh, 8);
  // Everything accepted for a while: all eight.
  for (int i = 0; i < 10; ++i) policy.Observe(s, 8, 8);
  EXPECT_GT(SpeculationPolicy::AcceptanceRate(s), 0.9);
  EXPECT_EQ(policy.DraftLength(s, 1, 100), 8);
  // Nothing accepted for a while: off, with K = 1 probes ever further apart (8, 16, 32 ...
  // steps) while they fail.
  for (int i = 0; i < 10; ++i) policy.Observe(s, 4, 0);
  EXPECT_LT(SpeculationPolicy::AcceptanceRate(s), 0.2);
  std::vector<int> probes_at;
  for (int step = 1; step <= 8 + 16 + 32 + 64; ++step) {
    const int64_t k = policy.DraftLength(s, 1, 100);
    EXPECT_LE(k, 1);
    if (k == 1) probes_at.push_back(step);
  }
  EXPECT_EQ(probes_at, (std::vector<int>{8, 24, 56, 120}));
  // A probe that is accepted brings the interval back.
  policy.Observe(s, 1, 1);
  EXPECT_EQ(s.probe_interval, SpeculationPolicy::kProbeInterval);
  // The request's usage counts every draft.
  EXPECT_EQ(s.draft_tokens, 10 * 8 + 10 * 4 + 1);
  EXPECT_EQ(s.accepted_tokens, 10 * 8 + 1);
  EXPECT_EQ(s.verify_steps, 21);
}

TEST(Policy, ComputeBoundStepsAndTheLastTokensDoNotDraft) {
  SpeculationPolicy policy(Options(6, 4), nullptr);
  SpeculationState s;
  for (int i = 0; i < 10; ++i) policy.Observe(s, 6, 6);
  EXPECT_EQ(policy.DraftLength(s, 4, 100), 6);
  EXPECT_EQ(policy.DraftLength(s, 5, 100), 0);  // more than max_batch decode
  EXPECT_EQ(policy.DraftLength(s, 1, 2), 2);    // two tokens left to draft
  EXPECT_EQ(policy.DraftLength(s, 1, 0), 0);
  SpeculationPolicy unlimited(Options(6, 0), nullptr);
  EXPECT_EQ(unlimited.DraftLength(s, 64, 100), 6);
}

// A proposer whose drafts cost `seconds` each, measured, or `assumed` of a step before that.
class TimedProposer : public Proposer {
 public:
  TimedProposer(std::optional<double> seconds, double assumed)
      : seconds_(seconds), assumed_(assumed) {}
  void Propose(absl::Span<DraftSlot>, absl::Span<const DraftSampling>) override {}
  std::optional<double> SecondsPerDraftToken(int64_t) const override { return seconds_; }
  double assumed_cost_per_token() const override { return assumed_; }
  std::string Describe() const override { return "timed"; }

 private:
  std::optional<double> seconds_;
  double assumed_;
};

TEST(Policy, ACostlyProposerDraftsLess) {
  SpeculationState s;
  TimedProposer free(0.0, 0.0), costly(std::nullopt, 0.5);  // costly: half a step, assumed
  for (int i = 0; i < 10; ++i) SpeculationPolicy(Options(8, 4), &free).Observe(s, 8, 5);
  const int64_t free_k = SpeculationPolicy(Options(8, 4), &free).DraftLength(s, 1, 100);
  const int64_t costly_k = SpeculationPolicy(Options(8, 4), &costly).DraftLength(s, 1, 100);
  EXPECT_GT(free_k, costly_k);
  // Measured: a draft token at a fifth of a 10 ms step, and verification at 1 ms a token.
  TimedProposer measured(0.002, 0.5);
  SpeculationPolicy policy(Options(8, 4), &measured);
  for (int i = 0; i < 50; ++i) policy.ObserveStep(1, 1 + i % 5, 0.009 + 0.001 * (1 + i % 5));
  EXPECT_NEAR(policy.CostPerDraftToken(1), (0.001 + 0.002) / 0.010, 1e-6);
  // Without adaptation: always the most that fits.
  SpeculativeOptions fixed = Options(5, 4);
  fixed.adaptive = false;
  SpeculationState cold;
  for (int i = 0; i < 10; ++i) SpeculationPolicy(fixed, nullptr).Observe(cold, 5, 0);
  EXPECT_EQ(SpeculationPolicy(fixed, nullptr).DraftLength(cold, 1, 100), 5);
}

TEST(StepCostModel, FitsTimeAgainstTokens) {
  StepCostModel m;
  EXPECT_FALSE(m.Seconds(1).has_value());
  m.Observe(1, 0.010);
  m.Observe(1, 0.012);
  EXPECT_NEAR(*m.Seconds(5), 0.011, 1e-4);  // one size seen: its (recency-weighted) mean
  EXPECT_FALSE(m.SecondsPerToken().has_value());
  for (int t = 1; t <= 9; ++t) m.Observe(t, 0.010 + 0.002 * t);
  EXPECT_GT(*m.SecondsPerToken(), 0.0018);
  EXPECT_LT(*m.SecondsPerToken(), 0.0022);
  // Recent observations weigh most: the machine got slower per token.
  for (int i = 0; i < 200; ++i) m.Observe(1 + i % 9, 0.010 + 0.010 * (1 + i % 9));
  EXPECT_NEAR(*m.SecondsPerToken(), 0.010, 0.0005);
  EXPECT_NEAR(*m.Seconds(4), 0.050, 0.002);
}

// Where verifying a token costs about what a decode step does (a small model on two CPU
// cores), no K pays even at full acceptance; where it is nearly free (a large model, memory
// bound), the policy drafts all it may.
TEST(Policy, MeasuredStepCostsDecide) {
  SpeculationState s;
  SpeculationPolicy compute_bound(Options(8, 4), nullptr);
  for (int i = 0; i < 10; ++i) compute_bound.Observe(s, 8, 8);
  for (int i = 0; i < 50; ++i) compute_bound.ObserveStep(1, 1 + i % 9, 0.010 * (1 + i % 9));
  EXPECT_NEAR(compute_bound.CostPerDraftToken(1), 1.0, 0.01);
  // Not even with every draft accepted: no K, and no probe either.
  for (int i = 0; i < 200; ++i) EXPECT_EQ(compute_bound.DraftLength(s, 1, 100), 0);
  // Two streams at 10 ms a token: a draft delays both (2 x 10 / 20).
  for (int i = 0; i < 50; ++i) compute_bound.ObserveStep(2, 2 + i % 9, 0.010 * (2 + i % 9));
  EXPECT_NEAR(compute_bound.CostPerDraftToken(2), 1.0, 0.01);
  SpeculationPolicy memory_bound(Options(8, 4), nullptr);
  for (int i = 0; i < 50; ++i) memory_bound.ObserveStep(1, 1 + i % 9, 0.020 + 0.0002 * (i % 9));
  EXPECT_LT(memory_bound.CostPerDraftToken(1), 0.02);
  EXPECT_EQ(memory_bound.DraftLength(s, 1, 100), 8);
  // A step that turns compute-bound past 4 streams: cheap at 2, costly at 16.
  SpeculationPolicy knee(Options(8, 0), nullptr);
  auto knee_step = [](int tokens) { return tokens <= 4 ? 0.020 : 0.020 + 0.008 * (tokens - 4); };
  for (int i = 0; i < 60; ++i) {
    knee.ObserveStep(2, 2 + i % 3, knee_step(2 + i % 3));      // 2 streams, 0-2 drafts
    knee.ObserveStep(16, 16 + i % 3, knee_step(16 + i % 3));  // 16 streams, 0-2 drafts
  }
  EXPECT_LT(knee.CostPerDraftToken(2), knee.CostPerDraftToken(16) / 3);
}

TEST(Options, BadValuesNameTheFlag) {
  SpeculativeOptions o = Options(0, 4);
  EXPECT_EQ(ValidateSpeculativeOptions(o).message(),
            "--num_speculative_tokens=0: must be in [1, 16]");
  o = Options(17, 4);
  EXPECT_FALSE(ValidateSpeculativeOptions(o).ok());
  o = Options(4, -1);
  EXPECT_EQ(ValidateSpeculativeOptions(o).message(),
            "--speculative_max_batch=-1: must be >= 0 (0 = no limit)");
  EXPECT_TRUE(ValidateSpeculativeOptions(Options(4, 4)).ok());
  EXPECT_EQ(ParseSpeculativeMethod("medusa").status().message(),
            "--speculative=medusa: must be off, ngram, draft or mtp");
  EXPECT_EQ(*ParseSpeculativeMethod("draft"), SpeculativeMethod::kDraft);
  EXPECT_EQ(*ParseSpeculativeMethod("mtp"), SpeculativeMethod::kMtp);
  // The MTP layer predicts one token past the next: K is 1.
  o = Options(2, 4);
  o.method = SpeculativeMethod::kMtp;
  EXPECT_EQ(ValidateSpeculativeOptions(o).message(),
            "--num_speculative_tokens=2: --speculative=mtp drafts 1 token per step (the "
            "checkpoint's MTP layer predicts the token after the next one from the target's "
            "hidden state; chaining it is not built)");
  o.num_speculative_tokens = 1;
  EXPECT_TRUE(ValidateSpeculativeOptions(o).ok());
}

}  // namespace
}  // namespace tpserve
