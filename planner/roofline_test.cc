#include "planner/roofline.h"

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

MemoryPlan Plan(const LlamaConfig& model, int tp, int64_t users, int64_t context) {
  PlanInputs in;
  in.model = model;
  in.weights = *WeightFormatsPreset("bf16");
  in.tp = tp;
  in.device = *GpuPreset("h100-80g");
  in.max_context_tokens = context;
  in.target_concurrent_sequences = users;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(RooflineTest, RingAllReduceModel) {
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(1'000'000, 8, 1e9, 1e-5), 1e-5 + 1.75e-3);
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(1'000'000, 2, 1e9, 0), 1e-3);
  EXPECT_EQ(RingAllReduceSeconds(1'000'000, 1, 1e9, 1e-5), 0);
}

// Llama-3.1-8B bf16 on one H100, one user at 1024 tokens: every weight but the embedding
// table (8,030,261,248 - 525,336,576 parameters, 2 bytes each, the 65 norms of 4096 values
// read as the f32 the engine holds: +532,480) plus 1024 tokens of KV (131,072 bytes each) per
// step at 3.35 TB/s.
TEST(RooflineTest, DecodeIsBytesOverBandwidthOnOneGpu) {
  const Roofline r = EstimateRoofline(Plan(Llama31_8B(), 1, 1, 1024), RooflineAssumptions{});
  EXPECT_EQ(r.weight_bytes_read, 15'010'381'824);
  EXPECT_EQ(r.kv_bytes_read, 134'217'728);
  EXPECT_NEAR(r.memory_time_s, 4.5207760e-3, 1e-9);
  EXPECT_EQ(r.allreduces_per_step, 0);
  EXPECT_EQ(r.allreduce_time_s, 0);
  EXPECT_NEAR(r.tokens_per_s_per_user, 221.2010, 1e-3);
  EXPECT_DOUBLE_EQ(r.tokens_per_s_aggregate, r.tokens_per_s_per_user);
  EXPECT_DOUBLE_EQ(r.memory_bandwidth_bytes_per_s, 3.35e12);
}

// Prefill of 1024 tokens: 2 * 6,979,321,856 layer parameters * 1024 + 2 * vocab * hidden
// (last token's logits) + 2 * 32 layers * 32 heads * 128 * 1024^2 (causal attention).
TEST(RooflineTest, PrefillFlopsAndTime) {
  RooflineAssumptions a;
  a.prompt_tokens = 1024;
  const Roofline r = EstimateRoofline(Plan(Llama31_8B(), 1, 1, 4096), a);
  EXPECT_DOUBLE_EQ(r.prefill_flops, 14'569'579'741'184.0);
  EXPECT_NEAR(r.prefill_compute_s, 14'569'579'741'184.0 / (989e12 * 0.5), 1e-12);
  EXPECT_EQ(r.prefill_allreduce_s, 0);
  EXPECT_EQ(r.prompt_tokens, 1024);
  EXPECT_EQ(r.context_tokens, 4096);
}

TEST(RooflineTest, TensorParallelAddsTwoAllReducesPerLayer) {
  const MemoryPlan plan = Plan(Llama33_70B(), 8, 10, 8192);
  const Roofline r = EstimateRoofline(plan, RooflineAssumptions{});
  EXPECT_EQ(r.allreduces_per_step, 2 * 80);
  EXPECT_EQ(r.allreduce_bytes, 10 * 8192 * 2);  // 10 users' hidden states in bf16
  EXPECT_NEAR(r.allreduce_time_s, 160 * (10e-6 + 2.0 * 7 / 8 * 163840 / 450e9), 1e-12);
  // Each rank reads its own shard: the 70B weights minus the embedding, over 8.
  const int64_t embedding = plan.sharding.stages[0].Find(TensorRole::kEmbedding)->bytes_per_rank;
  EXPECT_EQ(r.weight_bytes_read, plan.stages[0].weight_bytes - embedding);
  EXPECT_EQ(r.kv_bytes_read, 10 * 8192 * int64_t{2 * 80 * 1 * 128 * 2});
  EXPECT_NEAR(r.decode_step_s, r.memory_time_s + r.allreduce_time_s, 1e-15);
  EXPECT_NEAR(r.tokens_per_s_aggregate, 10 * r.tokens_per_s_per_user, 1e-9);
}

TEST(RooflineTest, TiedLmHeadReadsTheEmbeddingTable) {
  PlanInputs in;
  in.model = SmolLM2_135M();
  in.weights = *WeightFormatsPreset("q4_1");
  in.device = HostCpuSpecFromMemTotal(int64_t{8} << 30, 20e9, 100e9);
  in.max_context_tokens = 1024;
  const MemoryPlan plan = *PlanMemory(in);
  const Roofline r = EstimateRoofline(plan, RooflineAssumptions{});
  EXPECT_EQ(r.weight_bytes_read, plan.stages[0].weight_bytes);
}

}  // namespace
}  // namespace tpserve
