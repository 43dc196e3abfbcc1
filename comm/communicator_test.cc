#include "comm/communicator.h"

#include <cstdint>
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

TEST(SingleRankCommunicator, AllToAllCopiesItsOwnPiece) {
  SingleRankCommunicator comm;
  const std::vector<uint16_t> in = {0x3F80, 0x7FC1, 0xFF80};  // bf16 1.0, a NaN, -inf
  std::vector<uint16_t> out(4, 0xEEEE);
  const std::vector<int64_t> three = {3};
  ASSERT_TRUE(comm.AllToAll(in.data(), three, out.data(), three, DType::kBF16).ok());
  EXPECT_EQ(out, (std::vector<uint16_t>{0x3F80, 0x7FC1, 0xFF80, 0xEEEE}));
  const std::vector<int64_t> none = {0};
  EXPECT_TRUE(comm.AllToAll(nullptr, none, nullptr, none, DType::kF32).ok());
  const std::vector<int64_t> two = {2};
  absl::Status mismatch = comm.AllToAll(in.data(), three, out.data(), two, DType::kBF16);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mismatch.message(), "AllToAll: rank 0 sends itself 3 elements but expects 2");
}

TEST(CommunicatorChecks, AllToAllCounts) {
  const std::vector<int64_t> ok = {0, 5, 2}, short_list = {1, 2}, negative = {0, -1, 2};
  EXPECT_TRUE(CheckAllToAllCounts(3, ok, ok, DType::kF32).ok());
  EXPECT_TRUE(CheckAllToAllCounts(3, ok, ok, DType::kI32).ok());
  const absl::Status size = CheckAllToAllCounts(3, ok, short_list, DType::kF32);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(size.message(), "AllToAll: recv_counts has 2 entries, expected one per rank (3)");
  const absl::Status below = CheckAllToAllCounts(3, negative, ok, DType::kF32);
  EXPECT_EQ(below.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(below.message(), "AllToAll: send_counts[1] is -1, below 0");
  const absl::Status blocks = CheckAllToAllCounts(3, ok, ok, DType::kQ4_K);
  EXPECT_EQ(blocks.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blocks.message(), "AllToAll: Q4_K is block-quantized; it moves whole elements");
}

}  // namespace
}  // namespace tpserve
