// Launches per decode step (issue 38). StepLaunchesFor is kept honest against the engine: the
// real LlamaModel::Forward of the synthetic Llama (2 layers, 8 query / 4 KV heads) runs a decode
// step on 1 and 2 ranks (threads) through counting wrappers of the Backend and the
// Communicator, with and without a fusing backend's traits and with both reductions, and every
// rank's counted ops, copies and collectives must equal the prediction for its plan. Then the
// same function gives Llama-3.1-405B at TP 8 (fp8 128x128 tiles), the figures of
// docs/PERFORMANCE.md. Fusion itself: stacking q/k/v and gate/up changes no logit bit and no
// byte of any role on the CPU (the stacks' views are the parts).
//
// On the code before fusing, MatMulMany had no fused matrix and the loader stacked nothing, so
// a fusing backend's decode step counted 3 + 2 GEMMs per layer: the fused cases'
// EXPECT_EQ(run.decode[Launch::kGemm], ...) (9 expected at TP 2, 15 counted) and
// EXPECT_EQ(run.decode, run.predicted) fail there.
#include "worker/step_launches.h"

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/testing/tiny_llama.h"
#include "comm/in_process_communicator.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/weight_placement.h"
#include "model/step_buffers.h"
#include "planner/test_models.h"
#include "step/step_batch.h"
#include "worker/launch_counting.h"
#include "worker/llama_model.h"

namespace tpserve {
namespace {

struct RankRun {
  LaunchCounts decode;     // the decode step alone: backend ops and copies, and collectives
  LaunchCounts predicted;  // StepLaunchesFor of this rank
  std::vector<float> logits;
  MemoryFootprint footprint;
};

// A prefill of two sequences, then one decode step of both, on `world` ranks.
std::vector<RankRun> RunDecode(const ModelSpec& config, const WeightSource& source, int world,
                               TpReduction reduction,
                               std::optional<Backend::ProjectionFusion> fusion) {
  auto group = std::make_shared<InProcessGroup>(world);
  std::vector<RankRun> runs(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      CpuBackend cpu(CpuBackendOptions{.num_threads = 1});
      CountingBackend backend(&cpu, fusion);
      InProcessCommunicator inner(group, r);
      CountingCommunicator comm(&inner);
      auto model =
          LlamaModel::Load(config, source, {r, world}, &backend, &comm, {.reduction = reduction});
      ASSERT_TRUE(model.ok()) << "rank " << r << ": " << model.status();
      auto cache = KvCache::Create((*model)->KvShape(16, 4, DType::kF32), backend);
      ASSERT_TRUE(cache.ok()) << cache.status();
      std::vector<float> logits(2 * config.vocab_size);
      StepBatch prefill;
      prefill.Add(/*seq_id=*/1, 0, std::vector<int32_t>{1, 5, 9, 33}, {0, 1});
      prefill.Add(/*seq_id=*/2, 0, std::vector<int32_t>{7, 6, 5}, {2, 3});
      ASSERT_TRUE((*model)->Forward(prefill, cache->get(), logits.data()).ok());
      StepBatch decode;
      decode.Add(/*seq_id=*/1, 4, std::vector<int32_t>{11}, {0, 1});
      decode.Add(/*seq_id=*/2, 3, std::vector<int32_t>{12}, {2, 3});
      backend.Reset();
      comm.Reset();
      const absl::Status s = (*model)->Forward(decode, cache->get(), logits.data());
      ASSERT_TRUE(s.ok()) << s;
      RankRun& run = runs[r];
      run.decode = backend.counts();
      run.decode += comm.counts();
      const LlamaModel& m = **model;
      absl::StatusOr<StepLaunches> predicted =
          StepLaunchesFor(m.config(), m.plan(), m.formats(),
                          ReductionChunks(m.config(), m.plan(), m.formats(), m.reduction()),
                          backend.projection_fusion(), decode.num_logit_rows());
      ASSERT_TRUE(predicted.ok()) << predicted.status();
      run.predicted = predicted->Total();
      run.logits = logits;
      run.footprint = m.footprint();
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

const Backend::ProjectionFusion kCuda = cuda::CudaProjectionFusion();

TEST(StepLaunchesFor, EqualsWhatTheModelsDecodeStepLaunchesOnEveryRank) {
  const ModelSpec config = TinyLlamaSpec();
  auto source = MakeTinyLlama(config, {.linear = DType::kQ4_1});
  for (int world : {1, 2}) {
    for (TpReduction reduction : {TpReduction::kAllReduce, TpReduction::kDeterministic}) {
      for (const std::optional<Backend::ProjectionFusion>& fusion :
           {std::optional<Backend::ProjectionFusion>(), std::optional(kCuda)}) {
        const bool fused = fusion.has_value();
        SCOPED_TRACE(testing::Message()
                     << "TP " << world << (fused ? ", fused" : ", apart")
                     << (reduction == TpReduction::kDeterministic ? ", deterministic" : ""));
        const std::vector<RankRun> runs = RunDecode(config, *source, world, reduction, fusion);
        for (int r = 0; r < world; ++r) {
          const RankRun& run = runs[r];
          EXPECT_EQ(run.decode, run.predicted)
              << "rank " << r << "\n  counted:   " << run.decode.ToString()
              << "\n  predicted: " << run.predicted.ToString();
          // Per layer 4 GEMMs fused (qkv, o, gate/up, down), 7 apart; and the LM head's.
          EXPECT_EQ(run.decode[Launch::kGemm], fused ? 2 * 4 + 1 : 2 * 7 + 1);
          EXPECT_EQ(run.decode[Launch::kSplit], fused ? 2 * 2 : 0);
          EXPECT_EQ(run.decode[Launch::kDownload], r == kSamplingRank ? 1 : 0);
        }
        if (world == 2 && reduction == TpReduction::kAllReduce) {
          // Embedding, two per layer, and the LM head's gather.
          EXPECT_EQ(runs[0].decode[Launch::kAllReduce], 1 + 2 * 2);
          EXPECT_EQ(runs[0].decode[Launch::kGather], 1);
        }
      }
    }
  }
}

// The head's and the embedding's optional ops (Gemma's multiplier and soft-cap) are counted
// where the model runs them.
TEST(StepLaunchesFor, CountsTheEmbeddingScaleAndTheLogitSoftCap) {
  ModelSpec config = TinyLlamaSpec();
  config.embedding_multiplier = 2.0;
  config.final_logit_softcap = 30.0;
  auto source = MakeTinyLlama(config, {});
  const std::vector<RankRun> runs =
      RunDecode(config, *source, 2, TpReduction::kAllReduce, std::nullopt);
  for (const RankRun& run : runs) {
    EXPECT_EQ(run.decode, run.predicted) << run.decode.ToString();
    EXPECT_EQ(run.decode[Launch::kScale], 1);
    EXPECT_EQ(run.decode[Launch::kSoftCap], 1);
  }
}

// Stacked q/k/v and gate/up (views of one matrix per group) give the same logits, bit for bit,
// and every role holds the same bytes as apart (the memory plan counts per role).
TEST(ProjectionFusion, ChangesNoLogitBitAndNoRolesBytes) {
  const ModelSpec config = TinyLlamaSpec();
  for (DType linear : {DType::kF32, DType::kQ4_1}) {
    auto source = MakeTinyLlama(config, {.linear = linear});
    const std::vector<RankRun> apart =
        RunDecode(config, *source, 2, TpReduction::kAllReduce, std::nullopt);
    const std::vector<RankRun> fused =
        RunDecode(config, *source, 2, TpReduction::kAllReduce, kCuda);
    EXPECT_EQ(fused[kSamplingRank].logits, apart[kSamplingRank].logits) << DTypeName(linear);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(fused[r].footprint.weight_bytes_by_role, apart[r].footprint.weight_bytes_by_role);
      EXPECT_EQ(fused[r].footprint.weight_bytes_resident, apart[r].footprint.weight_bytes_resident);
    }
  }
}

// A fusing backend whose row tile a layer's parts miss gets them apart, says so once for the
// whole load (not per layer), and the prediction still holds: the loader and StepLaunchesFor
// read the same FusedLayoutFor.
TEST(ProjectionFusion, PartsOffTheBackendsTileStayApartSaidOnce) {
  const ModelSpec config = TinyLlamaSpec();  // q 128, k and v 64, gate and up 256 rows at TP 1
  auto source = MakeTinyLlama(config, {});
  const Backend::ProjectionFusion tile128 = {
      .fuses = true, .part_row_multiple = 128, .split_launches = 1};
  testing::internal::CaptureStderr();
  const std::vector<RankRun> runs =
      RunDecode(config, *source, 1, TpReduction::kAllReduce, tile128);
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].decode, runs[0].predicted) << runs[0].decode.ToString();
  EXPECT_EQ(runs[0].decode[Launch::kGemm], 2 * (3 + 1 + 1 + 1) + 1);  // gate/up still fused
  EXPECT_EQ(runs[0].decode[Launch::kSplit], 2);
  const std::string name(CpuBackend(CpuBackendOptions{.num_threads = 1}).name());
  const std::string line = "LoadLlamaWeights: q/k/v of layer 0 stays 3 GEMMs (" + name +
                           "): k's 64 rows are not a multiple of the backend's 128-row tile, so "
                           "the stack could be held in another form than its parts\n";
  EXPECT_NE(said.find(line), std::string::npos) << said;
  EXPECT_EQ(said.find("LoadLlamaWeights:"), said.rfind("LoadLlamaWeights:")) << said;  // once
}

// Llama-3.1-405B at TP 8 in fp8 128x128 tiles, one eager decode step of rank 0 (the sampling
// rank): the figures docs/PERFORMANCE.md quotes.
TEST(StepLaunchesFor, Llama405BAtTp8) {
  const ModelSpec c = Llama31_405B();
  const WeightFormats f = *WeightFormatsPreset("fp8-block");
  absl::StatusOr<ShardingPlan> plan = ShardingPlan::Create(c, f, {0, 8});
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<StepLaunches> apart = StepLaunchesFor(c, *plan, f, 1, {}, /*logit_rows=*/8);
  absl::StatusOr<StepLaunches> fused = StepLaunchesFor(c, *plan, f, 1, kCuda, 8);
  ASSERT_TRUE(apart.ok() && fused.ok());
  ASSERT_EQ(apart->per_layer.size(), 126u);
  // A layer: 2 norms, q/k/v 3 GEMMs (fused: 1 + a split), RoPE on q and k, the KV write,
  // attention, o, the residual add, gate/up 2 GEMMs (fused: 1 + a split), SwiGLU, down, add.
  const LaunchCounts& layer = apart->per_layer[0];
  EXPECT_EQ(layer.ToString(),
            "norm 2, gemm 7, rope 2, kv-write 1, attention 1, activation 1, add 2, "
            "all-reduce 2");
  EXPECT_EQ(layer.kernels(), 16);
  EXPECT_EQ(fused->per_layer[0].ToString(),
            "norm 2, gemm 4, split 2, rope 2, kv-write 1, attention 1, activation 1, add 2, "
            "all-reduce 2");
  EXPECT_EQ(fused->per_layer[0].kernels(), 15);
  EXPECT_EQ(apart->before_layers.ToString(), "embedding 1, upload 1, all-reduce 1");
  EXPECT_EQ(apart->head.ToString(),
            "norm 1, gemm 1, gather-rows 1, fill 1, copy 1, download 1, gather 1");
  const LaunchCounts a = apart->Total(), b = fused->Total();
  EXPECT_EQ(a.kernels(), 1 + 126 * 16 + 5);     // 2022
  EXPECT_EQ(b.kernels(), 1 + 126 * 15 + 5);     // 1896
  EXPECT_EQ(a[Launch::kGemm], 126 * 7 + 1);     // 883
  EXPECT_EQ(b[Launch::kGemm], 126 * 4 + 1);     // 505
  EXPECT_EQ(a.collectives(), 1 + 126 * 2 + 1);  // 254
  EXPECT_EQ(b.collectives(), a.collectives());
  EXPECT_EQ(a.copies(), 2);
  // --deterministic_tp: 8 chunks, each row-parallel layer an all-gather and an ordered sum.
  absl::StatusOr<StepLaunches> det = StepLaunchesFor(
      c, *plan, f, ReductionChunks(c, *plan, f, TpReduction::kDeterministic), kCuda, 8);
  ASSERT_TRUE(det.ok());
  EXPECT_EQ(det->per_layer[0].kernels(), 17);
  EXPECT_EQ(det->per_layer[0][Launch::kAllGather], 2);
  EXPECT_EQ(det->per_layer[0][Launch::kAllReduce], 0);
}

TEST(StepLaunchesFor, SaysWhatItDoesNotCountYet) {
  ModelSpec c = TinyLlamaSpec();
  c.moe.routing.num_experts = 4;
  c.moe.routing.top_k = 2;
  const WeightFormats f = *WeightFormatsPreset("f32");
  absl::StatusOr<ShardingPlan> plan = ShardingPlan::Create(TinyLlamaSpec(), f, {0, 1});
  ASSERT_TRUE(plan.ok());
  const absl::StatusOr<StepLaunches> s = StepLaunchesFor(c, *plan, f, 1, {}, 1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.status().message(),
            "StepLaunchesFor does not count the launches of mixture-of-experts layers yet");
}

}  // namespace
}  // namespace tpserve
