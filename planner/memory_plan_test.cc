#include "planner/memory_plan.h"

#include <map>

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

PlanInputs Inputs(const ModelSpec& model, const char* weights, int tp, const char* gpu) {
  PlanInputs in;
  in.model = model;
  in.weights = *WeightFormatsPreset(weights);
  in.tp = tp;
  in.device = *GpuPreset(gpu);
  in.max_context_tokens = 8192;
  in.target_concurrent_sequences = 10;
  return in;
}

PlanInputs SmolOnHost() {
  PlanInputs in;
  in.model = SmolLM2_135M();
  in.weights = *WeightFormatsPreset("q4_1");
  in.device = HostCpuSpecFromMemTotal(int64_t{4} << 30, 20e9, 100e9);
  in.kv_cache_dtype = FormatKind::kF32;
  in.activation_dtype = FormatKind::kF32;
  in.max_context_tokens = 512;
  in.max_tokens_per_step = 64;
  in.max_sequences_per_step = 8;
  in.target_concurrent_sequences = 4;
  return in;
}

TEST(MemoryPlanTest, GpuAttentionIsWhatTheCudaBackendReserves) {
  // 405B at tp=8 on H100s: FlashInfer's workspace for 16 heads over 1 KV head of 128, as
  // kernels/cuda/attention_workspace_test works it out (2112 partial rows for a 264-CTA split
  // batch; FA3's 16 x (2048 / 128 + 2048) works of seven lists), not the 1 GiB
  // [16 heads x 2048 x 8192] f32 scores the plan used to count.
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.max_tokens_per_step = 2048;
  in.max_sequences_per_step = 256;
  const ShardingPlan rank0 = *ShardingPlan::Create(in.model, in.weights, {0, 8});
  const int64_t flashinfer = (16 * 2112 * 128 * 4 + 15) + (16 * 2112 * 4 + 15) +
                             2 * (7 * (4 * 16 * (16 + 2048) + 15) + (4 * 133 + 15));
  EXPECT_EQ(ActivationBuffersFor(in, rank0, true).attention_bytes, flashinfer);
  // An fp8 cache: the same kernels; f32 KV: our SIMT kernels' split scratch instead.
  in.kv_cache_dtype = FormatKind::kF8E4M3;
  EXPECT_EQ(ActivationBuffersFor(in, rank0, true).attention_bytes, flashinfer);
  in.kv_cache_dtype = FormatKind::kF32;
  EXPECT_NE(ActivationBuffersFor(in, rank0, true).attention_bytes, flashinfer);
  // A B200 gets no FlashInfer (its kernels are Hopper SASS): SIMT too.
  in.kv_cache_dtype = FormatKind::kBF16;
  in.device = *GpuPreset("b200");
  EXPECT_NE(ActivationBuffersFor(in, rank0, true).attention_bytes, flashinfer);
}

// The recorded decode steps (CUDA graphs) are a line of a GPU rank's step buffers: one
// recording per (batch bucket, context bucket), each an estimate of launches x bytes per
// launch (kernels/step_capture.h). 8B (32 layers) with 256 sequences per step and an 8192-token
// context: 9 batch buckets (1 .. 256) x 6 context buckets (256 .. 8192) = 54 recordings of
// (32 x 24 + 8) x 4096 = 3,178,496 bytes. Nothing without recordings: --enforce_eager, the CPU
// host, --deterministic_tp, a mixture of experts. On the old code the plan had no such line
// (graph_bytes did not exist, and the KV pool was sized as if recordings cost nothing).
TEST(MemoryPlanTest, RecordedDecodeStepsAreANamedLineOfTheStepBuffers) {
  PlanInputs in = Inputs(Llama31_8B(), "fp8", 1, "h100-80g");
  in.max_tokens_per_step = 2048;
  in.max_sequences_per_step = 256;
  const ShardingPlan rank0 = *ShardingPlan::Create(in.model, in.weights, {0, 1});
  const ActivationBuffers recorded = ActivationBuffersFor(in, rank0, true);
  EXPECT_EQ(recorded.recordings, 54);
  EXPECT_EQ(recorded.graph_bytes, 54 * 3'178'496);
  // And the fused gate/up GEMM's product before its split, the widest fused matrix:
  // 2048 tokens x (2 x 14336) rows x 2 bytes (bf16).
  EXPECT_EQ(recorded.fused_product_bytes, 2048 * 2 * 14336 * 2);
  EXPECT_EQ(recorded.Total(), recorded.step.Total() + recorded.attention_bytes + 54 * 3'178'496 +
                                  2048 * 2 * 14336 * 2);
  // The plan's KV pool gives the recordings their room: fewer bytes left for KV.
  MemoryPlan with = *PlanMemory(in);
  in.cuda_graphs = false;  // --enforce_eager
  EXPECT_EQ(ActivationBuffersFor(in, rank0, true).graph_bytes, 0);
  MemoryPlan without = *PlanMemory(in);
  EXPECT_EQ(without.stages[0].available_for_kv_bytes - with.stages[0].available_for_kv_bytes,
            54 * 3'178'496);
  in.cuda_graphs = true;
  in.deterministic_tp = true;  // the CUDA backend does not record there
  EXPECT_EQ(ActivationBuffersFor(in, rank0, true).graph_bytes, 0);
  in.deterministic_tp = false;
  in.max_context_tokens = 300;  // context buckets 256 and 512
  EXPECT_EQ(ActivationBuffersFor(in, rank0, true).recordings, 9 * 2);
  PlanInputs host = SmolOnHost();
  const ShardingPlan host_rank0 = *ShardingPlan::Create(host.model, host.weights, {0, 1});
  EXPECT_EQ(ActivationBuffersFor(host, host_rank0, true).graph_bytes, 0);
  EXPECT_EQ(ActivationBuffersFor(host, host_rank0, true).fused_product_bytes, 0);  // no fusing
}

// A GPU rank holds the int4 and fp8 projections in the CUDA backend's mixed-input GEMM form
// (kernels/cuda/weight_placement.h), which the plan counts per role: 4 bytes per (128-column
// group, row) beyond the stored form for int4 g128 (f32 scale + offset for f16 scale + zero)
// and for fp8 (an f32 scale per 128 columns beside the codes), so n * k / 32 per matrix. A
// 405B rank at tp = 8, per layer: q [2048 x 16384] 1,048,576; k, v [128 x 16384] 65,536;
// o [16384 x 2048] 1,048,576; gate, up [6656 x 16384] and down [16384 x 6656] 3,407,872; times
// 126 layers. Embedding and LM head (f16 / bf16 in these presets) and norms add nothing.
TEST(MemoryPlanTest, GpuRanksCountTheMixedGemmFormOfEachProjection) {
  const std::map<TensorRole, int64_t> per_rank = {
      {TensorRole::kQ, 132'120'576},    {TensorRole::kK, 8'257'536},
      {TensorRole::kV, 8'257'536},      {TensorRole::kO, 132'120'576},
      {TensorRole::kGate, 429'391'872}, {TensorRole::kUp, 429'391'872},
      {TensorRole::kDown, 429'391'872}};
  const int64_t total = 1'568'931'840;  // 1.46 GiB per rank
  for (const char* weights : {"int4", "fp8"}) {
    SCOPED_TRACE(weights);
    absl::StatusOr<MemoryPlan> gpu = PlanMemory(Inputs(Llama31_405B(), weights, 8, "h200"));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const ShardingTable stored = *PlanSharding(Llama31_405B(), *WeightFormatsPreset(weights), 8, 1);
    const StageShards& s = gpu->sharding.stages[0];
    for (const RoleShard& r : s.roles) {
      const auto want = per_rank.find(r.role);
      EXPECT_EQ(r.backend_form_bytes_per_rank, want == per_rank.end() ? 0 : want->second)
          << TensorRoleName(r.role);
      EXPECT_EQ(r.bytes_per_rank,
                stored.stages[0].Find(r.role)->bytes_per_rank + r.backend_form_bytes_per_rank)
          << TensorRoleName(r.role);
    }
    EXPECT_EQ(gpu->stages[0].weight_bytes, stored.stages[0].weight_bytes_per_rank + total);
    EXPECT_EQ(gpu->sharding.backend_form_bytes, 8 * total);
    // The CPU host holds weights as stored; so does a B200 (the mixed GEMM is sm_90a SASS).
    PlanInputs host = Inputs(Llama31_405B(), weights, 8, "h200");
    host.device = HostCpuSpecFromMemTotal(int64_t{2} << 40, 20e9, 100e9);
    host.activation_dtype = FormatKind::kF32;
    EXPECT_EQ(PlanMemory(host)->stages[0].weight_bytes, stored.stages[0].weight_bytes_per_rank);
    EXPECT_EQ(PlanMemory(Inputs(Llama31_405B(), weights, 8, "b200"))->stages[0].weight_bytes,
              stored.stages[0].weight_bytes_per_rank);
  }
}

TEST(MemoryPlanTest, KvBytesPerTokenFollowsLocalKvHeads) {
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  EXPECT_EQ(KvBytesPerToken(in), 2 * 126 * 1 * 128 * 2);  // 64,512
  in.kv_cache_dtype = FormatKind::kF8E4M3;
  EXPECT_EQ(KvBytesPerToken(in), 2 * 126 * 1 * 128 * 1);
  in.pp = 2;
  EXPECT_EQ(KvBytesPerToken(in), 2 * 63 * 1 * 128 * 1);
}

// DeepSeek-V3's latent cache: 61 layers of one 512 + 64 entry, the same on every rank (no head
// split divides it), not 2 * 61 * (128 heads / tp) * 192 as grouped-query attention would.
TEST(MemoryPlanTest, LatentCacheIsWholeOnEveryRank) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  PlanInputs in = Inputs(v3, "fp8", 8, "h200");
  EXPECT_EQ(KvBytesPerToken(in), 61 * 576 * 2);  // 70,272
  in.tp = 16;
  EXPECT_EQ(KvBytesPerToken(in), 61 * 576 * 2);
  in.kv_cache_dtype = FormatKind::kF8E4M3;
  EXPECT_EQ(KvBytesPerToken(in), 61 * 576);
}

// The verdicts docs/CAPACITY.md works by hand: FP8 DeepSeek-V3 at its full 163,840-token context
// fits 8 H200s and 16 H100s, and not 8 H100s, whose 74.72 GiB usable per rank (0.95 of the
// 79.65 GiB less the 1 GiB reserve) fall short of the 82.28 GiB of weights a rank holds.
TEST(MemoryPlanTest, DeepseekV3VerdictsOnH200AndH100) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  PlanInputs in = Inputs(v3, "fp8", 8, "h200");
  in.max_context_tokens = 163840;
  in.target_concurrent_sequences = 1;
  absl::StatusOr<MemoryPlan> h200 = PlanMemory(in);
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_TRUE(h200->meets_target) << h200->verdict;
  EXPECT_EQ(h200->num_kv_blocks * 16 / 163840, 4) << h200->verdict;
  in.device = *GpuPreset("h100-80g");
  absl::StatusOr<MemoryPlan> h100 = PlanMemory(in);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_FALSE(h100->weights_fit);
  EXPECT_EQ(h100->verdict.rfind("DOES NOT FIT: weights need 82.28 GiB per rank but only "
                                "74.72 GiB is usable; over by 7.56 GiB", 0), 0u)
      << h100->verdict;
  in.tp = 16;
  absl::StatusOr<MemoryPlan> h100x16 = PlanMemory(in);
  ASSERT_TRUE(h100x16.ok()) << h100x16.status();
  EXPECT_TRUE(h100x16->meets_target) << h100x16->verdict;
  EXPECT_EQ(h100x16->num_kv_blocks * 16 / 163840, 2) << h100x16->verdict;
}

// --attention_dp for FP8 DeepSeek-V3 with --expert_parallel (docs/CAPACITY.md works it by
// hand): every GPU holds the whole attention (o, q_b and the up-projections 8 times their split
// share), so each caches fewer blocks, but each caches its own sequences: 8 partitions of
// 33,949 blocks hold 24 sequences of the full 163,840-token context where the split layout's
// 43,979 blocks, the same latent on every GPU, hold 4. On 16 H100s, 16 against 2; on 8 H100s
// neither layout's weights fit.
TEST(MemoryPlanTest, DeepseekV3AttentionDataParallelAddsTheRanksCaches) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  PlanInputs in = Inputs(v3, "fp8", 8, "h200");
  in.max_context_tokens = 163840;
  in.target_concurrent_sequences = 1;
  in.expert_parallel = true;
  absl::StatusOr<MemoryPlan> split = PlanMemory(in);
  ASSERT_TRUE(split.ok()) << split.status();
  in.attention_dp = true;
  absl::StatusOr<MemoryPlan> dp = PlanMemory(in);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(split->kv_partitions, 1);
  EXPECT_EQ(split->num_kv_blocks, 43979);
  EXPECT_EQ(split->max_concurrent_sequences, 4);
  EXPECT_EQ(dp->kv_partitions, 8);
  EXPECT_EQ(dp->num_kv_blocks, 33949);
  EXPECT_EQ(dp->kv_token_capacity, 8 * 33949 * 16);
  EXPECT_EQ(dp->max_concurrent_sequences, 8 * (33949 / 10240));
  EXPECT_EQ(dp->stages[0].kv_bytes_per_token, split->stages[0].kv_bytes_per_token);  // 70,272
  EXPECT_EQ(dp->sharding.stages[0].Find(TensorRole::kKvB), nullptr);  // the expanded form's
  for (TensorRole role : {TensorRole::kO, TensorRole::kQB, TensorRole::kKB, TensorRole::kVB}) {
    const RoleShard* whole = dp->sharding.stages[0].Find(role);
    const RoleShard* share = split->sharding.stages[0].Find(role);
    ASSERT_NE(whole, nullptr);
    ASSERT_NE(share, nullptr);
    // o is split by columns, and each share keeps all 7,168 rows' f32 fp8 scales: the whole
    // matrix holds them once, not 8 times.
    const int64_t scales = role == TensorRole::kO ? 7 * int64_t{7168} * 4 * 61 : 0;
    EXPECT_EQ(whole->bytes_per_rank, 8 * share->bytes_per_rank - scales) << TensorRoleName(role);
    EXPECT_EQ(whole->kind, ShardKind::kReplicated) << TensorRoleName(role);
  }
  EXPECT_NE(dp->verdict.find("33949 KV blocks of 16 tokens on each of 8 ranks"),
            std::string::npos)
      << dp->verdict;
  in.device = *GpuPreset("h100-80g");
  absl::StatusOr<MemoryPlan> h100 = PlanMemory(in);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->verdict.rfind("DOES NOT FIT: weights need 93.71 GiB per rank", 0), 0u)
      << h100->verdict;
  in.tp = 16;
  absl::StatusOr<MemoryPlan> h100x16 = PlanMemory(in);
  ASSERT_TRUE(h100x16.ok()) << h100x16.status();
  EXPECT_EQ(h100x16->max_concurrent_sequences, 16) << h100x16->verdict;
  // FlashInfer's MLA lists at most 16,384 work items: 128 heads per GPU over 8,192-token steps
  // would pass them, refused here as the backend refuses it at load.
  in.max_tokens_per_step = 8192;
  const absl::Status big = PlanMemory(in).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("max_tokens_per_step=8192: must be small enough that 128 "
                               "latent-attention heads per GPU"),
            std::string::npos)
      << big;
  in.attention_dp = false;  // 8 heads per GPU at TP 16: fits
  EXPECT_TRUE(PlanMemory(in).ok());
}

// --speculative=mtp for DeepSeek-V3: the draft is its one MTP layer (a decoder layer of MLA and
// 256 experts, eh_proj and its norms; embedding and LM head as the target's), and every KV
// token carries the draft's latent (576 x 2 B) and the target's last hidden state, which the
// draft reads (7168 x 2 B): 15,488 B on top of the target's 70,272.
TEST(MemoryPlanTest, DeepseekV3MtpDraftCarriesItsLatentAndTheTargetsHiddenState) {
  const ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  ASSERT_EQ(v3.num_mtp_layers, 1);
  PlanInputs in = Inputs(v3, "fp8", 8, "h200");
  in.max_context_tokens = 163840;
  in.target_concurrent_sequences = 1;
  DraftPlanInputs d;
  d.model = *MtpDraftSpec(v3);
  d.weights = in.weights;
  in.draft = d;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const StageMemory& m = plan->stages[0];
  EXPECT_EQ(m.draft_kv_bytes_per_token, 576 * 2 + 7168 * 2);
  EXPECT_EQ(m.kv_bytes_per_token, 70272 + 15488);
  EXPECT_EQ(plan->max_concurrent_sequences, 3) << plan->verdict;
  EXPECT_EQ(d.model.num_layers, 1);
  EXPECT_TRUE(HasRole(d.model, TensorRole::kMtpEhProj));
  EXPECT_FALSE(HasRole(v3, TensorRole::kMtpEhProj));
  // A model without one cannot draft so.
  const absl::Status none = MtpDraftSpec(*ModelSpecPreset("llama-3.1-8b")).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MemoryPlanTest, StepBuffersFollowTheStatedFormulas) {
  const PlanInputs in = SmolOnHost();
  const ShardingPlan rank0 = *ShardingPlan::Create(in.model, in.weights, {0, 1});
  const ActivationBuffers b = ActivationBuffersFor(in, rank0, /*last_stage=*/true);
  // 64 tokens, f32: the residual stream and its two companions, 9 query and 3 KV heads of 64,
  // the FFN of 1536, no chunk sums (the default all-reduce), 8 rows of logits; one rank
  // gathers nothing.
  EXPECT_EQ(b.step.residual, 64 * 576 * 4);
  EXPECT_EQ(b.step.normed, 64 * 576 * 4);
  EXPECT_EQ(b.step.proj, 64 * 576 * 4);
  EXPECT_EQ(b.step.q + b.step.attn, 2 * 64 * 9 * 64 * 4);
  EXPECT_EQ(b.step.k + b.step.v, 2 * 64 * 3 * 64 * 4);
  EXPECT_EQ(b.step.gate + b.step.up, 2 * 64 * 1536 * 4);
  EXPECT_EQ(b.step.partials, 0);
  EXPECT_EQ(b.step.all_partials, 0);
  EXPECT_EQ(b.step.logits_local, 8 * 49152 * 4);
  EXPECT_EQ(b.step.logits_gathered, 0);
  EXPECT_EQ(b.attention_bytes, 9 * 64 * 512 * 4);  // the host's f32 scores bound
  EXPECT_EQ(ActivationBuffersFor(in, rank0, /*last_stage=*/false).step.logits_local, 0);
  EXPECT_EQ(CommBuffersFor(in).Total(), 0);  // one rank, no communicator

  PlanInputs tp3 = in;
  tp3.tp = 3;
  tp3.device = *GpuPreset("l40s");
  const ShardingPlan rank0_of_3 = *ShardingPlan::Create(in.model, in.weights, {0, 3});
  const ActivationBuffers b3 = ActivationBuffersFor(tp3, rank0_of_3, true);
  EXPECT_EQ(b3.step.q, 64 * 3 * 64 * 4);
  EXPECT_EQ(b3.step.k, 64 * 1 * 64 * 4);
  EXPECT_EQ(b3.step.partials, 0);      // the all-reduce sums proj in place
  EXPECT_EQ(b3.step.all_partials, 0);
  EXPECT_EQ(b3.step.logits_gathered, 3 * 8 * 16384 * 4);
  EXPECT_EQ(CommBuffersFor(tp3).allreduce_bytes, 64 * 576 * 4);
  EXPECT_EQ(CommBuffersFor(tp3).fixed_bytes, int64_t{512} << 20);

  // --deterministic_tp: one chunk sum per KV group (3 groups of 192 q4_1 columns), at one
  // rank too (so TP=1 sums in the same order); TP=3 gathers every rank's chunk.
  PlanInputs det = in;
  det.deterministic_tp = true;
  EXPECT_EQ(ActivationBuffersFor(det, rank0, true).step.partials, 3 * 64 * 576 * 4);
  EXPECT_EQ(ActivationBuffersFor(det, rank0, true).step.all_partials, 0);
  PlanInputs det3 = tp3;
  det3.deterministic_tp = true;
  EXPECT_EQ(ActivationBuffersFor(det3, rank0_of_3, true).step.partials, 64 * 576 * 4);
  EXPECT_EQ(ActivationBuffersFor(det3, rank0_of_3, true).step.all_partials, 3 * 64 * 576 * 4);
}

TEST(MemoryPlanTest, EveryByteOfTheDeviceIsAccountedFor) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(Llama31_405B(), "fp8", 8, "h100-80g"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const StageMemory& m = plan->stages[0];
  const int64_t device = int64_t{81559} << 20;
  const int64_t reserve = int64_t{1} << 30;
  EXPECT_EQ(m.device_bytes, device);
  EXPECT_EQ(m.safety_bytes, (device - reserve + 19) / 20);  // ceil(5%)
  const int64_t fixed =
      reserve + m.safety_bytes + m.weight_bytes + m.activations.Total() + m.comm.Total();
  EXPECT_EQ(m.available_for_kv_bytes, device - fixed);
  EXPECT_EQ(plan->num_kv_blocks, (device - fixed) / m.kv_bytes_per_block);
  EXPECT_EQ(fixed + m.kv_pool_bytes + m.unallocated_bytes, device);
  EXPECT_GE(m.unallocated_bytes, 0);
  EXPECT_LT(m.unallocated_bytes, m.kv_bytes_per_block);
  EXPECT_EQ(plan->blocks_per_sequence, 8192 / 16);
  EXPECT_EQ(plan->max_concurrent_sequences, plan->num_kv_blocks / 512);
  EXPECT_EQ(plan->kv_token_capacity, plan->num_kv_blocks * 16);
  EXPECT_TRUE(plan->meets_target);
  EXPECT_EQ(plan->shortfall_bytes_per_rank, 0);
  EXPECT_EQ(plan->verdict.rfind("FITS: ", 0), 0u) << plan->verdict;
}

TEST(MemoryPlanTest, WeightsOverTheDeviceSayByHowMuch) {
  absl::StatusOr<MemoryPlan> plan = PlanMemory(Inputs(Llama31_405B(), "bf16", 1, "h100-80g"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->weights_fit);
  EXPECT_FALSE(plan->meets_target);
  EXPECT_EQ(plan->num_kv_blocks, 0);
  EXPECT_EQ(plan->verdict.rfind("DOES NOT FIT: weights need ", 0), 0u) << plan->verdict;
  EXPECT_NE(plan->verdict.find("over by "), std::string::npos) << plan->verdict;
  EXPECT_GT(plan->shortfall_bytes_per_rank, int64_t{600} << 30);
}

TEST(MemoryPlanTest, KvShortOfTargetReportsWhatFits) {
  PlanInputs in = Inputs(Llama31_8B(), "bf16", 1, "h100-80g");
  in.max_context_tokens = 131072;
  in.target_concurrent_sequences = 20;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->weights_fit);
  EXPECT_TRUE(plan->buffers_fit);
  EXPECT_FALSE(plan->meets_target);
  const StageMemory& m = plan->stages[0];
  EXPECT_EQ(m.kv_bytes_per_token, 2 * 32 * 8 * 128 * 2);
  EXPECT_EQ(m.kv_target_bytes, 20 * 8192 * m.kv_bytes_per_block);
  EXPECT_EQ(plan->shortfall_bytes_per_rank, m.kv_target_bytes - m.available_for_kv_bytes);
  EXPECT_EQ(plan->verdict.rfind("SHORT: KV for 20 sequences x 131072 tokens", 0), 0u)
      << plan->verdict;
  EXPECT_NE(
      plan->verdict.find("fits " + std::to_string(plan->max_concurrent_sequences) + " sequence"),
      std::string::npos)
      << plan->verdict;
}

TEST(MemoryPlanTest, PipelineStagesShareOneBlockCount) {
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 4, "h100-80g");
  in.pp = 2;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->num_ranks, 8);
  EXPECT_EQ(plan->stages[0].activations.step.logits_local, 0);
  EXPECT_GT(plan->stages[1].activations.step.logits_local, 0);
  EXPECT_EQ(plan->stages[0].comm.pipeline_bytes, 2 * 2048 * 16384 * 2);
  EXPECT_EQ(plan->num_kv_blocks,
            std::min(plan->stages[0].kv_blocks_fit, plan->stages[1].kv_blocks_fit));
}

TEST(MemoryPlanTest, HostPlanUsesOverridesAndNoRuntimeReserve) {
  PlanInputs in = SmolOnHost();
  in.safety_fraction = 0.25;
  in.runtime_reserve_bytes = int64_t{1} << 20;
  absl::StatusOr<MemoryPlan> plan = PlanMemory(in);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const StageMemory& m = plan->stages[0];
  EXPECT_EQ(m.runtime_reserve_bytes, int64_t{1} << 20);
  EXPECT_EQ(m.safety_bytes, ((int64_t{4} << 30) - (int64_t{1} << 20)) / 4);
  EXPECT_EQ(m.kv_bytes_per_token, 2 * 30 * 3 * 64 * 4);
  EXPECT_TRUE(plan->meets_target);
  EXPECT_EQ(PlanMemory(SmolOnHost())->stages[0].runtime_reserve_bytes, 0);
}

TEST(MemoryPlanTest, BadInputsNameTheFieldAndBound) {
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.max_context_tokens = 200000;
  EXPECT_EQ(PlanMemory(in).status().message(),
            "max_context_tokens=200000: must be in [1, 131072] (the model's context length)");
  in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.max_sequences_per_step = 4096;
  EXPECT_EQ(PlanMemory(in).status().message(),
            "max_sequences_per_step=4096: must be in [1, max_tokens_per_step=2048]");
  in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.kv_cache_dtype = FormatKind::kQ4_0;
  EXPECT_NE(PlanMemory(in).status().message().find("kv_cache_dtype=q4_0"), std::string::npos);
  in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.kv_block_size_tokens = 0;
  EXPECT_EQ(PlanMemory(in).status().code(), absl::StatusCode::kInvalidArgument);
  in = Inputs(Llama31_405B(), "fp8", 8, "h100-80g");
  in.safety_fraction = 1.0;
  EXPECT_EQ(PlanMemory(in).status().message(), "safety_fraction=1: must be in [0, 1)");
}

// A draft model on the same ranks: each rank pays the draft's weights and buffers, as the
// draft planned alone at the same degree holds them, and every block holds both models' KV.
// What the pool would have held without it is the plan without a draft.
TEST(MemoryPlanTest, ADraftModelCostsItsOwnPlanAndASliceOfEveryBlock) {
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 8, "h200");
  const MemoryPlan alone = *PlanMemory(in);
  PlanInputs draft_alone = Inputs(Llama31_8B(), "fp8", 8, "h200");
  draft_alone.max_sequences_per_step = 64;
  const MemoryPlan draft_plan = *PlanMemory(draft_alone);
  in.draft = DraftPlanInputs{Llama31_8B(), *WeightFormatsPreset("fp8"), 64};
  const MemoryPlan with = *PlanMemory(in);
  const StageMemory& m = with.stages[0];
  EXPECT_EQ(m.draft_weight_bytes, draft_plan.stages[0].weight_bytes);
  EXPECT_EQ(m.draft_activations.Total(), draft_plan.stages[0].activations.Total());
  EXPECT_EQ(m.draft_kv_bytes_per_token, draft_plan.stages[0].kv_bytes_per_token);
  EXPECT_EQ(m.kv_bytes_per_token,
            alone.stages[0].kv_bytes_per_token + draft_plan.stages[0].kv_bytes_per_token);
  EXPECT_EQ(m.FixedBytes(), alone.stages[0].FixedBytes() + draft_plan.stages[0].weight_bytes +
                                draft_plan.stages[0].activations.Total());
  EXPECT_EQ(with.num_kv_blocks_without_draft, alone.num_kv_blocks);
  EXPECT_EQ(alone.num_kv_blocks_without_draft, alone.num_kv_blocks);
  EXPECT_LT(with.num_kv_blocks, alone.num_kv_blocks);
  // Every byte is still accounted for, and the pool is as many blocks as fit.
  EXPECT_EQ(m.FixedBytes() + m.kv_pool_bytes + m.unallocated_bytes, m.device_bytes);
  EXPECT_GE(m.unallocated_bytes, 0);
  EXPECT_LT(m.unallocated_bytes, m.kv_bytes_per_block);
}

TEST(MemoryPlanTest, DraftModelsThatCannotServeAreRefusedByName) {
  PlanInputs in = Inputs(Llama31_405B(), "fp8", 8, "h200");
  ModelSpec other = Llama31_8B();
  other.vocab_size = 32000;
  in.draft = DraftPlanInputs{other, *WeightFormatsPreset("fp8"), 64};
  EXPECT_EQ(PlanMemory(in).status().message(),
            "draft.model.vocab_size=32000: a draft model must share the target's vocabulary of "
            "128256 tokens");
  in.draft = DraftPlanInputs{Llama31_8B(), *WeightFormatsPreset("fp8"), 64};
  in.tp = 4;
  in.pp = 2;
  EXPECT_EQ(PlanMemory(in).status().message(),
            "draft: a draft model runs on the target's ranks of one pipeline stage; pp=2 is not "
            "supported with one");
  // A draft whose heads do not split over the degree: the sharding's own error, prefixed.
  in = Inputs(Llama31_405B(), "fp8", 8, "h200");
  ModelSpec smol = SmolLM2_135M();  // 3 KV heads: not split over 8 ranks
  smol.vocab_size = in.model.vocab_size;
  in.draft = DraftPlanInputs{smol, *WeightFormatsPreset("bf16"), 64};
  const absl::Status s = PlanMemory(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "draft: tensor-parallel degree 8 does not divide num_heads = 9 or num_kv_heads = 3 (nor "
            "is a multiple of it); query heads are split whole, KV "
            "heads whole or, past their count, copied to the ranks that share one, so valid "
            "degrees (divisors of num_heads = 9 that divide or are multiples of num_kv_heads = "
            "3) are: 1, 3, 9");
}

TEST(MemoryPlanTest, FormatBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{40} << 30), "40.00 GiB");
  EXPECT_EQ(FormatBytes(-(int64_t{2} << 30)), "-2.00 GiB");
}

}  // namespace
}  // namespace tpserve
