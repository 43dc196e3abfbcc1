// Each routing rule of expert_routing.h pinned on hand-made logits: which experts, in which
// order, with which weights (computed here in double from the rule's formula), ties to the
// lowest id, groups, the correction bias that chooses but does not weigh, and the refusals.
#include "kernels/expert_routing.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed Route(const ExpertRouting& r, const std::vector<float>& logits,
             const std::vector<float>& bias = {}) {
  const int64_t tokens = static_cast<int64_t>(logits.size()) / r.num_experts;
  Routed out{std::vector<int32_t>(tokens * r.top_k), std::vector<float>(tokens * r.top_k)};
  RouteTokens(r, logits.data(), tokens, bias.empty() ? nullptr : bias.data(), out.ids.data(),
              out.weights.data());
  return out;
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<double> Softmax(const std::vector<float>& l) {
  double sum = 0.0;
  for (float v : l) sum += std::exp(static_cast<double>(v));
  std::vector<double> p;
  for (float v : l) p.push_back(std::exp(static_cast<double>(v)) / sum);
  return p;
}

TEST(ExpertRoutingTest, SoftmaxTopKWithoutRenormalizingKeepsTheFullSoftmaxWeights) {
  const ExpertRouting r{.score = RoutingScore::kSoftmax, .num_experts = 4, .top_k = 2};
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  const Routed got = Route(r, logits);
  const std::vector<double> p = Softmax(logits);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(got.weights[0], p[1], 1e-6);
  EXPECT_NEAR(got.weights[1], p[2], 1e-6);
  EXPECT_LT(got.weights[0] + got.weights[1], 0.95f);  // the other experts' share is gone
}

TEST(ExpertRoutingTest, MixtralRenormalizesTheChosenWeights) {
  const ExpertRouting r{.score = RoutingScore::kSoftmax, .num_experts = 8, .top_k = 2,
                        .renormalize = true};
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f, 3.5f, 1.0f, -2.0f, 0.25f};
  const Routed got = Route(r, logits);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{4, 2}));
  const double a = std::exp(3.5), b = std::exp(2.0);
  EXPECT_NEAR(got.weights[0], a / (a + b), 1e-6);
  EXPECT_NEAR(got.weights[1], b / (a + b), 1e-6);
}

// DeepSeek-V3's e_score_correction_bias: expert 3's bias lifts it above expert 0 in the choice,
// but its weight is still its own sigmoid score.
TEST(ExpertRoutingTest, CorrectionBiasChoosesButDoesNotWeigh) {
  const ExpertRouting r{.score = RoutingScore::kSigmoid, .num_experts = 4, .top_k = 2,
                        .renormalize = true};
  const std::vector<float> logits = {2.0f, 1.5f, -3.0f, 0.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.6f};
  const Routed without = Route(r, logits);
  EXPECT_EQ(without.ids, (std::vector<int32_t>{0, 1}));
  const Routed got = Route(r, logits, bias);
  // selection: 0.881, 0.818, 0.047, 0.5 + 0.6 = 1.1 -> experts 3 then 0
  EXPECT_EQ(got.ids, (std::vector<int32_t>{3, 0}));
  const double s3 = Sigmoid(0.0), s0 = Sigmoid(2.0);
  EXPECT_NEAR(got.weights[0], s3 / (s0 + s3), 1e-6);
  EXPECT_NEAR(got.weights[1], s0 / (s0 + s3), 1e-6);
}

// Group-limited top-k: 8 experts in 4 groups of 2, the best 2 groups eligible. Group 0 holds the
// single best expert but a weak partner (0.9 + 0.0); groups 1 (0.8 + 0.7) and 3 (0.75 + 0.7)
// score higher, so expert 0 is not chosen even though it is the best.
TEST(ExpertRoutingTest, GroupsScoredByTheirBestTwoLimitTheChoice) {
  const ExpertRouting r{.score = RoutingScore::kSigmoid, .num_experts = 8, .top_k = 2,
                        .num_groups = 4, .top_groups = 2, .renormalize = true,
                        .scaling = 2.5f};
  // Logits whose sigmoids are the selection values above (the bias is zero).
  auto logit = [](double p) { return static_cast<float>(std::log(p / (1.0 - p))); };
  const std::vector<float> logits = {logit(0.9),  logit(1e-6), logit(0.8), logit(0.7),
                                     logit(0.3),  logit(0.2),  logit(0.75), logit(0.7)};
  const Routed got = Route(r, logits);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{2, 6}));
  const double a = 0.8, b = 0.75;
  EXPECT_NEAR(got.weights[0], 2.5 * a / (a + b), 1e-5);
  EXPECT_NEAR(got.weights[1], 2.5 * b / (a + b), 1e-5);
  // Without the group limit the best expert is chosen.
  ExpertRouting flat = r;
  flat.num_groups = 1;
  EXPECT_EQ(Route(flat, logits).ids, (std::vector<int32_t>{0, 2}));
}

// Llama 4: top-1 chosen on the logits, weighted by its sigmoid, no renormalizing (which would
// make every weight 1). The weight goes on the expert's input (weight_on_input): where it is
// applied is the MoE kernel's business, so the ids and weights are those of the same rule
// without it, bit for bit.
TEST(ExpertRoutingTest, Llama4TopOneSigmoidOnTheLogits) {
  const ExpertRouting r{.score = RoutingScore::kSigmoid, .num_experts = 4, .top_k = 1,
                        .select_on_logits = true, .weight_on_input = true};
  // Token 2: every logit negative, the best (-1.0) still chosen, its weight below one half.
  // Token 3: the sigmoids of 3.0 and 2.9 differ by less than the logits do; chosen on the
  // logits all the same.
  const std::vector<float> logits = {-0.5f, 0.25f, -2.0f, 0.1f,  -3.0f, -1.0f, -4.0f, -2.0f,
                                     2.9f,  -1.0f, 3.0f,  0.0f};
  const Routed got = Route(r, logits);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{1, 1, 2}));
  EXPECT_NEAR(got.weights[0], Sigmoid(0.25), 1e-6);
  EXPECT_NEAR(got.weights[1], Sigmoid(-1.0), 1e-6);
  EXPECT_NEAR(got.weights[2], Sigmoid(3.0), 1e-6);
  ExpertRouting on_output = r;
  on_output.weight_on_input = false;
  const Routed same = Route(on_output, logits);
  EXPECT_EQ(same.ids, got.ids);
  EXPECT_EQ(same.weights, got.weights);
  EXPECT_EQ(ExpertRoutingString(r),
            "sigmoid top-1 of 4, chosen on the logits, weights on the experts' inputs");
}

TEST(ExpertRoutingTest, TiesGoToTheLowestExpertAndGroupId) {
  const ExpertRouting r{.score = RoutingScore::kSoftmax, .num_experts = 6, .top_k = 3};
  EXPECT_EQ(Route(r, {1.0f, 2.0f, 2.0f, 1.0f, 2.0f, 0.0f}).ids, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(Route(r, {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}).ids, (std::vector<int32_t>{0, 1, 2}));
  // Groups 0 and 2 tie (1.0 + 1.0 each) behind group 1: group 0 wins the second place.
  const ExpertRouting g{.score = RoutingScore::kSoftmax, .num_experts = 6, .top_k = 2,
                        .num_groups = 3, .top_groups = 2};
  EXPECT_EQ(Route(g, {1.0f, 1.0f, 3.0f, 0.5f, 1.0f, 1.0f}).ids, (std::vector<int32_t>{2, 0}));
}

TEST(ExpertRoutingTest, NanLogitsRankLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ExpertRouting r{.score = RoutingScore::kSigmoid, .num_experts = 4, .top_k = 2};
  EXPECT_EQ(Route(r, {nan, -5.0f, nan, -6.0f}).ids, (std::vector<int32_t>{1, 3}));
}

// A token's routing never depends on its batch: all tokens to one expert, and a batch whose
// rows are routed one at a time, give the same ids and weights bit for bit.
TEST(ExpertRoutingTest, EachTokenRoutedAsIfAlone) {
  const ExpertRouting r{.score = RoutingScore::kSoftmax, .num_experts = 4, .top_k = 2,
                        .renormalize = true};
  const std::vector<float> same = {0.0f, 4.0f, 1.0f, 0.5f};
  std::vector<float> batch;
  for (int t = 0; t < 5; ++t) batch.insert(batch.end(), same.begin(), same.end());
  batch.insert(batch.end(), {3.0f, -1.0f, 3.5f, 0.0f});
  const Routed all = Route(r, batch);
  for (int t = 0; t < 6; ++t) {
    const Routed one = Route(r, std::vector<float>(batch.begin() + 4 * t, batch.begin() + 4 * t + 4));
    EXPECT_EQ(all.ids[2 * t], one.ids[0]) << t;
    EXPECT_EQ(all.ids[2 * t + 1], one.ids[1]) << t;
    EXPECT_EQ(all.weights[2 * t], one.weights[0]) << t;
    EXPECT_EQ(all.weights[2 * t + 1], one.weights[1]) << t;
  }
  EXPECT_EQ(all.ids[0], 1);
  EXPECT_EQ(all.ids[10], 2);
}

TEST(ExpertRoutingTest, RefusalsNameTheFieldAndTheBound) {
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 9}),
            "top_k 9 is outside [1, num_experts 8]");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 0, .top_k = 1}), "num_experts 0 is below 1");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 2, .num_groups = 3}),
            "num_groups 3 does not divide num_experts 8");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 5, .num_groups = 4, .top_groups = 2}),
            "top_k 5 exceeds the 4 experts of top_groups 2 groups");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 2, .num_groups = 8, .top_groups = 2}),
            "num_groups 8 leaves 1 expert per group; a group is scored by its best two");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 2, .scaling = 0.0f}),
            "scaling 0 is not a positive finite number");
  EXPECT_EQ(ExpertRoutingProblem({.num_experts = 8, .top_k = 2}), "");
  EXPECT_EQ(ExpertRoutingString({.score = RoutingScore::kSigmoid, .num_experts = 256, .top_k = 8,
                                 .num_groups = 8, .top_groups = 4, .renormalize = true,
                                 .scaling = 2.5f}),
            "sigmoid top-8 of 256 in the best 4 of 8 groups, renormalized, scaled by 2.5");
}

}  // namespace
}  // namespace tpserve
