#include "planner/roofline.h"

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

MemoryPlan Plan(const ModelSpec& model, int tp, int64_t users, int64_t context) {
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
  EXPECT_EQ(r.collectives_per_step, 0);
  EXPECT_EQ(r.collective_time_s, 0);
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

TEST(RooflineTest, RingAllGatherModel) {
  EXPECT_DOUBLE_EQ(RingAllGatherSeconds(1'000'000, 8, 1e9, 1e-5), 1e-5 + 0.875e-3);
  EXPECT_EQ(RingAllGatherSeconds(1'000'000, 1, 1e9, 1e-5), 0);
}

// 70B on 8 H100s, 10 users: two row-parallel all-reduces per layer of 10 hidden states in
// bf16, one all-reduce of the embedding rows, one all-gather of 10 x 16,032 f32 logits per
// rank (128,256 / 8).
TEST(RooflineTest, TensorParallelAddsTwoAllReducesPerLayer) {
  const MemoryPlan plan = Plan(Llama33_70B(), 8, 10, 8192);
  const Roofline r = EstimateRoofline(plan, RooflineAssumptions{});
  EXPECT_STREQ(r.reduction, "all-reduce");
  EXPECT_EQ(r.reduction_chunks, 1);
  EXPECT_EQ(r.collectives_per_step, 2 * 80 + 2);
  EXPECT_EQ(r.row_parallel_bytes, 10 * 8192 * 2);
  EXPECT_EQ(r.logits_gather_bytes, 8 * 10 * 16032 * 4);
  const double all_reduce = 10e-6 + 2.0 * 7 / 8 * 163840 / 450e9;
  EXPECT_NEAR(r.collective_time_s,
              161 * all_reduce + 10e-6 + 7.0 / 8 * (8 * 10 * 16032 * 4) / 450e9, 1e-12);
  // Each rank reads its own shard: the 70B weights minus the embedding, over 8.
  const int64_t embedding = plan.sharding.stages[0].Find(TensorRole::kEmbedding)->bytes_per_rank;
  EXPECT_EQ(r.weight_bytes_read, plan.stages[0].weight_bytes - embedding);
  EXPECT_EQ(r.kv_bytes_read, 10 * 8192 * int64_t{2 * 80 * 1 * 128 * 2});
  EXPECT_NEAR(r.decode_step_s, r.memory_time_s + r.collective_time_s, 1e-15);
  EXPECT_NEAR(r.tokens_per_s_aggregate, 10 * r.tokens_per_s_per_user, 1e-9);
}

// --deterministic_tp: each row-parallel reduction all-gathers one f32 partial sum per KV-head
// group (8 for 70B): 8 x 10 x 8192 x 4 bytes, 16 times the bf16 all-reduce's payload.
TEST(RooflineTest, DeterministicReductionAllGathersChunks) {
  PlanInputs in = Plan(Llama33_70B(), 8, 10, 8192).inputs;
  in.deterministic_tp = true;
  const Roofline r = EstimateRoofline(*PlanMemory(in), RooflineAssumptions{});
  EXPECT_STREQ(r.reduction, "chunked all-gather");
  EXPECT_EQ(r.reduction_chunks, 8);
  EXPECT_EQ(r.row_parallel_bytes, 8 * 10 * 8192 * 4);
  const double all_reduce = 10e-6 + 2.0 * 7 / 8 * 163840 / 450e9;
  const double chunk_gather = 10e-6 + 7.0 / 8 * (8 * 10 * 8192 * 4) / 450e9;
  EXPECT_NEAR(r.collective_time_s,
              160 * chunk_gather + all_reduce + 10e-6 + 7.0 / 8 * (8 * 10 * 16032 * 4) / 450e9,
              1e-12);
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

// Mixtral 8x22B in fp8 on 8 x H100 80GB, 64 users of 4096 tokens.
PlanInputs Mixtral8x22bOnEightH100s() {
  PlanInputs in;
  in.model = *ModelSpecPreset("mixtral-8x22b");
  in.weights = *WeightFormatsPreset("fp8");
  in.tp = 8;
  in.device = *GpuPreset("h100-80g");
  in.max_context_tokens = 4096;
  in.target_concurrent_sequences = 64;
  return in;
}

// A mixture of experts reads, per decode step, only the experts its tokens are routed to:
// Mixtral 8x22B fp8 at TP 8, one user takes 2 of 8 experts (1/4 of the expert bytes), 64 users
// nearly all (1 - 0.75^64). Prefill multiplies the router, 2 experts per layer and attention:
// per layer 88,080,384 + 49,152 + 2 * 3 * 6144 * 16384 = 692,109,312 elements.
TEST(RooflineTest, MixturesOfExpertsReadTheExpertsTheirTokensChoose) {
  PlanInputs in = Mixtral8x22bOnEightH100s();
  const MemoryPlan plan = *PlanMemory(in);
  const StageShards& stage = plan.sharding.stages.at(0);
  int64_t experts = 0;
  for (TensorRole role :
       {TensorRole::kExpertGate, TensorRole::kExpertUp, TensorRole::kExpertDown}) {
    experts += stage.Find(role)->bytes_per_rank;
  }
  const int64_t rest = stage.weight_bytes_per_rank -
                       stage.Find(TensorRole::kEmbedding)->bytes_per_rank - experts;
  RooflineAssumptions one;
  one.concurrency = 1;
  EXPECT_EQ(EstimateRoofline(plan, one).weight_bytes_read,
            rest + experts - static_cast<int64_t>(static_cast<double>(experts) * 0.75));
  const Roofline all = EstimateRoofline(plan, RooflineAssumptions{});
  EXPECT_NEAR(static_cast<double>(all.weight_bytes_read), static_cast<double>(rest + experts),
              static_cast<double>(experts) * 1e-7);
  RooflineAssumptions prefill;
  prefill.prompt_tokens = 1024;
  EXPECT_DOUBLE_EQ(EstimateRoofline(plan, prefill).prefill_flops,
                   2.0 * 56 * 692'109'312.0 * 1024 + 2.0 * 32000 * 6144 +
                       2.0 * 56 * 48 * 128 * 1024.0 * 1024.0);
}

// --expert_parallel: Mixtral's 56 MoE layers end in an all-to-all of f32 slot outputs (each of 8
// ranks sends 64 users x 2 slots x 7/64 of them x 6144 x 4 bytes) and an all-gather of the 64
// combined bf16 rows, in place of the down all-reduce; attention's o reduction stays.
TEST(RooflineTest, ExpertParallelTradesTheDownReductionForTheExchange) {
  PlanInputs in = Mixtral8x22bOnEightH100s();
  const Roofline tp = EstimateRoofline(*PlanMemory(in), RooflineAssumptions{});
  in.expert_parallel = true;
  const Roofline ep = EstimateRoofline(*PlanMemory(in), RooflineAssumptions{});
  EXPECT_EQ(tp.expert_all_to_all_bytes, 0);
  EXPECT_EQ(ep.expert_all_to_all_bytes, 64 * 2 * 7 * 6144 * 4 / 64);
  EXPECT_EQ(ep.collectives_per_step, 56 + 2 * 56 + 2);
  const double bw = 450e9, lat = 10e-6;
  const double down = RingAllReduceSeconds(64 * 6144 * 2, 8, bw, lat);
  const double exchange =
      lat + (64.0 * 2 * 7 * 6144 * 4 / 64) / bw + RingAllGatherSeconds(64 * 6144 * 2, 8, bw, lat);
  EXPECT_NEAR(ep.collective_time_s - tp.collective_time_s, 56 * (exchange - down), 1e-12);
  EXPECT_NEAR(ExpertParallelSeconds(in, 64, 1, bw, lat), exchange, 1e-15);
}

}  // namespace
}  // namespace tpserve
