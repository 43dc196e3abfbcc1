// A mixture of experts in pipeline stages: a step's expert load covers every stage's MoE
// layers, as with one stage. (It used to be rank 0's alone: stage 0's layers only.)
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/model_files.h"
#include "step/step_batch.h"
#include "worker/local_executor.h"

namespace tpserve {
namespace {

constexpr char kGguf[] = "tests/golden/families/qwen3moe.gguf";  // 2 layers, 8 experts, top 2

ExpertLoad OneStepsExpertLoad(const ModelFiles& files, int tp, int pp) {
  RankLoad load;
  load.world_size = tp;
  load.pipeline_stages = pp;
  load.num_kv_blocks = 8;
  load.block_size_tokens = 16;
  load.max_tokens_per_step = 64;
  load.model.max_logit_rows = 1;
  load.deterministic_tp = true;  // the same routing at every degree
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec = LocalExecutor::Create(files, load);
  EXPECT_TRUE(exec.ok()) << exec.status();
  if (!exec.ok()) return {};
  StepBatch batch;
  batch.Add(/*seq_id=*/1, /*start_position=*/0,
            std::vector<int32_t>{11, 5, 42, 7, 19, 3, 77, 8, 23, 61, 2, 90}, {0});
  absl::StatusOr<StepResult> step = (*exec)->Execute(batch);
  EXPECT_TRUE(step.ok()) << step.status();
  return step.ok() ? step->expert_load : ExpertLoad{};
}

TEST(LocalExecutorStages, AStepsExpertLoadCoversEveryStagesLayers) {
  absl::StatusOr<ModelFiles> files = OpenModelFiles(kGguf);
  ASSERT_TRUE(files.ok()) << files.status();
  const ExpertLoad one = OneStepsExpertLoad(*files, 1, 1);
  ASSERT_EQ(one.layers, 2);
  int64_t slots = 0;
  for (int64_t t : one.tokens) slots += t;
  EXPECT_EQ(slots, 2 * 12 * 2) << "2 layers x 12 tokens x top 2";
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{2, 1}}) {
    const ExpertLoad got = OneStepsExpertLoad(*files, tp, pp);
    EXPECT_EQ(got.layers, one.layers) << "TP " << tp << " x PP " << pp;
    EXPECT_EQ(got.tokens, one.tokens) << "TP " << tp << " x PP " << pp;
    EXPECT_DOUBLE_EQ(got.imbalance_sum, one.imbalance_sum) << "TP " << tp << " x PP " << pp;
  }
}

}  // namespace
}  // namespace tpserve
