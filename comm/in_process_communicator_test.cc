#include "comm/in_process_communicator.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

using RankFn = std::function<absl::Status(InProcessCommunicator&)>;

// Runs `fn` on `world_size` threads, one communicator each; returns each rank's status.
std::vector<absl::Status> RunRanks(int world_size, const RankFn& fn,
                                   absl::Duration timeout = absl::Seconds(30)) {
  auto group = std::make_shared<InProcessGroup>(world_size);
  std::vector<absl::Status> statuses(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      InProcessCommunicator comm(group, r, timeout);
      statuses[r] = fn(comm);
    });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

// Values whose sums round differently under different association orders.
float RankValue(int rank, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * 1000.0 /
                            (rank + 1));
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r];
}

TEST(InProcessCommunicator, AllReduceSumIsRankOrderSumOnEveryRank) {
  for (int world : {1, 2, 3, 4}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{576}, size_t{1001}, size_t{65537}}) {
      std::vector<std::vector<float>> data(world, std::vector<float>(n));
      for (int r = 0; r < world; ++r) {
        for (size_t i = 0; i < n; ++i) data[r][i] = RankValue(r, i);
      }
      std::vector<float> expected(n);
      for (size_t i = 0; i < n; ++i) {
        float sum = RankValue(0, i);
        for (int r = 1; r < world; ++r) sum += RankValue(r, i);
        expected[i] = sum;
      }
      ExpectAllOk(RunRanks(world, [&](InProcessCommunicator& comm) {
        return comm.AllReduceSum(absl::MakeSpan(data[comm.rank()]));
      }));
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(data[r].size(), n);
        // n == 0: empty vectors' data() may be null, which memcmp must not be given.
        EXPECT_TRUE(n == 0 || std::memcmp(data[r].data(), expected.data(), n * sizeof(float)) == 0)
            << "world " << world << " n " << n << " rank " << r;
      }
    }
  }
}

TEST(InProcessCommunicator, AllReduceSumAssociatesInRankOrder) {
  // (1e8 + -1e8) + 1 == 1, while 1e8 + (-1e8 + 1) == 0 in float.
  const float values[3] = {1e8f, -1e8f, 1.0f};
  std::vector<std::vector<float>> data = {{values[0]}, {values[1]}, {values[2]}};
  ExpectAllOk(RunRanks(3, [&](InProcessCommunicator& comm) {
    return comm.AllReduceSum(absl::MakeSpan(data[comm.rank()]));
  }));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r][0], 1.0f) << "rank " << r;
}

TEST(InProcessCommunicator, AllGatherPlacesRankRAtOffsetRTimesN) {
  constexpr int kWorld = 3;
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{576}}) {
    std::vector<std::vector<float>> out(kWorld, std::vector<float>(kWorld * n, -1.0f));
    ExpectAllOk(RunRanks(kWorld, [&](InProcessCommunicator& comm) {
      std::vector<float> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = RankValue(comm.rank(), i);
      return comm.AllGather(in, absl::MakeSpan(out[comm.rank()]));
    }));
    for (int dst = 0; dst < kWorld; ++dst) {
      for (int src = 0; src < kWorld; ++src) {
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[dst][src * n + i], RankValue(src, i)) << dst << " " << src << " " << i;
        }
      }
    }
  }
}

TEST(InProcessCommunicator, GatherFillsOnlyTheRootAndLeavesOthersUntouched) {
  constexpr int kWorld = 3;
  for (int root = 0; root < kWorld; ++root) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{576}}) {
      std::vector<std::vector<float>> out(kWorld, std::vector<float>(kWorld * n, -1.0f));
      ExpectAllOk(RunRanks(kWorld, [&](InProcessCommunicator& comm) {
        std::vector<float> in(n);
        for (size_t i = 0; i < n; ++i) in[i] = RankValue(comm.rank(), i);
        return comm.Gather(in.data(), static_cast<int64_t>(n), DType::kF32,
                           out[comm.rank()].data(), root);
      }));
      for (int dst = 0; dst < kWorld; ++dst) {
        for (int src = 0; src < kWorld; ++src) {
          for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[dst][src * n + i], dst == root ? RankValue(src, i) : -1.0f)
                << "root " << root << " dst " << dst << " src " << src << " i " << i;
          }
        }
      }
    }
  }
  // A root outside the group fails at once, naming the collective and the bound.
  auto group = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator comm(group, 0);
  float x = 1;
  const absl::Status bad = comm.Gather(&x, 1, DType::kF32, &x, 2);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "Gather: root 2 is outside [0, 2)");
}

TEST(InProcessCommunicator, BroadcastFromEachRoot) {
  constexpr int kWorld = 3;
  constexpr size_t kBytes = 13;
  for (int root = 0; root < kWorld; ++root) {
    std::vector<std::vector<uint8_t>> data(kWorld, std::vector<uint8_t>(kBytes));
    for (int r = 0; r < kWorld; ++r) {
      for (size_t i = 0; i < kBytes; ++i) data[r][i] = static_cast<uint8_t>(r * 50 + i);
    }
    ExpectAllOk(RunRanks(kWorld, [&](InProcessCommunicator& comm) {
      return comm.Broadcast(absl::MakeSpan(data[comm.rank()]), root);
    }));
    for (int r = 0; r < kWorld; ++r) {
      for (size_t i = 0; i < kBytes; ++i) {
        EXPECT_EQ(data[r][i], static_cast<uint8_t>(root * 50 + i)) << "root " << root;
      }
    }
  }
}

TEST(InProcessCommunicator, BroadcastInt32sCarriesTokenIds) {
  std::vector<std::vector<int32_t>> ids = {{-1, 0, 0}, {7, 49151, -5}};
  ExpectAllOk(RunRanks(2, [&](InProcessCommunicator& comm) {
    return BroadcastInt32s(comm, absl::MakeSpan(ids[comm.rank()]), /*root=*/1);
  }));
  EXPECT_EQ(ids[0], (std::vector<int32_t>{7, 49151, -5}));
}

TEST(InProcessCommunicator, BarrierWaitsForEveryRank) {
  constexpr int kWorld = 4;
  std::atomic<int> before{0};
  std::vector<int> seen(kWorld, -1);
  ExpectAllOk(RunRanks(kWorld, [&](InProcessCommunicator& comm) {
    before.fetch_add(1);
    absl::Status status = comm.Barrier();
    seen[comm.rank()] = before.load();
    return status;
  }));
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(seen[r], kWorld) << "rank " << r;
}

TEST(InProcessCommunicator, RankThatNeverJoinsGivesDeadlineExceededThenUnavailable) {
  auto group = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator rank0(group, 0, absl::Milliseconds(200));
  InProcessCommunicator rank1(group, 1, absl::Milliseconds(200));
  std::vector<float> data(4, 1.0f);
  absl::Status status = rank0.AllReduceSum(absl::MakeSpan(data));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("AllReduceSum on rank 0 of 2 timed out"), std::string::npos)
      << status;
  EXPECT_NE(status.message().find("waiting for ranks [1]"), std::string::npos) << status;
  EXPECT_TRUE(group->broken());
  // The late rank learns why instead of waiting for a partner that has left.
  absl::Status late = rank1.Barrier();
  EXPECT_EQ(late.code(), absl::StatusCode::kUnavailable) << late;
  EXPECT_NE(late.message().find("rank 0 timed out in AllReduceSum"), std::string::npos) << late;
}

TEST(InProcessCommunicator, AbortReleasesWaitingRanksWithUnavailable) {
  constexpr int kWorld = 3;
  auto group = std::make_shared<InProcessGroup>(kWorld);
  std::vector<absl::Status> statuses(kWorld - 1);
  std::vector<std::thread> waiting;
  for (int r = 0; r < kWorld - 1; ++r) {
    waiting.emplace_back([&, r] {
      InProcessCommunicator comm(group, r, absl::Seconds(60));
      std::vector<float> data(8, 1.0f);
      statuses[r] = comm.AllReduceSum(absl::MakeSpan(data));
    });
  }
  // Rank 2 "dies": its supervisor aborts the group instead of joining.
  InProcessCommunicator dead(group, kWorld - 1);
  dead.Abort("process exited");
  for (auto& t : waiting) t.join();
  for (int r = 0; r < kWorld - 1; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kUnavailable) << statuses[r];
    EXPECT_NE(statuses[r].message().find("rank 2 aborted: process exited"), std::string::npos)
        << statuses[r];
  }
}

TEST(InProcessCommunicator, SizeMismatchIsInvalidArgumentOnAllRanksAndGroupStaysUsable) {
  std::vector<std::vector<float>> data = {std::vector<float>(4, 1.0f), std::vector<float>(5, 2.0f)};
  std::vector<absl::Status> statuses = RunRanks(2, [&](InProcessCommunicator& comm) {
    absl::Status first = comm.AllReduceSum(absl::MakeSpan(data[comm.rank()]));
    std::vector<float> ok(3, static_cast<float>(comm.rank() + 1));
    absl::Status second = comm.AllReduceSum(absl::MakeSpan(ok));
    if (!second.ok() || ok[2] != 3.0f) return absl::InternalError("group unusable after mismatch");
    return first;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_NE(statuses[r].message().find("AllReduceSum: size mismatch: rank 0 passed 4 elements, "
                                         "rank 1 passed 5"),
              std::string::npos)
        << statuses[r];
  }
}

TEST(InProcessCommunicator, DifferentCollectivesOrRootsAreInvalidArgument) {
  std::vector<absl::Status> ops = RunRanks(2, [](InProcessCommunicator& comm) {
    if (comm.rank() == 0) return comm.Barrier();
    std::vector<float> data(2);
    return comm.AllReduceSum(absl::MakeSpan(data));
  });
  EXPECT_EQ(ops[1].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ops[1].message().find("rank 0 called Barrier, rank 1 called AllReduceSum"),
            std::string::npos)
      << ops[1];
  std::vector<absl::Status> roots = RunRanks(2, [](InProcessCommunicator& comm) {
    std::vector<uint8_t> data(2);
    return comm.Broadcast(absl::MakeSpan(data), comm.rank());
  });
  EXPECT_EQ(roots[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(roots[0].message().find("root mismatch"), std::string::npos) << roots[0];
}

TEST(InProcessCommunicator, LocalArgumentErrorsNeedNoPeer) {
  auto group = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator comm(group, 0, absl::Milliseconds(1));
  std::vector<uint8_t> bytes(3);
  absl::Status root = comm.Broadcast(absl::MakeSpan(bytes), 2);
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(root.message(), "Broadcast: root 2 is outside [0, 2)");
  std::vector<float> in(3), out(5);
  absl::Status gather = comm.AllGather(in, absl::MakeSpan(out));
  EXPECT_EQ(gather.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gather.message(), "AllGather: out has 5 elements, expected 6 (2 ranks x 3)");
  EXPECT_FALSE(group->broken());
  EXPECT_EQ(comm.Describe(), "in-process rank 0/2");
}

std::vector<std::unique_ptr<Communicator>> Group(int world_size,
                                                 absl::Duration timeout = absl::Seconds(30)) {
  auto group = std::make_shared<InProcessGroup>(world_size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world_size; ++r) {
    comms.push_back(std::make_unique<InProcessCommunicator>(group, r, timeout));
  }
  return comms;
}

// Rank p sends kSends[p][q] elements to rank q: a zero pair, own pieces, no two alike.
const AllToAllCounts kSends = {{2, 0, 5}, {3, 1, 0}, {4, 6, 7}};

TEST(InProcessCommunicator, AllToAllPlacesEachPieceAtItsSendersOffset) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(3);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3, DType::kI32}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const size_t elem_bytes = static_cast<size_t>(BlockBytes(dtype));
    AllToAllRun run = RunAllToAll(comms, kSends, dtype);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(run.status[r].ok()) << run.status[r];
      EXPECT_EQ(run.out[r], ExpectedAllToAll(kSends, r, elem_bytes)) << "rank " << r;
    }
  }
  // Rank 1 gets 0 elements from rank 0, then 1 of its own, then rank 2's 6: spelled out.
  AllToAllRun run = RunAllToAll(comms, kSends, DType::kBF16);
  ASSERT_EQ(run.out[1].size(), 14 + kAllToAllGuardBytes);
  EXPECT_EQ(run.out[1][0], AllToAllByte(1, 1, 0));
  EXPECT_EQ(run.out[1][1], AllToAllByte(1, 1, 1));
  EXPECT_EQ(run.out[1][2], AllToAllByte(2, 1, 0));
  EXPECT_EQ(run.out[1][13], AllToAllByte(2, 1, 11));
}

TEST(InProcessCommunicator, AllToAllOfNothingLeavesTheOutputAlone) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(2);
  const AllToAllCounts zeros = {{0, 0}, {0, 0}};
  AllToAllRun run = RunAllToAll(comms, zeros, DType::kF16);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    EXPECT_EQ(run.out[r], std::vector<uint8_t>(kAllToAllGuardBytes, kAllToAllPoison));
  }
}

TEST(InProcessCommunicator, AllToAllCountsThatDoNotPairUpAreInvalidArgumentEverywhere) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(3);
  AllToAllCounts expects = {{2, 3, 4}, {0, 1, 6}, {5, 0, 7}};  // kSends transposed
  expects[1][2] = 5;  // rank 1 expects 5 elements from rank 2, which sends it 6
  AllToAllRun run = RunAllToAll(comms, kSends, DType::kF32, &expects);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(run.status[r].code(), absl::StatusCode::kInvalidArgument) << run.status[r];
    EXPECT_EQ(run.status[r].message(),
              "AllToAll: rank 2 sends 6 elements to rank 1, which expects 5");
    EXPECT_EQ(run.out[r], std::vector<uint8_t>(run.out[r].size(), kAllToAllPoison));
  }
  // The group is still usable.
  run = RunAllToAll(comms, kSends, DType::kF32);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    EXPECT_EQ(run.out[r], ExpectedAllToAll(kSends, r, 4));
  }
}

TEST(InProcessCommunicator, AllToAllOfDifferentElementSizesIsInvalidArgument) {
  std::vector<std::unique_ptr<Communicator>> comms = Group(2);
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint8_t> in(8), out(8);
      const std::vector<int64_t> counts = {1, 1};
      statuses[r] = comms[r]->AllToAll(in.data(), counts, out.data(), counts,
                                       r == 0 ? DType::kF32 : DType::kBF16);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_EQ(statuses[r].message(), "AllToAll: rank 0 moves 4-byte elements, rank 1 2-byte ones");
  }
}

TEST(InProcessCommunicator, AllToAllRefusesBadCountListsWithoutItsPeers) {
  auto group = std::make_shared<InProcessGroup>(2);
  InProcessCommunicator comm(group, 0, absl::Milliseconds(1));
  std::vector<uint8_t> in(64), out(64, kAllToAllPoison);
  const std::vector<int64_t> two = {1, 1}, three = {1, 1, 1}, negative = {1, -2};
  absl::Status size = comm.AllToAll(in.data(), three, out.data(), two, DType::kF32);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(size.message(), "AllToAll: send_counts has 3 entries, expected one per rank (2)");
  absl::Status below = comm.AllToAll(in.data(), two, out.data(), negative, DType::kF32);
  EXPECT_EQ(below.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(below.message(), "AllToAll: recv_counts[1] is -2, below 0");
  absl::Status blocks = comm.AllToAll(in.data(), two, out.data(), two, DType::kQ8_0);
  EXPECT_EQ(blocks.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(blocks.message(), "AllToAll: Q8_0 is block-quantized; it moves whole elements");
  // Refused before joining: with a 1 ms timeout, joining would have broken the group.
  EXPECT_FALSE(group->broken());
  EXPECT_EQ(out, std::vector<uint8_t>(64, kAllToAllPoison));
}

}  // namespace
}  // namespace tpserve
