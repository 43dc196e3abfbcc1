#include "planner/plan_report.h"

#include "gtest/gtest.h"
#include "planner/plan_json.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

MemoryPlan Plan405B(int tp, const char* weights) {
  PlanInputs in;
  in.model = Llama31_405B();
  in.weights = *WeightFormatsPreset(weights);
  in.tp = tp;
  in.device = *GpuPreset("h100-80g");
  in.max_context_tokens = 8192;
  in.target_concurrent_sequences = 10;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PlanReportTest, WithThousands) {
  EXPECT_EQ(WithThousands(0), "0");
  EXPECT_EQ(WithThousands(999), "999");
  EXPECT_EQ(WithThousands(1000), "1,000");
  EXPECT_EQ(WithThousands(85520809984), "85,520,809,984");
  EXPECT_EQ(WithThousands(-1234567), "-1,234,567");
}

TEST(PlanReportTest, TableShowsEveryLineAndTheTotals) {
  const MemoryPlan plan = Plan405B(8, "fp8");
  const std::string table = RenderPlanTable(plan, EstimateRoofline(plan, {}));
  const StageMemory& m = plan.stages[0];
  EXPECT_TRUE(Contains(table, "8 x h100-80g (tp=8, pp=1)")) << table;
  EXPECT_TRUE(Contains(table, "85,520,809,984")) << table;  // device total
  EXPECT_TRUE(Contains(table, WithThousands(m.weight_bytes))) << table;
  EXPECT_TRUE(Contains(table, WithThousands(m.kv_pool_bytes))) << table;
  EXPECT_TRUE(Contains(table, WithThousands(m.activations.attention_bytes))) << table;
  EXPECT_TRUE(Contains(table, "FlashInfer: split-key partials, work lists")) << table;
  // The mixed-input GEMM's f32 scales beside every fp8 projection (n * k / 32 bytes): per layer
  // and rank (2048 + 128 + 128) x 16384 + 16384 x 2048 + 3 x 6656 x 16384 = 398,458,880
  // weights, / 32 x 126 layers x 8 ranks = 12,551,454,720 B.
  EXPECT_TRUE(Contains(table, "+ GPU GEMM forms 12.551 GB")) << table;
  EXPECT_TRUE(Contains(table, "column     [2048 x 16384]")) << table;
  EXPECT_TRUE(Contains(table, "= " + std::to_string(plan.max_concurrent_sequences) +
                                  " sequences of 8,192 tokens (target 10)"))
      << table;
  EXPECT_TRUE(Contains(table, "VERDICT   FITS: ")) << table;
  EXPECT_TRUE(Contains(table, "450 GB/s per direction")) << table;
  EXPECT_TRUE(Contains(table, "tokens/s per user")) << table;
}

// SmolLM2 Q4_1 on 9 H100s: the MLP's 48 blocks of 32 are 6 on ranks 0-2, 5 on the others; the
// table shows rank 0's shapes and says the others', and its buffers are rank 0's width.
TEST(PlanReportTest, AnUnevenMlpSplitShowsBothShapes) {
  PlanInputs in;
  in.model = SmolLM2_135M();
  in.weights = *WeightFormatsPreset("q4_1");
  in.tp = 9;
  in.device = *GpuPreset("h100-80g");
  in.max_context_tokens = 8192;
  in.target_concurrent_sequences = 1;
  const MemoryPlan plan = *PlanMemory(in);
  const std::string table = RenderPlanTable(plan, EstimateRoofline(plan, {}));
  EXPECT_TRUE(Contains(table, "(down: [576 x 192] on ranks 0-2, [576 x 160] on the others: the "
                              "MLP's blocks do not divide by the degree)"))
      << table;
  EXPECT_TRUE(Contains(table, "(gate: [192 x 576] on ranks 0-2, [160 x 576] on the others"))
      << table;
  EXPECT_FALSE(Contains(table, "(q: ")) << table;
  EXPECT_TRUE(Contains(table, "2 x [" + std::to_string(in.max_tokens_per_step) + " x 192] "))
      << table;
}

// An MLA model on several GPUs: the table shows both attention layouts, each with the numbers
// of its own plan (memory_plan_test works them out), this plan's marked; a dense GQA model's
// split-only plan shows none.
TEST(PlanReportTest, LatentAttentionShowsBothAttentionLayouts) {
  PlanInputs in;
  in.model = *ModelSpecPreset("deepseek-v3");
  in.weights = *WeightFormatsPreset("fp8");
  in.tp = 8;
  in.device = *GpuPreset("h200");
  in.max_context_tokens = 163840;
  in.expert_parallel = true;
  const MemoryPlan split = *PlanMemory(in);
  const std::string table = RenderPlanTable(split, EstimateRoofline(split, {}));
  EXPECT_TRUE(Contains(table, "LAYOUTS   the attention's two layouts on these 8 GPUs:")) << table;
  EXPECT_TRUE(Contains(table, "KV 43,979 blocks/GPU = 703,664 tokens = 4 sequences (this plan)"))
      << table;
  EXPECT_TRUE(Contains(table, "data-parallel (--attention_dp, each GPU its own) weights     "
                              "93.71 GiB/GPU, KV 33,949 blocks/GPU = 4,345,472 tokens = 24 "
                              "sequences\n"))
      << table;
  in.attention_dp = true;
  const MemoryPlan dp = *PlanMemory(in);
  const std::string dp_table = RenderPlanTable(dp, EstimateRoofline(dp, {}));
  EXPECT_TRUE(Contains(dp_table, "CAPACITY  8 x 33949 KV blocks = 4,345,472 tokens")) << dp_table;
  EXPECT_TRUE(Contains(dp_table, "= 24 sequences (this plan)")) << dp_table;
  EXPECT_EQ(AttentionLayoutLines(Plan405B(8, "fp8")), "");
}

// A role stored in several formats (llama.cpp's Q4_K_M keeps some layers' ffn_down in Q6_K)
// names all of them, not only the default.
TEST(PlanReportTest, WeightLinesNameEveryFormatOfARole) {
  PlanInputs in;
  in.model = Llama31_405B();
  in.weights = *WeightFormatsPreset("fp8");
  in.weights.layer_overrides[{TensorRole::kDown, 3}] = TensorFormat::Of(FormatKind::kBF16);
  in.tp = 8;
  in.device = *GpuPreset("h100-80g");
  in.max_context_tokens = 8192;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string table = RenderPlanTable(*plan, EstimateRoofline(*plan, {}));
  EXPECT_TRUE(Contains(table, "[16384 x 6656]    fp8+bf16  x126")) << table;
  EXPECT_TRUE(Contains(table, "[6656 x 16384]    fp8       x126")) << table;  // gate: one format
}

TEST(PlanReportTest, TableSaysWhatIsOver) {
  const MemoryPlan plan = Plan405B(4, "fp8");
  const std::string table = RenderPlanTable(plan, EstimateRoofline(plan, {}));
  EXPECT_TRUE(Contains(table, "VERDICT   DOES NOT FIT: weights need")) << table;
  EXPECT_TRUE(Contains(table, "OVER: negative = missing")) << table;
}

TEST(PlanReportTest, JsonHasEveryFieldAndAddsUp) {
  const MemoryPlan plan = Plan405B(8, "fp8");
  const nlohmann::json j =
      nlohmann::json::parse(PlanToJson(plan, EstimateRoofline(plan, {})).dump());
  EXPECT_EQ(j["inputs"]["tp"], 8);
  EXPECT_EQ(j["inputs"]["weight_formats"]["q"], "fp8");
  EXPECT_EQ(j["inputs"]["weight_formats"]["embedding"], "bf16");
  EXPECT_EQ(j["device"]["memory_bytes"], int64_t{81559} << 20);
  EXPECT_EQ(j["num_kv_blocks"], plan.num_kv_blocks);
  EXPECT_EQ(j["max_concurrent_sequences"], plan.max_concurrent_sequences);
  EXPECT_EQ(j["meets_target"], true);
  const nlohmann::json& s = j["stages"][0];
  EXPECT_EQ(s["weights"]["q"]["local_shape"], nlohmann::json({2048, 16384}));
  const int64_t sum = s["runtime_reserve_bytes"].get<int64_t>() + s["safety_bytes"].get<int64_t>() +
                      s["weight_bytes"].get<int64_t>() +
                      s["activations"]["total_bytes"].get<int64_t>() +
                      s["comm"]["total_bytes"].get<int64_t>() + s["kv_pool_bytes"].get<int64_t>() +
                      s["unallocated_bytes"].get<int64_t>();
  EXPECT_EQ(sum, s["device_bytes"].get<int64_t>());
  EXPECT_EQ(j["totals"]["checkpoint_bytes"], plan.sharding.checkpoint_bytes);
  EXPECT_GT(j["roofline"]["tokens_per_s_per_user"].get<double>(), 0);
  EXPECT_EQ(j["roofline"]["collectives_per_step"], 2 * 126 + 2);
  EXPECT_EQ(j["roofline"]["reduction"], "all-reduce");
}

TEST(PlanReportTest, FitAndSuggestionsRender) {
  PlanInputs in = Plan405B(4, "fp8").inputs;
  const FitResult fit = *FitGpuCount(in, {});
  const std::string text = RenderFit(fit);
  EXPECT_TRUE(Contains(text, "rejected tp=4 pp=1: DOES NOT FIT")) << text;
  EXPECT_TRUE(Contains(text, "capacity bound: the weights alone need 6 devices")) << text;
  EXPECT_TRUE(Contains(text, "FIT: 8 x h100-80g (tp=8, pp=1): FITS")) << text;
  const nlohmann::json j = FitToJson(fit, {});
  EXPECT_EQ(j["found"], true);
  EXPECT_EQ(j["weights_only_min_gpus"], 6);
  EXPECT_EQ(j["plan"]["inputs"]["tp"], 8);

  const std::vector<Suggestion> s = *SuggestAlternatives(in, {});
  const std::string list = RenderSuggestions(s);
  EXPECT_TRUE(Contains(list, "int4-g128 projection weights")) << list;
  EXPECT_EQ(SuggestionsToJson(s).size(), s.size());
  EXPECT_EQ(RenderSuggestions({}), "SUGGESTIONS: none found\n");
}

}  // namespace
}  // namespace tpserve
