#include "comm/communicator.h"

#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(SingleRankCommunicator, CollectivesAreIdentity) {
  SingleRankCommunicator comm;
  std::vector<float> data = {1.5f, -2.0f};
  ASSERT_TRUE(comm.AllReduceSum(absl::MakeSpan(data)).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  std::vector<float> out(2);
  ASSERT_TRUE(comm.AllGather(data, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, data);
  std::vector<int32_t> ids = {3, 4};
  ASSERT_TRUE(BroadcastInt32s(comm, absl::MakeSpan(ids), 0).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(comm.Barrier().ok());
  EXPECT_EQ(comm.Describe(), "single rank");
}

TEST(SingleRankCommunicator, RejectsBadRootAndGatherSize) {
  SingleRankCommunicator comm;
  std::vector<uint8_t> bytes(1);
  absl::Status root = comm.Broadcast(absl::MakeSpan(bytes), 1);
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.message(), "Broadcast: root 1 is outside [0, 1)");
  std::vector<float> in(2), out(3);
  absl::Status gather = comm.AllGather(in, absl::MakeSpan(out));
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather.message(), "AllGather: out has 3 elements, expected 2 (1 ranks x 2)");
}

TEST(CommunicatorChecks, AllGatherSizesAndRoots) {
  EXPECT_TRUE(CheckAllGatherSizes(4, 0, 0).ok());
  EXPECT_TRUE(CheckAllGatherSizes(4, 3, 12).ok());
  EXPECT_EQ(CheckAllGatherSizes(4, 3, 11).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckBroadcastRoot(3, 2).ok());
  EXPECT_EQ(CheckBroadcastRoot(3, -1).message(), "Broadcast: root -1 is outside [0, 3)");
}

}  // namespace
}  // namespace tpserve
