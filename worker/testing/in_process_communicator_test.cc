#include "worker/testing/in_process_communicator.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(InProcessCommunicatorTest, AllReduceAllGatherBroadcastAcrossThreeRanks) {
  InProcessGroup group(3);
  std::vector<std::vector<float>> reduced(3), gathered(3);
  std::vector<std::vector<uint8_t>> bcast(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Communicator& c = group.rank(r);
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.world_size(), 3);
      for (int round = 0; round < 5; ++round) {  // repeated calls reuse the staging slots
        reduced[r] = {1.0f * r, 10.0f * r + round};
        ASSERT_TRUE(c.AllReduceSum(absl::MakeSpan(reduced[r])).ok());
      }
      const std::vector<float> mine = {float(r), float(r) + 0.5f};
      gathered[r].resize(6);
      ASSERT_TRUE(c.AllGather(mine, absl::MakeSpan(gathered[r])).ok());
      bcast[r] = {uint8_t(r), uint8_t(r + 1), uint8_t(r + 2)};
      ASSERT_TRUE(c.Broadcast(absl::MakeSpan(bcast[r]), 2).ok());
      ASSERT_TRUE(c.Barrier().ok());
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(reduced[r], (std::vector<float>{3.0f, 30.0f + 3 * 4}));
    EXPECT_EQ(gathered[r], (std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f}));
    EXPECT_EQ(bcast[r], (std::vector<uint8_t>{2, 3, 4}));
  }
}

}  // namespace
}  // namespace tpserve
