#include "planner/fit.h"

#include <map>

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

PlanInputs Inputs(const ModelSpec& model, const char* weights, const char* gpu, int tp) {
  PlanInputs in;
  in.model = model;
  in.weights = *WeightFormatsPreset(weights);
  in.device = *GpuPreset(gpu);
  in.tp = tp;
  in.max_context_tokens = 8192;
  in.target_concurrent_sequences = 10;
  return in;
}

TEST(FitTest, SmallModelFitsOnOneGpu) {
  absl::StatusOr<FitResult> fit = FitGpuCount(Inputs(Llama31_8B(), "bf16", "h100-80g", 4), {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(fit->found);
  EXPECT_EQ(fit->plan->inputs.tp, 1);  // the request's tp is ignored
  EXPECT_TRUE(fit->rejected.empty());
  EXPECT_EQ(fit->weights_only_min_gpus, 1);
}

TEST(FitTest, TensorParallelGoesPastKvHeadsByCopyingThem) {
  // 405B in bf16 is ~812 GB: tp 8 (its 8 KV heads) is short; tp 16 copies each KV head to two
  // ranks and holds ~51 GB of weights on each.
  const PlanInputs in = Inputs(Llama31_405B(), "bf16", "h100-80g", 8);
  absl::StatusOr<FitResult> tp_only = FitGpuCount(in, FitOptions{64, false});
  ASSERT_TRUE(tp_only.ok());
  ASSERT_TRUE(tp_only->found);
  EXPECT_EQ(tp_only->plan->inputs.tp, 16);
  EXPECT_EQ(tp_only->plan->inputs.pp, 1);
  EXPECT_EQ(tp_only->rejected.size(), 4u);  // tp 1, 2, 4, 8

  absl::StatusOr<FitResult> with_pp = FitGpuCount(in, FitOptions{64, true});
  ASSERT_TRUE(with_pp.ok());
  ASSERT_TRUE(with_pp->found);
  // 12 GPUs (~68 GB of weights each) is the fewest; of the two 12-GPU layouts (tp=4 x pp=3,
  // tp=2 x pp=6) the one with fewer stages comes first.
  EXPECT_EQ(with_pp->plan->inputs.tp, 4);
  EXPECT_EQ(with_pp->plan->inputs.pp, 3);
  EXPECT_TRUE(with_pp->plan->meets_target);

  absl::StatusOr<FitResult> capped = FitGpuCount(in, FitOptions{8, true});
  EXPECT_FALSE(capped->found);
}

TEST(FitTest, LayoutThatSplitsAGroupIsSkippedNotFatal) {
  ModelSpec c = Llama31_8B();
  c.hidden_size = 768;
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 2304;
  c.num_layers = 4;
  PlanInputs in = Inputs(c, "int4-g128", "rtx4090", 1);
  in.target_concurrent_sequences = 3000;  // 100 GB of KV: forces the search past tp=2
  absl::StatusOr<FitResult> fit = FitGpuCount(in, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_FALSE(fit->rejected.empty());
  // tp 4 splits o's 768 columns into 192, not whole groups of 128; so does tp 12 (4 KV heads,
  // each copied to 3 ranks), which is tried next.
  ASSERT_GE(fit->rejected.size(), 2u);
  EXPECT_NE(fit->rejected[fit->rejected.size() - 2].find("tp=4 pp=1: o is row-parallel"),
            std::string::npos)
      << fit->rejected[fit->rejected.size() - 2];
  EXPECT_NE(fit->rejected.back().find("tp=12 pp=1: o is row-parallel"), std::string::npos)
      << fit->rejected.back();
}

TEST(FitTest, GlobalInputErrorsAreErrors) {
  PlanInputs in = Inputs(Llama31_8B(), "bf16", "h100-80g", 1);
  in.max_context_tokens = 0;
  EXPECT_EQ(FitGpuCount(in, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FitTest, SuggestionsAreReplannedAlternatives) {
  // 405B fp8 on 4 x H100: the weights alone are over.
  const PlanInputs in = Inputs(Llama31_405B(), "fp8", "h100-80g", 4);
  ASSERT_FALSE(PlanMemory(in)->meets_target);
  absl::StatusOr<std::vector<Suggestion>> s = SuggestAlternatives(in, {});
  ASSERT_TRUE(s.ok()) << s.status();
  std::map<std::string, const Suggestion*> by_change;
  for (const Suggestion& x : *s) by_change[x.change] = &x;
  ASSERT_TRUE(by_change.count("8 x h100-80g (tp=8, pp=1)"));
  EXPECT_TRUE(by_change["8 x h100-80g (tp=8, pp=1)"]->plan.meets_target);
  ASSERT_TRUE(by_change.count("fp8 KV cache"));
  EXPECT_FALSE(by_change["fp8 KV cache"]->plan.meets_target);  // KV was not the problem
  EXPECT_EQ(by_change["fp8 KV cache"]->plan.inputs.kv_cache_dtype, FormatKind::kF8E4M3);
  ASSERT_TRUE(by_change.count("int4-g128 projection weights"));
  EXPECT_TRUE(by_change["int4-g128 projection weights"]->plan.meets_target);
  for (const Suggestion& x : *s) {
    EXPECT_NE(x.change.rfind("context ", 0), 0u) << "no context helps the weights";
  }
}

TEST(FitTest, ShorterContextAndFewerUsersWhenKvIsShort) {
  PlanInputs in = Inputs(Llama31_8B(), "bf16", "h100-80g", 1);
  in.max_context_tokens = 131072;
  in.target_concurrent_sequences = 4;
  ASSERT_FALSE(PlanMemory(in)->meets_target);
  absl::StatusOr<std::vector<Suggestion>> s = SuggestAlternatives(in, {});
  ASSERT_TRUE(s.ok()) << s.status();
  const Suggestion* context = nullptr;
  const Suggestion* users = nullptr;
  for (const Suggestion& x : *s) {
    if (x.change.rfind("context ", 0) == 0) context = &x;
    if (x.change.find("concurrent sequences") != std::string::npos) users = &x;
  }
  ASSERT_NE(context, nullptr);
  const int64_t ctx = context->plan.inputs.max_context_tokens;
  EXPECT_TRUE(context->plan.meets_target);
  EXPECT_EQ(ctx % 16, 0);
  // The longest: one more block no longer fits.
  PlanInputs longer = in;
  longer.max_context_tokens = ctx + 16;
  EXPECT_FALSE(PlanMemory(longer)->meets_target);
  ASSERT_NE(users, nullptr);
  EXPECT_TRUE(users->plan.meets_target);
  EXPECT_EQ(users->plan.inputs.target_concurrent_sequences,
            PlanMemory(in)->max_concurrent_sequences);
}

}  // namespace
}  // namespace tpserve
