// The memory plan is the engine's own: the bytes each CPU rank really holds for weights and
// the KV pool equal the plan's, and its step buffers fit inside the plan's activation budget.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "deploy/cluster_plan.h"
#include "model/model_files.h"
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

class PlanVsEngine : public ::testing::TestWithParam<int> {};

TEST_P(PlanVsEngine, RealAllocationsMatchThePlan) {
  const int tp = GetParam();
  absl::StatusOr<ModelFiles> files = OpenModelFiles(ModelPath());
  ASSERT_TRUE(files.ok()) << files.status();
  ClusterRequest request;
  request.ranks = tp;
  request.context_tokens = 1024;
  request.max_seqs = 2;
  request.max_tokens_per_step = 256;
  absl::StatusOr<ClusterPlan> plan = PlanCluster(*files, request);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const StageMemory& stage = plan->memory.stages.at(0);
  EXPECT_EQ(plan->num_kv_blocks, 2 * 1024 / 16);

  LocalExecutorOptions options;
  options.tp_degree = tp;
  options.num_kv_blocks = plan->num_kv_blocks;
  options.block_size_tokens = plan->block_size_tokens;
  options.max_step_tokens = request.max_tokens_per_step;
  options.max_logit_rows = request.max_seqs;
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec =
      LocalExecutor::Create(files->config, files->weights, options);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int rank = 0; rank < tp; ++rank) {
    const MemoryFootprint fp = (*exec)->footprint(rank);
    EXPECT_EQ(fp.weight_bytes_resident, stage.weight_bytes) << "rank " << rank;
    EXPECT_EQ((*exec)->kv_cache_bytes(rank), int64_t{plan->num_kv_blocks} * stage.kv_bytes_per_block)
        << "rank " << rank;
    // The plan budgets step buffers by role (including fully materialised attention scores);
    // the CPU engine's buffers must fit inside that budget.
    EXPECT_GT(fp.workspace_bytes, 0);
    EXPECT_LE(fp.workspace_bytes, stage.activations.Total()) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, PlanVsEngine, ::testing::Values(1, 3));

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
