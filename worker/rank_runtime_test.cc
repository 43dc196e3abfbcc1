#include "worker/rank_runtime.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "worker/testing/tiny_llama.h"

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

TEST(RankRuntime, SingleRankOnTheCpuSteps) {
  const LlamaConfig config = TinyLlamaConfig();
  std::shared_ptr<const WeightSource> weights = MakeTinyLlama(config, {});
  auto rt = RankRuntime::Create(config, weights, TinyOptions(CommunicatorKind::kSingleRank));
  ASSERT_TRUE(rt.ok()) << rt.status();
  StepBatch batch;
  batch.sequences.push_back({{1, 2, 3}, 0, {0}, false});
  std::vector<float> logits(config.vocab_size);
  EXPECT_TRUE((*rt)->Step(batch, logits.data()).ok());
}

TEST(RankRuntime, RefusesNcclOnAHostMemoryBackend) {
  const LlamaConfig config = TinyLlamaConfig();
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

}  // namespace
}  // namespace tpserve
