#include "worker/rank_runtime.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "checkpoint/testing/tiny_llama.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

RankRuntimeOptions TinyOptions(CommunicatorKind kind) {
  RankRuntimeOptions o;
  o.backend = {.kind = BackendKind::kCpu, .num_threads = 1};
  o.comm.kind = kind;
  o.num_kv_blocks = 8;
  o.block_size_tokens = 4;
  o.kv_dtype = DType::kF32;
  return o;
}

// The largest |a[i] - b[i]| and the largest |b[i]|.
std::pair<float, float> MaxDiffAndScale(const float* a, const float* b, int64_t n) {
  float diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return {diff, scale};
}

// A prompt step, then a decode step that reads the prompt's KV from the runtime's cache: each
// step's last-token logits against the f64 reference forward pass (no KV cache) of the whole
// sequence so far. F32 weights and KV: only f32-vs-f64 rounding (llama_model_test's bound).
TEST(RankRuntime, SingleRankOnTheCpuStepsThroughItsKvCache) {
  const ModelSpec config = TinyLlamaSpec();
  std::shared_ptr<const WeightSource> weights = MakeTinyLlama(config, {});
  auto rt = RankRuntime::Create(config, weights, TinyOptions(CommunicatorKind::kSingleRank));
  ASSERT_TRUE(rt.ok()) << rt.status();
  const std::vector<int32_t> sequence = {1, 2, 3, 4, 5, 6};  // 5 prompt tokens, then 1 decode
  const std::vector<float> want = ReferenceLogits(config, *weights, sequence);
  const int64_t vocab = config.vocab_size;
  std::vector<float> logits(vocab);

  StepBatch prompt;
  prompt.Add(/*seq_id=*/0, 0, std::vector<int32_t>{1, 2, 3, 4, 5}, {0, 1});
  ASSERT_TRUE((*rt)->Step(prompt, logits.data()).ok());
  auto [diff, scale] = MaxDiffAndScale(logits.data(), &want[4 * vocab], vocab);
  EXPECT_GT(scale, 0.0f);
  EXPECT_LT(diff, 1e-5f * scale) << "prompt step";

  StepBatch decode;
  decode.Add(/*seq_id=*/0, 5, std::vector<int32_t>{6}, {0, 1});
  ASSERT_TRUE((*rt)->Step(decode, logits.data()).ok());
  std::tie(diff, scale) = MaxDiffAndScale(logits.data(), &want[5 * vocab], vocab);
  EXPECT_LT(diff, 1e-5f * scale) << "decode step";
}

TEST(RankRuntime, RefusesNcclOnAHostMemoryBackend) {
  const ModelSpec config = TinyLlamaSpec();
  std::shared_ptr<const WeightSource> weights = MakeTinyLlama(config, {});
  RankRuntimeOptions o = TinyOptions(CommunicatorKind::kNccl);
  o.comm.rank = 1;
  o.comm.world_size = 2;
  auto rt = RankRuntime::Create(config, weights, o);
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kInvalidArgument) << rt.status();
  EXPECT_NE(rt.status().message().find("rank 1: communicator nccl cannot serve the cpu"),
            std::string::npos)
      << rt.status();
}

// A Regroup that fails leaves a rank that refuses to step (its group half formed) rather than
// one that steps on stale communicators; one that succeeds makes it step again, with the KV
// cache it kept.
TEST(RankRuntime, AFailedRegroupRefusesStepsUntilARegroupSucceeds) {
  const ModelSpec config = TinyLlamaSpec();
  std::shared_ptr<const WeightSource> weights = MakeTinyLlama(config, {});
  const RankRuntimeOptions single = TinyOptions(CommunicatorKind::kSingleRank);
  auto rt = RankRuntime::Create(config, weights, single);
  ASSERT_TRUE(rt.ok()) << rt.status();
  std::vector<float> before(config.vocab_size), after(config.vocab_size);
  StepBatch prompt;
  prompt.Add(/*seq_id=*/0, 0, std::vector<int32_t>{1, 2, 3, 4, 5}, {0, 1});
  ASSERT_TRUE((*rt)->Step(prompt, before.data()).ok());

  RankRuntimeOptions bad = single;
  bad.comm.kind = CommunicatorKind::kGloo;  // two ranks, no store to meet through
  bad.comm.world_size = 2;
  bad.comm.timeout = absl::Milliseconds(200);
  const absl::Status regrouped = (*rt)->Regroup(bad);
  ASSERT_FALSE(regrouped.ok());
  EXPECT_TRUE(absl::StartsWith(regrouped.message(), "rank 0: ")) << regrouped;
  StepBatch decode;
  decode.Add(/*seq_id=*/0, 5, std::vector<int32_t>{6}, {0, 1});
  const absl::Status refused = (*rt)->Step(decode, after.data());
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_TRUE(absl::StartsWith(refused.message(),
                               "rank 0 cannot step: its group was not re-formed (rank 0: "))
      << refused;

  ASSERT_TRUE((*rt)->Regroup(single).ok());
  ASSERT_TRUE((*rt)->Step(prompt, after.data()).ok());
  EXPECT_EQ(after, before) << "the same prompt after the regroup";
}

}  // namespace
}  // namespace tpserve
