// RankRuntimeOptionsFor: what a rank's RankLoad turns into for its backend and model.
#include "worker/rank_load_options.h"

#include <memory>

#include "checkpoint/stored_formats.h"
#include "checkpoint/testing/tiny_llama.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

ModelFiles TinyFiles() {
  ModelFiles files;
  files.config = TinyLlamaSpec();
  std::shared_ptr<const WeightSource> source = MakeTinyLlama(files.config, {});
  files.stored_formats = *StoredWeightFormats(*source, files.scheme, files.config);
  files.weights = std::move(source);
  return files;
}

// --enforce_eager reaches both halves of recording: the model, which asks for a recorded step
// (LlamaLoadOptions::record_decode_steps), and the GPU backend, which would record it
// (BackendOptions::cuda_graphs). On the old code neither field existed, and a GPU rank
// recorded whenever TPSERVE_CUDA_GRAPHS=1 was set, flag or not.
TEST(RankLoadOptionsTest, EnforceEagerTurnsRecordingOffInTheModelAndTheBackend) {
  const ModelFiles files = TinyFiles();
  RankLoad load;
  load.world_size = 2;
  load.max_tokens_per_step = 64;
  absl::StatusOr<RankRuntimeOptions> recorded = RankRuntimeOptionsFor(load, 1, files);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(recorded->load.record_decode_steps);
  EXPECT_TRUE(recorded->backend.cuda_graphs);
  load.enforce_eager = true;
  absl::StatusOr<RankRuntimeOptions> eager = RankRuntimeOptionsFor(load, 1, files);
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_FALSE(eager->load.record_decode_steps);
  EXPECT_FALSE(eager->backend.cuda_graphs);
}

}  // namespace
}  // namespace tpserve
