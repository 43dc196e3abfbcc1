// RouteToken (moe_routing.h), the CUDA routing kernel's per-token rule, against RouteTokens
// (kernels/expert_routing.h), the reference every backend is checked against: the same ids and
// the same weight bits on the host, for every rule the families use (softmax and sigmoid,
// correction biases, groups, logit selection, renormalization, scaling) over logits with many
// ties (drawn from a few values), NaNs and infinities. And the rules the kernel refuses.
#include "kernels/cuda/moe_routing.h"

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/expert_routing.h"

namespace tpserve::cuda {
namespace {

struct Rule {
  const char* name;
  ExpertRouting routing;
  bool bias;
};

std::vector<Rule> Rules() {
  using S = RoutingScore;
  return {
      {"Mixtral", {.score = S::kSoftmax, .num_experts = 8, .top_k = 2, .renormalize = true}, false},
      {"Qwen2-MoE", {.score = S::kSoftmax, .num_experts = 60, .top_k = 4}, false},
      {"Qwen3-MoE", {.score = S::kSoftmax, .num_experts = 128, .top_k = 8, .renormalize = true},
       false},
      {"DeepSeek-V3",
       {.score = S::kSigmoid, .num_experts = 256, .top_k = 8, .num_groups = 8, .top_groups = 4,
        .renormalize = true, .scaling = 2.5f},
       true},
      {"GLM-4.5",
       {.score = S::kSigmoid, .num_experts = 160, .top_k = 8, .renormalize = true,
        .scaling = 2.5f},
       true},
      {"Llama 4",
       {.score = S::kSigmoid, .num_experts = 16, .top_k = 1, .select_on_logits = true,
        .weight_on_input = true},
       false},
      {"groups of two, one kept",
       {.score = S::kSoftmax, .num_experts = 8, .top_k = 2, .num_groups = 4, .top_groups = 1},
       true},
      {"every expert chosen", {.score = S::kSigmoid, .num_experts = 5, .top_k = 5}, true},
      {"one expert", {.score = S::kSoftmax, .num_experts = 1, .top_k = 1, .renormalize = true},
       false},
  };
}

// Logits of `kind`: 0 Gaussian, 1 a few values (ties), 2 a few values with NaNs and
// infinities, 3 every logit the same.
std::vector<float> Logits(int kind, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const float few[] = {-1.0f, 0.0f, 0.5f, 2.0f};
  const float odd[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), 0.5f, 1.0f};
  std::vector<float> l(n);
  for (float& v : l) {
    switch (kind) {
      case 0: v = normal(rng); break;
      case 1: v = few[rng() % 4]; break;
      case 2: v = rng() % 8 == 0 ? odd[rng() % 5] : few[rng() % 4]; break;
      default: v = 0.25f;
    }
  }
  return l;
}

TEST(MoeRoutingTest, RouteTokenEqualsRouteTokensBitForBit) {
  std::mt19937 rng(11);
  int64_t tokens_checked = 0;
  for (const Rule& rule : Rules()) {
    const ExpertRouting& r = rule.routing;
    ASSERT_EQ(RoutingRuleProblem(r), "") << rule.name;
    const RoutingRule device_rule = RoutingRuleOf(r);
    for (int kind = 0; kind < 4; ++kind) {
      const int64_t tokens = 64;
      const std::vector<float> logits = Logits(kind, tokens * r.num_experts, rng);
      std::vector<float> bias;
      if (rule.bias) bias = Logits(kind == 0 ? 0 : 1, r.num_experts, rng);
      const float* b = bias.empty() ? nullptr : bias.data();
      std::vector<int32_t> want_ids(tokens * r.top_k), got_ids(tokens * r.top_k, -5);
      std::vector<float> want_w(tokens * r.top_k), got_w(tokens * r.top_k, -5.0f);
      RouteTokens(r, logits.data(), tokens, b, want_ids.data(), want_w.data());
      for (int64_t t = 0; t < tokens; ++t) {
        RouteToken(device_rule, logits.data() + t * r.num_experts, b, got_ids.data() + t * r.top_k,
                   got_w.data() + t * r.top_k);
      }
      SCOPED_TRACE(std::string(rule.name) + " logits of kind " + std::to_string(kind));
      EXPECT_EQ(got_ids, want_ids);
      EXPECT_EQ(0, std::memcmp(got_w.data(), want_w.data(), got_w.size() * sizeof(float)));
      tokens_checked += tokens;
    }
  }
  EXPECT_EQ(tokens_checked, 9 * 4 * 64);
}

TEST(MoeRoutingTest, TiesGoToTheLowestIdAndNanRanksLast) {
  const RoutingRule r = RoutingRuleOf({.score = RoutingScore::kSoftmax, .num_experts = 5,
                                       .top_k = 3});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float logits[] = {nan, 1.0f, 2.0f, 1.0f, 2.0f};
  int32_t ids[3];
  float w[3];
  RouteToken(r, logits, nullptr, ids, w);
  // A NaN logit makes the softmax sum NaN: every score NaN, so every choice ties at NaN and
  // goes by id (RouteTokens does the same).
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 3), (std::vector<int32_t>{0, 1, 2}));
  const float finite[] = {0.0f, 1.0f, 2.0f, 1.0f, 2.0f};
  RouteToken(r, finite, nullptr, ids, w);
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 3), (std::vector<int32_t>{2, 4, 1}));
  EXPECT_EQ(w[0], w[1]);
}

TEST(MoeRoutingTest, RulesTheKernelCannotApplyAreNamed) {
  ExpertRouting r{.score = RoutingScore::kSigmoid, .num_experts = 256, .top_k = 2,
                  .num_groups = 128, .top_groups = 2};
  EXPECT_EQ(RoutingRuleProblem(r), "num_groups 128 exceeds the 64 groups the CUDA routing "
                                   "kernel keeps");
  r.num_groups = 64;
  EXPECT_EQ(RoutingRuleProblem(r), "");
  r.top_k = 0;
  EXPECT_EQ(RoutingRuleProblem(r), ExpertRoutingProblem(r));
  EXPECT_NE(RoutingRuleProblem(r), "");
}

}  // namespace
}  // namespace tpserve::cuda
