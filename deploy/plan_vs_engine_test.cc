// The memory plan is the engine's own: the bytes each CPU rank really holds for weights and
// the KV pool equal the plan's, and its step buffers fit inside the plan's activation budget.
// The executors are built as the launcher builds its ranks: one RankLoad from the plan
// (RankLoadFor), whose slices every rank checks against its own.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "checkpoint/model_files.h"
#include "checkpoint/testing/tiny_llama.h"
#include "deploy/cluster_plan.h"
#include "kernels/backend.h"
#include "model/sharding.h"
#include "worker/local_executor.h"

namespace tpserve {
namespace {

std::string ModelPath() {
  absl::StatusOr<std::string> path = ResolveModelPath("smollm2");
  if (!path.ok()) {
    ADD_FAILURE() << path.status().message();
    return "";
  }
  return *path;
}

// What each rank of `exec` really holds, role by role and buffer by buffer, against what
// `plan` promised rank 0 (the largest share: later ranks may hold fewer vocab rows, and an MLP
// split unevenly a unit less on the ranks past ranks_with_local_shape, uneven_bytes in all).
void ExpectRanksMatchThePlan(const MemoryPlan& plan, LocalExecutor& exec, int tp,
                             int64_t num_kv_blocks, const std::string& where, int s = 0) {
  const StageMemory& stage = plan.stages.at(s);
  const StageShards& shards = plan.sharding.stages.at(s);
  for (int rank = 0; rank < tp; ++rank) {
    SCOPED_TRACE(where + " stage " + std::to_string(s) + " rank " + std::to_string(rank));
    const MemoryFootprint fp = exec.footprint(s * tp + rank);
    for (const RoleShard& r : shards.roles) {
      const int64_t held = fp.weight_bytes_by_role[static_cast<int>(r.role)];
      int64_t want = r.bytes_per_rank;
      if (rank >= r.ranks_with_local_shape) {
        want -= r.uneven_bytes / (tp - r.ranks_with_local_shape);
      }
      if (rank == 0 || ShardKindFor(r.role) != ShardKind::kVocab) {
        EXPECT_EQ(held, want) << TensorRoleName(r.role);
      } else {
        EXPECT_LE(held, want) << TensorRoleName(r.role);
      }
    }
    if (rank == 0) {
      EXPECT_EQ(fp.weight_bytes_resident, stage.weight_bytes);
    }
    EXPECT_EQ(exec.kv_cache_bytes(s * tp + rank), num_kv_blocks * stage.kv_bytes_per_block);
    // The workspace is the plan's step buffers, allocated one for one; a narrower MLP's gate
    // and up buffers are narrower by its missing rows.
    const StepBufferSizes& step = stage.activations.step;
    int64_t narrower = 0;
    if (const RoleShard* gate = shards.Find(TensorRole::kGate);
        gate != nullptr && rank >= gate->ranks_with_local_shape) {
      narrower = 2 * step.gate / gate->local_shape[0] *
                 (gate->local_shape[0] - gate->smallest_local_shape[0]);
    }
    EXPECT_EQ(fp.workspace_bytes, step.Total() - narrower);
  }
}

// SmolLM2 on `tp` ranks x `pp` stages: 2 sequences of up to 1,024 tokens, 256 a step.
ClusterRequest SmolRequest(int tp, int pp, bool deterministic) {
  ClusterRequest request;
  request.ranks = tp;
  request.pp = pp;
  request.context_tokens = 1024;
  request.max_seqs = 2;
  request.max_tokens_per_step = 256;
  request.deterministic_tp = deterministic;
  return request;
}

// (ranks, --deterministic_tp): the two reductions allocate different step buffers.
class PlanVsEngine : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PlanVsEngine, RealAllocationsMatchThePlan) {
  const auto [tp, deterministic] = GetParam();
  absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
  ASSERT_TRUE(files.ok()) << files.status();
  const ClusterRequest request = SmolRequest(tp, 1, deterministic);
  absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->num_kv_blocks, 2 * 1024 / 16);

  absl::StatusOr<RankLoad> load = RankLoadFor(*plan, request);
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->world_size, tp);
  EXPECT_EQ(load->model.max_logit_rows, request.max_seqs);
  EXPECT_EQ(load->max_tokens_per_step, request.max_tokens_per_step);
  EXPECT_EQ(load->deterministic_tp, deterministic);
  EXPECT_EQ(load->model.assignments.size(), static_cast<size_t>(tp));
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(*files, *load);
  ASSERT_TRUE(exec.ok()) << exec.status();
  ExpectRanksMatchThePlan(plan->memory, **exec, tp, plan->num_kv_blocks,
                          deterministic ? "SmolLM2 deterministic" : "SmolLM2");
}

// 9: past the KV heads, the MLP split 6 / 5 units of 32.
INSTANTIATE_TEST_SUITE_P(SmolLM2, PlanVsEngine,
                         ::testing::Combine(::testing::Values(1, 3, 9), ::testing::Bool()));

// Pipeline stages (issue 40): each stage's ranks hold what the plan draws for that stage, its
// layers, its KV cache and its buffers: stage 0 the embedding, the last the final norm, the
// (tied) LM head and the step's rows kept for it, to the byte. Then a step runs through them.
TEST(PlanVsEngineStages, EveryStageHoldsWhatThePlanDrawsForIt) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
  ASSERT_TRUE(files.ok()) << files.status();
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{3, 2}, std::pair{1, 3}}) {
    const ClusterRequest request = SmolRequest(tp, pp, /*deterministic=*/true);
    absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->memory.stages.size(), static_cast<size_t>(pp));
    absl::StatusOr<RankLoad> load = RankLoadFor(*plan, request);
    ASSERT_TRUE(load.ok()) << load.status();
    EXPECT_EQ(load->pipeline_stages, pp);
    EXPECT_EQ(load->model.assignments.size(), static_cast<size_t>(tp * pp));
    EXPECT_EQ(load->model.assignments.back().first_layer(), 30 - 30 / pp);
    absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(*files, *load);
    ASSERT_TRUE(exec.ok()) << exec.status();
    const std::string where = "TP " + std::to_string(tp) + " x PP " + std::to_string(pp);
    for (int s = 0; s < pp; ++s) {
      ExpectRanksMatchThePlan(plan->memory, **exec, tp, plan->num_kv_blocks, where, s);
    }
    // The stages differ: the first holds no final norm, the last the rows it keeps.
    EXPECT_EQ(plan->memory.stages.front().activations.step.pipeline_rows, 0) << where;
    EXPECT_EQ(plan->memory.stages.back().activations.step.pipeline_rows, 256 * 576 * 4) << where;
    StepBatch batch;
    batch.Add(/*seq_id=*/1, 0, std::vector<int32_t>{1, 504, 1463}, {0});
    batch.Add(/*seq_id=*/2, 0, std::vector<int32_t>{1, 330}, {1});
    absl::StatusOr<StepResult> step = (*exec)->Execute(batch);
    ASSERT_TRUE(step.ok()) << where << ": " << step.status();
    EXPECT_EQ(step->logits.size(), 2u * files->config.vocab_size);
  }
}

// Every family's own tensors (q/k/v biases split with their heads, QK-norms and sandwich
// norms replicated) are in the plan as the engine holds them: Gemma 3 270M (sliding-window
// layers, QK-norm, sandwich norms, K-quants) and the tiny golden Qwen2, Qwen3, Gemma 2,
// Mixtral, Qwen3-MoE, GLM-4.5 and Llama 4 models (routers, every expert's slices, Llama 4's
// read from its fused expert tensors, the MoE step buffers) at every degree their KV heads
// allow; the mixtures of experts also with --expert_parallel (whole experts per rank, the
// shared expert on each, the all-to-all's buffers); qwen3moe_kv4's 4 KV heads at 4 ranks, tensor
// and expert parallel (two whole experts per rank).
class PlanVsEngineFamilies
    : public ::testing::TestWithParam<std::tuple<std::string, int, bool>> {};

TEST_P(PlanVsEngineFamilies, RealAllocationsMatchThePlan) {
  const auto& [model, tp, expert_parallel] = GetParam();
  absl::StatusOr<std::string> path = ResolveModelPath(model);
  ASSERT_TRUE(path.ok()) << path.status();
  absl::StatusOr<ModelFiles> files = OpenModelFiles(*path);
  ASSERT_TRUE(files.ok()) << files.status();
  ClusterRequest request;
  request.ranks = tp;
  request.context_tokens = 128;
  request.max_seqs = 2;
  request.max_tokens_per_step = 64;
  request.expert_parallel = expert_parallel;
  absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  if (expert_parallel) {
    const RoleShard* experts = plan->memory.sharding.stages.at(0).Find(TensorRole::kExpertUp);
    ASSERT_NE(experts, nullptr);
    EXPECT_EQ(experts->kind, ShardKind::kExpert);
    EXPECT_GT(plan->memory.stages.at(0).activations.step.expert_send, 0);
  }
  int families_roles = 0;
  for (const RoleShard& r : plan->memory.sharding.stages.at(0).roles) {
    families_roles += r.role >= TensorRole::kQBias;
  }
  EXPECT_GT(families_roles, 0) << model << ": no bias, QK-norm or sandwich norm in the plan";
  absl::StatusOr<RankLoad> load = RankLoadFor(*plan, request);
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_EQ(load->expert_parallel, expert_parallel);
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(*files, *load);
  ASSERT_TRUE(exec.ok()) << exec.status();
  ExpectRanksMatchThePlan(plan->memory, **exec, tp, plan->num_kv_blocks,
                          expert_parallel ? model + " expert-parallel" : model);
}

INSTANTIATE_TEST_SUITE_P(
    Families, PlanVsEngineFamilies,
    ::testing::Values(std::tuple{std::string("gemma3-270m"), 1, false},
                      std::tuple{std::string("tests/golden/families/qwen2.gguf"), 2, false},
                      std::tuple{std::string("tests/golden/families/qwen3_hf"), 2, false},
                      std::tuple{std::string("tests/golden/families/gemma2.gguf"), 2, false},
                      std::tuple{std::string("tests/golden/families/mixtral.gguf"), 2, false},
                      std::tuple{std::string("tests/golden/families/qwen3moe_hf"), 2, false},
                      std::tuple{std::string("tests/golden/families/glm4moe.gguf"), 2, false},
                      std::tuple{std::string("tests/golden/families/mixtral.gguf"), 2, true},
                      std::tuple{std::string("tests/golden/families/qwen3moe_hf"), 2, true},
                      std::tuple{std::string("tests/golden/families/glm4moe.gguf"), 2, true},
                      std::tuple{std::string("tests/golden/families/qwen3moe_kv4.gguf"), 4,
                                 false},
                      std::tuple{std::string("tests/golden/families/qwen3moe_kv4_hf"), 4,
                                 true},
                      std::tuple{std::string("tests/golden/families/llama4_hf"), 2, false},
                      std::tuple{std::string("tests/golden/families/llama4.gguf"), 2, true},
                      // Multi-head latent attention: the latent cache (one pool, whole on every
                      // rank), the up-projections' three float forms, the MLA step buffers.
                      std::tuple{std::string("tests/golden/families/deepseek2.gguf"), 4, false},
                      std::tuple{std::string("tests/golden/families/deepseek2_hf"), 2, true},
                      std::tuple{std::string("tests/golden/families/deepseek2_lite.gguf"), 2,
                                 false},
                      std::tuple{std::string("tests/golden/families/deepseek2_fp8_hf"), 1,
                                 false}));

// --attention_dp with --expert_parallel: every rank holds the whole attention (replicated in the
// plan and in the ranks), its own KV cache of the plan's per-rank blocks, and the engine's block
// manager gets them all, one partition per rank. DeepSeek's latent cache and a GQA model's.
TEST(PlanVsEngineAttentionDp, EveryRankHoldsTheAttentionAndItsOwnCache) {
  for (const std::string& model : {std::string("tests/golden/families/deepseek2_hf"),
                                   std::string("tests/golden/families/qwen3moe_kv4_hf")}) {
    SCOPED_TRACE(model);
    absl::StatusOr<ModelFiles> files = OpenModelFiles(model);
    ASSERT_TRUE(files.ok()) << files.status();
    ClusterRequest request;
    request.ranks = 4;
    request.context_tokens = 128;
    request.max_seqs = 6;
    request.max_tokens_per_step = 64;
    request.expert_parallel = true;
    request.attention_dp = true;
    absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const RoleShard* o = plan->memory.sharding.stages.at(0).Find(TensorRole::kO);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->kind, ShardKind::kReplicated);
    EXPECT_EQ(plan->memory.kv_partitions, 4);
    // 6 sequences of 128 tokens over 4 ranks: 2 each, 8 blocks of 16 each.
    EXPECT_EQ(plan->num_kv_blocks, 2 * 8);
    EXPECT_EQ(plan->engine.kv_partitions, 4);
    EXPECT_EQ(plan->engine.num_kv_blocks, 4 * 2 * 8);
    absl::StatusOr<RankLoad> load = RankLoadFor(*plan, request);
    ASSERT_TRUE(load.ok()) << load.status();
    EXPECT_TRUE(load->attention_dp);
    EXPECT_EQ(load->num_kv_blocks, 2 * 8);
    absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(*files, *load);
    ASSERT_TRUE(exec.ok()) << exec.status();
    ExpectRanksMatchThePlan(plan->memory, **exec, 4, plan->num_kv_blocks,
                            model + " attention-dp");
  }
}

// Speculative decoding with a draft model (the Q4_1 file drafting for itself held as bf16): the
// target's rows of logits make room for the drafts, and on every rank the two executors hold
// what the plan says: the target's weights and workspace, the draft's weights and workspace,
// and the two KV caches over one block count, which together are the plan's pool.
TEST(PlanVsEngineDraft, TargetAndDraftHoldWhatThePlanSays) {
  for (int tp : {1, 3}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
    ASSERT_TRUE(files.ok()) << files.status();
    ClusterRequest request;
    request.ranks = tp;
    request.context_tokens = 1024;
    request.max_seqs = 4;
    request.max_tokens_per_step = 256;
    request.weights = "bf16";
    request.speculative.method = SpeculativeMethod::kDraft;
    request.speculative.num_speculative_tokens = 5;
    request.speculative.max_batch = 2;
    absl::StatusOr<DraftPlanInputs> draft =
        ResolveDraftModel("smollm2", "", tp, &request.draft_model_path);
    ASSERT_TRUE(draft.ok()) << draft.status();
    request.draft = *draft;
    absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
    ASSERT_TRUE(plan.ok()) << plan.status();
    // 4 sequences, of which 2 may draft 5 tokens each.
    EXPECT_EQ(plan->engine.scheduler.max_logit_rows, 4 + 2 * 5);
    EXPECT_EQ(plan->memory.inputs.max_sequences_per_step, 4 + 2 * 5);
    EXPECT_EQ(plan->engine.speculative.method, SpeculativeMethod::kDraft);
    const StageMemory& stage = plan->memory.stages[0];

    absl::StatusOr<RankLoad> load = RankLoadFor(*plan, request);
    ASSERT_TRUE(load.ok()) << load.status();
    ASSERT_TRUE(load->draft.has_value());
    EXPECT_EQ(load->model.weights, "bf16");
    EXPECT_EQ(load->model.max_logit_rows, 4 + 2 * 5);
    EXPECT_EQ(load->draft->path, request.draft_model_path);
    absl::StatusOr<std::unique_ptr<LocalExecutor>> target = LocalExecutor::Create(*files, *load);
    ASSERT_TRUE(target.ok()) << target.status();
    absl::StatusOr<ModelFiles> draft_files = OpenModelFiles(load->draft->path);
    ASSERT_TRUE(draft_files.ok());
    absl::StatusOr<std::unique_ptr<LocalExecutor>> draft_exec =
        LocalExecutor::Create(*draft_files, DraftLoad(*load));
    ASSERT_TRUE(draft_exec.ok()) << draft_exec.status();
    const MemoryFootprint t = (*target)->footprint(0);
    const MemoryFootprint d = (*draft_exec)->footprint(0);
    EXPECT_EQ(t.weight_bytes_resident, stage.weight_bytes);
    EXPECT_EQ(t.workspace_bytes, stage.activations.step.Total());
    EXPECT_EQ(d.weight_bytes_resident, stage.draft_weight_bytes);
    EXPECT_EQ(d.workspace_bytes, stage.draft_activations.step.Total());
    for (int rank = 0; rank < tp; ++rank) {
      EXPECT_EQ((*target)->kv_cache_bytes(rank) + (*draft_exec)->kv_cache_bytes(rank),
                int64_t{plan->num_kv_blocks} * stage.kv_bytes_per_block);
      EXPECT_EQ((*draft_exec)->kv_cache_bytes(rank),
                int64_t{plan->num_kv_blocks} * plan->block_size_tokens *
                    stage.draft_kv_bytes_per_token);
    }
  }
}

// A model that splits three ways on whole blocks of every format (6 heads and 3 KV heads of
// 128, FFN 1536 = 3 x 512) but whose vocabulary (1001) does not: the last rank holds fewer
// rows.
ModelSpec SplitsInThree(bool tied) {
  ModelSpec c;
  c.name = "splits-in-three";
  c.vocab_size = 1001;
  c.hidden_size = 768;
  c.intermediate_size = 1536;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 3;
  c.head_dim = 128;
  c.max_context_tokens = 256;
  c.rope_theta = 10000;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = tied;
  return c;
}

// The load of a plan made by hand, without a ClusterPlan: HostInputs' bounds, 32 KV blocks.
RankLoad HandLoad(int tp, const std::string& weights, DType kv) {
  RankLoad load;
  load.world_size = tp;
  load.model.weights = weights;
  load.model.max_logit_rows = 4;
  load.num_kv_blocks = 32;
  load.kv_dtype = kv;
  load.max_tokens_per_step = 32;
  return load;
}

PlanInputs HostInputs(const ModelSpec& c, const WeightFormats& formats, int tp, DType kv) {
  PlanInputs in;
  in.model = c;
  in.weights = formats;
  in.kv_cache_dtype = FormatOfDType(kv).kind;
  in.activation_dtype = FormatKind::kF32;
  in.tp = tp;
  in.device = HostCpuSpecFromMemTotal(int64_t{4} << 30, 10e9, 100e9);
  in.max_context_tokens = 256;
  in.max_tokens_per_step = 32;
  in.max_sequences_per_step = 4;
  in.target_concurrent_sequences = 2;
  in.kv_block_size_tokens = 16;
  return in;
}

// Every weight format the engine holds, quantized on load from an f32 checkpoint, at one and
// three ranks, tied and untied: each role's bytes on each rank, the KV pool and the workspace
// are what the planner says.
TEST(PlanVsEngineFormats, EveryFormatEveryRoleAtOneAndThreeRanks) {
  for (bool tied : {false, true}) {
    const ModelSpec c = SplitsInThree(tied);
    const std::shared_ptr<const WeightSource> source =
        MakeTinyLlama(c, {.format = CheckpointFormat::kSafetensors, .separate_lm_head = !tied});
    for (const char* preset : {"f32", "fp16", "bf16", "fp8", "fp8-block", "int4", "int4-g64",
                               "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"}) {
      if (tied && std::string(preset) != "fp8" && std::string(preset) != "q4_k") continue;
      const WeightFormats formats = *WeightFormatsPreset(preset);
      for (int tp : {1, 3}) {
        const std::string where = std::string(preset) + " tp=" + std::to_string(tp) +
                                  (tied ? " tied" : " untied");
        absl::StatusOr<MemoryPlan> plan = PlanMemory(HostInputs(c, formats, tp, DType::kF16));
        ASSERT_TRUE(plan.ok()) << where << ": " << plan.status();
        absl::StatusOr<std::unique_ptr<LocalExecutor>> exec =
            LocalExecutor::Create(c, source, HandLoad(tp, preset, DType::kF16));
        ASSERT_TRUE(exec.ok()) << where << ": " << exec.status();
        ExpectRanksMatchThePlan(*plan, **exec, tp, 32, where);
      }
    }
  }
}

TEST(PlanVsEngineFormats, EveryKvDtype) {
  const ModelSpec c = SplitsInThree(false);
  const std::shared_ptr<const WeightSource> source =
      MakeTinyLlama(c, {.format = CheckpointFormat::kSafetensors, .separate_lm_head = true});
  for (DType kv : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3}) {
    absl::StatusOr<MemoryPlan> plan =
        PlanMemory(HostInputs(c, *WeightFormatsPreset("bf16"), 3, kv));
    ASSERT_TRUE(plan.ok()) << plan.status();
    absl::StatusOr<std::unique_ptr<LocalExecutor>> exec =
        LocalExecutor::Create(c, source, HandLoad(3, "bf16", kv));
    ASSERT_TRUE(exec.ok()) << exec.status();
    ExpectRanksMatchThePlan(*plan, **exec, 3, 32, std::string(KvDtypeName(kv)));
    // 2 layers x K and V x 1 local KV head x 128 x the element size, per token.
    EXPECT_EQ(plan->stages[0].kv_bytes_per_token, 2 * 2 * 128 * BlockBytes(kv));
  }
}

TEST(PlanCluster, RefusesAConfigurationThatCannotFitWithThePlansVerdict) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
  ASSERT_TRUE(files.ok()) << files.status();
  ClusterRequest request;
  request.ranks = 1;
  request.context_tokens = 8192;
  request.max_seqs = 64;
  request.host_memory_bytes = int64_t{1} << 30;  // a 1 GiB host cannot hold 64 x 8K of f32 KV
  absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(plan.status().message().find("does not fit"), std::string::npos) << plan.status();
}

TEST(PlanCluster, RefusesTpDegreesThatSplitAHead) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
  ASSERT_TRUE(files.ok()) << files.status();
  ClusterRequest request;
  request.ranks = 2;  // 9 heads, 3 KV heads
  absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("1, 3"), std::string::npos) << plan.status();
}

TEST(ResolveModelPath, PresetShapesAreNotWeights) {
  absl::StatusOr<std::string> p = ResolveModelPath("405b-fp8");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("names a model shape, not weights"), std::string::npos);
}

}  // namespace
}  // namespace tpserve
