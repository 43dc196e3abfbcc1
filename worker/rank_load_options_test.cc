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


// Pipeline stages: rank r of all is rank r % world_size of stage r / world_size, and
// PlacePipeline gives it its stage's group and its links, each meeting under a name of its own.
TEST(RankLoadOptionsTest, PipelineRanksGetTheirStageGroupAndLinks) {
  const ModelFiles files = TinyFiles();  // 2 layers
  RankLoad load;
  load.world_size = 2;
  load.pipeline_stages = 2;
  load.max_tokens_per_step = 64;
  absl::StatusOr<RankRuntimeOptions> o = RankRuntimeOptionsFor(load, 3, files);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->comm.rank, 1);
  EXPECT_EQ(o->comm.world_size, 2);
  EXPECT_EQ(o->stage, 1);
  EXPECT_EQ(o->num_stages, 2);
  o->comm.kind = CommunicatorKind::kShm;
  o->comm.run_id = "run";
  PlacePipeline(*o);
  EXPECT_EQ(o->comm.run_id, "run/stage1");
  EXPECT_EQ(o->comm.kind, CommunicatorKind::kShm);
  ASSERT_TRUE(o->from_prev.has_value());
  EXPECT_EQ(o->from_prev->run_id, "run/pipe0.1");
  EXPECT_EQ(o->from_prev->rank, 1);
  EXPECT_EQ(o->from_prev->world_size, 2);
  EXPECT_FALSE(o->to_next.has_value());  // the last stage

  load.world_size = 1;  // one rank a stage: no group to meet, one link
  absl::StatusOr<RankRuntimeOptions> first = RankRuntimeOptionsFor(load, 0, files);
  ASSERT_TRUE(first.ok()) << first.status();
  first->comm.kind = CommunicatorKind::kGloo;
  first->comm.run_id = "run";
  PlacePipeline(*first);
  EXPECT_EQ(first->comm.kind, CommunicatorKind::kSingleRank);
  EXPECT_FALSE(first->from_prev.has_value());
  ASSERT_TRUE(first->to_next.has_value());
  EXPECT_EQ(first->to_next->run_id, "run/pipe0.0");
  EXPECT_EQ(first->to_next->rank, 0);
  EXPECT_EQ(first->to_next->kind, CommunicatorKind::kGloo);
  EXPECT_EQ(RankRuntimeOptionsFor(load, 2, files).status().message(), "rank 2 is not in [0, 2)");
}

}  // namespace
}  // namespace tpserve
