// ExpertLoad: per-expert counts over layers and the busiest expert over the mean, per layer.
#include "step/executor.h"

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(ExpertLoadTest, CountsSlotsPerExpertAndAveragesEachLayersMaxOverMean) {
  ExpertLoad load;
  EXPECT_TRUE(load.empty());
  EXPECT_EQ(load.Imbalance(), 0.0);
  // 4 experts, 8 slots: counts 2,2,2,2 (even: 1.0), then 5,1,1,1 (max 5 / mean 2 = 2.5).
  const std::vector<int32_t> even = {0, 1, 2, 3, 3, 2, 1, 0};
  const std::vector<int32_t> skewed = {0, 0, 0, 0, 0, 1, 2, 3};
  load.AddLayer(even, 4);
  load.AddLayer(skewed, 4);
  EXPECT_EQ(load.tokens, (std::vector<int64_t>{7, 3, 3, 3}));
  EXPECT_EQ(load.layers, 2);
  EXPECT_DOUBLE_EQ(load.Imbalance(), (1.0 + 2.5) / 2);
  // Every slot on one expert of 4: max 4 / mean 1; a layer with no slots is not counted.
  ExpertLoad one;
  one.AddLayer(std::vector<int32_t>{2, 2, 2, 2}, 4);
  EXPECT_DOUBLE_EQ(one.Imbalance(), 4.0);
  one.AddLayer({}, 4);
  EXPECT_EQ(one.layers, 1);
  load.Add(one);
  EXPECT_EQ(load.tokens, (std::vector<int64_t>{7, 3, 7, 3}));
  EXPECT_EQ(load.layers, 3);
  EXPECT_DOUBLE_EQ(load.imbalance_sum, 1.0 + 2.5 + 4.0);
}

}  // namespace
}  // namespace tpserve
