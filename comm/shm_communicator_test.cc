#include "comm/shm_communicator.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <future>
#include <thread>
#include <vector>

#include "comm/comm_test_util.h"
#include "comm/in_process_communicator.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

// A run id no other test (or test process) uses, so /dev/shm can be searched for its segments.
std::string UniqueRunId(const std::string& test) { return test + "-" + std::to_string(getpid()); }

// Names in /dev/shm that belong to `run_id`'s segments (see ShmSegment::Create).
std::vector<std::string> SegmentsOf(const std::string& run_id) {
  std::vector<std::string> found;
  const std::string prefix = "tpserve-shm-" + run_id + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* entry = readdir(dir)) {
    if (std::string(entry->d_name).rfind(prefix, 0) == 0) found.push_back(entry->d_name);
  }
  closedir(dir);
  return found;
}

ShmOptions Options(int rank, int world_size, const std::string& run_id,
                   absl::Duration timeout = absl::Seconds(20)) {
  ShmOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = timeout;
  options.run_id = run_id;
  return options;
}

absl::StatusOr<std::unique_ptr<Communicator>> AsBase(
    absl::StatusOr<std::unique_ptr<ShmCommunicator>> comm) {
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Communicator>(std::move(*comm));
}

// Connects `world_size` ranks as threads; options(rank) gives each rank's options.
Comms ConnectThreads(int world_size, const std::function<ShmOptions(int)>& options) {
  gloo::rendezvous::HashStore store;
  Comms comms(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      auto comm = ShmCommunicator::Connect(options(r), store);
      EXPECT_TRUE(comm.ok()) << "rank " << r << ": " << comm.status();
      if (comm.ok()) comms[r] = std::move(*comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

void ExpectAllOk(const std::vector<CollectiveResults>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status;
  }
}

// The shared workload. The in-process communicator adds in rank order too, so its results are
// the reference bit for bit; with 4 KiB slots every size above 1024 floats goes in pieces.
// A cold start (issue 38): a rank that arrives late, and a first collective a peer joins late,
// stay within the startup timeout though past the collective timeout; once warm, a collective
// a peer joins as late fails at the collective timeout, naming the rank.
TEST(ShmCommunicator, StartupTimeoutBoundsTheConnectAndTheFirstCollectiveOnly) {
  Watchdog watchdog(absl::Seconds(20), "late joiner");
  const std::string run_id = UniqueRunId("startup");
  gloo::rendezvous::HashStore store;
  const auto options = [&](int rank) {
    ShmOptions o = Options(rank, 2, run_id, absl::Milliseconds(300));
    o.startup_timeout = absl::Seconds(5);
    return o;
  };
  std::promise<void> rank0_done;
  std::thread rank1([&] {
    absl::SleepFor(absl::Milliseconds(900));
    auto comm = ShmCommunicator::Connect(options(1), store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    absl::SleepFor(absl::Milliseconds(900));
    ASSERT_TRUE((*comm)->Barrier().ok());
    rank0_done.get_future().wait();
  });
  auto comm = ShmCommunicator::Connect(options(0), store);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const absl::Status first = (*comm)->Barrier();
  EXPECT_TRUE(first.ok()) << first;
  const absl::Status second = (*comm)->Barrier();
  EXPECT_EQ(second.code(), absl::StatusCode::kDeadlineExceeded) << second;
  EXPECT_NE(second.message().find("rank 1 of 2 did not arrive within 300 ms"), std::string::npos)
      << second;
  rank0_done.set_value();
  rank1.join();
}

TEST(ShmCommunicator, SharedWorkloadMatchesInProcessBitwiseAt2To4Ranks) {
  Watchdog watchdog(absl::Seconds(60), "shared workload");
  const std::vector<size_t> sizes = {0, 1, 3, 576, 1024, 1025, 16384, 300007};
  for (int world = 2; world <= 4; ++world) {
    for (size_t max_bytes : {size_t{4096}, size_t{1} << 20}) {
      const std::string run_id = UniqueRunId("workload");
      gloo::rendezvous::HashStore store;
      std::vector<CollectiveResults> shm = RunOnThreads(world, sizes, [&](int rank) {
        ShmOptions options = Options(rank, world, run_id);
        options.max_bytes = max_bytes;
        return AsBase(ShmCommunicator::Connect(options, store));
      });
      ExpectAllOk(shm);
      std::vector<CollectiveResults> reference = RunInProcess(world, sizes);
      ExpectAllOk(reference);
      for (int r = 0; r < world; ++r) {
        EXPECT_TRUE(shm[r].Serialize() == reference[r].Serialize())
            << "world " << world << " max_bytes " << max_bytes << " rank " << r;
        EXPECT_TRUE(shm[r].SerializeCommon() == shm[0].SerializeCommon()) << "rank " << r;
      }
      // Not only equal to the reference: the sum itself, element by element, and every
      // all-to-all piece where it belongs.
      const size_t last = sizes.size() - 1;
      for (size_t i : {size_t{0}, size_t{4097}, sizes[last] - 1}) {
        float expected = RankValue(0, i);
        for (int r = 1; r < world; ++r) expected += RankValue(r, i);
        EXPECT_EQ(shm[world - 1].reduced[last][i], expected) << "i " << i;
      }
      for (int r = 0; r < world; ++r) {
        for (size_t s = 0; s < sizes.size(); ++s) {
          EXPECT_TRUE(shm[r].exchanged[s] == ExpectedWorkloadAllToAll(r, world, sizes[s]))
              << "rank " << r << " n " << sizes[s];
        }
      }
      EXPECT_TRUE(SegmentsOf(run_id).empty());
    }
  }
}

// Many collectives back to back with changing sizes, slots far smaller than the messages and a
// rank that never spins: a rank that reuses a slot while a peer still reads it shows up as a
// wrong sum.
// Runs with both all-reduce paths: one sum per rank, and sliced (reduce-scatter style, which
// also has ranks with empty slices when a piece has fewer floats than there are ranks).
class ShmBackToBack : public testing::TestWithParam<size_t> {};

TEST_P(ShmBackToBack, CollectivesOfChangingSizesStayExact) {
  Watchdog watchdog(absl::Seconds(60), "back-to-back collectives");
  constexpr int kWorld = 3;
  constexpr int kIterations = 1500;
  const std::string run_id = UniqueRunId("back-to-back");
  Comms comms = ConnectThreads(kWorld, [&](int rank) {
    ShmOptions options = Options(rank, kWorld, run_id);
    options.max_bytes = 128;
    options.spin_iterations = rank == 1 ? 0 : 50;
    options.reduce_scatter_min_bytes = GetParam();
    return options;
  });
  ASSERT_EQ(comms.size(), static_cast<size_t>(kWorld));
  std::vector<int> wrong(kWorld, 0);
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      for (int it = 0; it < kIterations && status[r].ok(); ++it) {
        const size_t n = 1 + (it * 7919) % 173;  // 1..173 floats: 1 to 6 pieces
        auto value = [&](int rank, size_t i) {
          return static_cast<float>(it * 1000 + rank * 97 + i);
        };
        std::vector<float> data(n);
        for (size_t i = 0; i < n; ++i) data[i] = value(r, i);
        if (it % 3 == 2) {
          std::vector<float> out(kWorld * n);
          status[r] = comms[r]->AllGather(data, absl::MakeSpan(out));
          for (int src = 0; src < kWorld && status[r].ok(); ++src) {
            for (size_t i = 0; i < n; ++i) wrong[r] += out[src * n + i] != value(src, i);
          }
          continue;
        }
        status[r] = comms[r]->AllReduceSum(absl::MakeSpan(data));
        for (size_t i = 0; i < n && status[r].ok(); ++i) {
          wrong[r] += data[i] != value(0, i) + value(1, i) + value(2, i);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_TRUE(status[r].ok()) << status[r];
    EXPECT_EQ(wrong[r], 0) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(BothAllReducePaths, ShmBackToBack, testing::Values(SIZE_MAX, size_t{0}),
                         [](const testing::TestParamInfo<size_t>& info) {
                           return info.param == 0 ? std::string("Sliced") : std::string("Whole");
                         });

TEST(ShmCommunicator, HalfPrecisionSumsInF32AndGathers) {
  constexpr int kWorld = 3;
  constexpr int64_t kCount = 300;  // 600 bytes: 10 pieces of 64 bytes
  const std::string run_id = UniqueRunId("half");
  Comms comms = ConnectThreads(kWorld, [&](int rank) {
    ShmOptions options = Options(rank, kWorld, run_id);
    options.max_bytes = 64;
    return options;
  });
  ASSERT_EQ(comms.size(), static_cast<size_t>(kWorld));
  std::vector<std::vector<uint16_t>> bf16(kWorld), gathered(kWorld);
  std::vector<absl::Status> reduce(kWorld), gather(kWorld), other(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      bf16[r].resize(kCount);
      for (int64_t i = 0; i < kCount; ++i) bf16[r][i] = F32ToBF16(RankValue(r, i));
      const std::vector<uint16_t> mine = bf16[r];
      reduce[r] = comms[r]->AllReduceSum(bf16[r].data(), kCount, DType::kBF16);
      gathered[r].resize(kWorld * kCount);
      gather[r] = comms[r]->AllGather(mine.data(), kCount, DType::kBF16, gathered[r].data());
      other[r] = comms[r]->AllReduceSum(bf16[r].data(), kCount, DType::kQ8_0);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(reduce[r].ok()) << reduce[r];
    ASSERT_TRUE(gather[r].ok()) << gather[r];
    EXPECT_EQ(other[r].code(), absl::StatusCode::kUnimplemented) << other[r];
    EXPECT_EQ(bf16[r], bf16[0]);
    for (int64_t i = 0; i < kCount; ++i) {
      float sum = 0;
      for (int src = 0; src < kWorld; ++src) sum += BF16ToF32(F32ToBF16(RankValue(src, i)));
      ASSERT_EQ(bf16[r][i], F32ToBF16(sum)) << "i " << i;
      for (int src = 0; src < kWorld; ++src) {
        ASSERT_EQ(gathered[r][src * kCount + i], F32ToBF16(RankValue(src, i)));
      }
    }
  }
}

// Rank p sends kSends[p][q] elements to rank q: a zero pair, own pieces, no two alike, and
// with 4-byte elements pieces of up to 700 bytes, so with 64-byte slots pieces span many steps.
AllToAllCounts Sends(int world) {
  AllToAllCounts sends(world, std::vector<int64_t>(world));
  for (int p = 0; p < world; ++p) {
    for (int q = 0; q < world; ++q) sends[p][q] = p == 1 && q == 0 ? 0 : 5 + 37 * p + 11 * q;
  }
  return sends;
}

Comms SmallSlots(int world, const std::string& test, absl::Duration timeout = absl::Seconds(20)) {
  const std::string run_id = UniqueRunId(test);
  return ConnectThreads(world, [&](int rank) {
    ShmOptions options = Options(rank, world, run_id, timeout);
    options.max_bytes = 64;
    return options;
  });
}

// 5 ranks: the counts sent ahead of the data (16 bytes per rank) fill more than one slot.
TEST(ShmCommunicator, AllToAllPutsEveryPieceAtItsOffsetThroughSmallSlots) {
  Watchdog watchdog(absl::Seconds(60), "all-to-all through 64-byte slots");
  for (int world : {2, 3, 5}) {
    Comms comms = SmallSlots(world, "all-to-all");
    ASSERT_EQ(comms.size(), static_cast<size_t>(world));
    const AllToAllCounts sends = Sends(world);
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
      AllToAllRun run = RunAllToAll(comms, sends, dtype);
      for (int r = 0; r < world; ++r) {
        ASSERT_TRUE(run.status[r].ok()) << run.status[r];
        EXPECT_TRUE(run.out[r] == ExpectedAllToAll(sends, r, BlockBytes(dtype)))
            << "world " << world << " rank " << r << " " << DTypeName(dtype);
      }
    }
    const AllToAllCounts zeros(world, std::vector<int64_t>(world, 0));
    AllToAllRun run = RunAllToAll(comms, zeros, DType::kF32);
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(run.status[r].ok()) << run.status[r];
      EXPECT_EQ(run.out[r], std::vector<uint8_t>(kAllToAllGuardBytes, kAllToAllPoison));
    }
  }
}

TEST(ShmCommunicator, AllToAllCountsThatDoNotPairUpFailEverywhereAndTheGroupGoesOn) {
  Watchdog watchdog(absl::Seconds(30), "mismatched all-to-all");
  constexpr int kWorld = 3;
  Comms comms = SmallSlots(kWorld, "all-to-all-mismatch");
  ASSERT_EQ(comms.size(), static_cast<size_t>(kWorld));
  const AllToAllCounts sends = Sends(kWorld);
  AllToAllCounts expects(kWorld, std::vector<int64_t>(kWorld));
  for (int q = 0; q < kWorld; ++q) {
    for (int p = 0; p < kWorld; ++p) expects[q][p] = sends[p][q];
  }
  expects[1][2] = 3;  // rank 2 sends rank 1 a piece of 5 + 74 + 11 = 90 elements
  AllToAllRun run = RunAllToAll(comms, sends, DType::kF32, &expects);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(run.status[r].code(), absl::StatusCode::kInvalidArgument) << run.status[r];
    EXPECT_EQ(std::string(run.status[r].message()),
              "shm AllToAll #1 on rank " + std::to_string(r) +
                  ": ranks disagree: rank 2 sends 90 elements to rank 1, which expects 3");
    EXPECT_TRUE(run.out[r] == std::vector<uint8_t>(run.out[r].size(), kAllToAllPoison));
  }
  run = RunAllToAll(comms, sends, DType::kF32);
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    EXPECT_TRUE(run.out[r] == ExpectedAllToAll(sends, r, 4)) << "rank " << r;
  }
}

TEST(ShmCommunicator, AllToAllAgainstAnotherCollectiveIsInvalidArgument) {
  Watchdog watchdog(absl::Seconds(30), "all-to-all against an all-reduce");
  Comms comms = SmallSlots(2, "all-to-all-other");
  ASSERT_EQ(comms.size(), 2u);
  absl::Status rank1;
  std::thread peer([&] {
    std::vector<float> data(3, 1.0f);
    rank1 = comms[1]->AllReduceSum(absl::MakeSpan(data));
  });
  std::vector<float> in(4), out(4);
  const std::vector<int64_t> counts = {2, 2};
  absl::Status rank0 = comms[0]->AllToAll(in.data(), counts, out.data(), counts, DType::kF32);
  peer.join();
  EXPECT_EQ(rank0.code(), absl::StatusCode::kInvalidArgument) << rank0;
  EXPECT_EQ(std::string(rank0.message()),
            "shm AllToAll #1 on rank 0: ranks disagree: rank 0 called AllToAll of F32, rank 1 "
            "called AllReduceSum of 3 F32");
  EXPECT_EQ(rank1.code(), absl::StatusCode::kInvalidArgument) << rank1;
}

TEST(ShmCommunicator, AllToAllRefusesBadCountListsWithoutItsPeers) {
  Watchdog watchdog(absl::Seconds(30), "bad all-to-all counts");
  Comms comms = SmallSlots(2, "all-to-all-bad", absl::Milliseconds(300));
  ASSERT_EQ(comms.size(), 2u);
  std::vector<uint8_t> in(64), out(64);
  const std::vector<int64_t> two = {1, 1}, one = {1}, negative = {-1, 1};
  EXPECT_EQ(std::string(comms[0]->AllToAll(in.data(), one, out.data(), two, DType::kF32).message()),
            "AllToAll: send_counts has 1 entries, expected one per rank (2)");
  EXPECT_EQ(
      std::string(comms[0]->AllToAll(in.data(), two, out.data(), negative, DType::kF32).message()),
      "AllToAll: recv_counts[0] is -1, below 0");
  absl::Status blocks = comms[0]->AllToAll(in.data(), two, out.data(), two, DType::kQ4_0);
  EXPECT_EQ(blocks.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(blocks.message()),
            "AllToAll: Q4_0 is block-quantized; it moves whole elements");
  // Refused before the first step (a step without its peer would time out and break the
  // group): both ranks still meet.
  AllToAllRun run = RunAllToAll(comms, {{1, 2}, {3, 4}}, DType::kF32);
  EXPECT_TRUE(run.status[0].ok()) << run.status[0];
  EXPECT_TRUE(run.status[1].ok()) << run.status[1];
}

// Many all-to-alls back to back with changing counts, 128-byte slots and a rank that never
// spins: a rank that reuses a slot while a peer still reads it shows up as a wrong byte.
TEST(ShmCommunicator, AllToAllsOfChangingCountsStayExact) {
  Watchdog watchdog(absl::Seconds(60), "back-to-back all-to-alls");
  constexpr int kWorld = 3;
  constexpr int kIterations = 300;
  const std::string run_id = UniqueRunId("all-to-all-back-to-back");
  Comms comms = ConnectThreads(kWorld, [&](int rank) {
    ShmOptions options = Options(rank, kWorld, run_id);
    options.max_bytes = 128;
    options.spin_iterations = rank == 1 ? 0 : 50;
    return options;
  });
  ASSERT_EQ(comms.size(), static_cast<size_t>(kWorld));
  for (int it = 0; it < kIterations; ++it) {
    AllToAllCounts sends(kWorld, std::vector<int64_t>(kWorld));
    for (int p = 0; p < kWorld; ++p) {
      for (int q = 0; q < kWorld; ++q) sends[p][q] = (it * 7919 + p * 31 + q * 17) % 97;
    }
    AllToAllRun run = RunAllToAll(comms, sends, DType::kBF16);
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(run.status[r].ok()) << "iteration " << it << ": " << run.status[r];
      ASSERT_TRUE(run.out[r] == ExpectedAllToAll(sends, r, 2)) << "iteration " << it;
    }
  }
}

TEST(ShmCommunicator, SegmentNameIsUnlinkedOnceEveryRankHasMappedIt) {
  const std::string run_id = UniqueRunId("unlinked");
  Comms comms = ConnectThreads(3, [&](int rank) { return Options(rank, 3, run_id); });
  ASSERT_EQ(comms.size(), 3u);
  auto* shm = static_cast<ShmCommunicator*>(comms[2].get());
  EXPECT_EQ(shm->segment_name().rfind("/tpserve-shm-" + run_id + "-", 0), 0u)
      << shm->segment_name();
  struct stat st {};
  EXPECT_NE(stat(("/dev/shm" + shm->segment_name()).c_str(), &st), 0);
  EXPECT_TRUE(SegmentsOf(run_id).empty());
  EXPECT_EQ(comms[1]->Describe(), "shm rank 1/3 (same host)");
  std::vector<float> data(1, 1.0f);
  std::thread peer0([&] { EXPECT_TRUE(comms[0]->AllReduceSum(absl::MakeSpan(data)).ok()); });
  std::vector<float> d1(1, 2.0f), d2(1, 4.0f);
  std::thread peer1([&] { EXPECT_TRUE(comms[1]->AllReduceSum(absl::MakeSpan(d1)).ok()); });
  EXPECT_TRUE(comms[2]->AllReduceSum(absl::MakeSpan(d2)).ok());
  peer0.join();
  peer1.join();
  EXPECT_EQ(d2[0], 7.0f);
}

TEST(ShmCommunicator, ARankThatNeverArrivesIsNamedWithinTheTimeoutAndBreaksTheGroup) {
  Watchdog watchdog(absl::Seconds(20), "collective without rank 2");
  const std::string run_id = UniqueRunId("never-arrives");
  // Rank 0 gives up first; rank 1, with a long timeout, must hear of it at once.
  Comms comms = ConnectThreads(3, [&](int rank) {
    return Options(rank, 3, run_id, rank == 0 ? absl::Milliseconds(200) : absl::Seconds(15));
  });
  ASSERT_EQ(comms.size(), 3u);
  absl::Status rank1;
  absl::Duration rank1_waited;
  std::thread peer([&] {
    std::vector<float> data(4, 1.0f);
    const absl::Time start = absl::Now();
    rank1 = comms[1]->AllReduceSum(absl::MakeSpan(data));
    rank1_waited = absl::Now() - start;
  });
  std::vector<float> data(4, 1.0f);
  const absl::Time start = absl::Now();
  absl::Status rank0 = comms[0]->AllReduceSum(absl::MakeSpan(data));
  const absl::Duration waited = absl::Now() - start;
  peer.join();
  EXPECT_EQ(rank0.code(), absl::StatusCode::kDeadlineExceeded) << rank0;
  EXPECT_EQ(std::string(rank0.message()),
            "shm AllReduceSum #1 on rank 0: rank 2 of 3 did not arrive within 200 ms");
  EXPECT_GE(waited, absl::Milliseconds(200));
  EXPECT_LT(waited, absl::Seconds(4));
  EXPECT_EQ(rank1.code(), absl::StatusCode::kUnavailable) << rank1;
  EXPECT_EQ(std::string(rank1.message()),
            "shm AllReduceSum #1 on rank 1: rank 0 broke the group after a timeout or an error");
  EXPECT_LT(rank1_waited, absl::Seconds(8));
  // Broken for good: at once, on every rank, including the one that was late.
  const absl::Time later = absl::Now();
  absl::Status again = comms[0]->Barrier();
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(again.message()),
            "shm Barrier #2 on rank 0: communicator is broken by an earlier failure: shm "
            "AllReduceSum #1 on rank 0: rank 2 of 3 did not arrive within 200 ms");
  EXPECT_EQ(comms[2]->Barrier().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - later, absl::Seconds(4));
}

TEST(ShmCommunicator, ConnectNamesTheMissingRankAndLeavesNoSegment) {
  Watchdog watchdog(absl::Seconds(10), "connect without rank 1");
  const std::string run_id = UniqueRunId("connect-timeout");
  gloo::rendezvous::HashStore store;
  auto comm = ShmCommunicator::Connect(Options(0, 2, run_id, absl::Milliseconds(200)), store);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_EQ(std::string(comm.status().message()),
            "shm connect of rank 0 of 2: rank 1 of 2 did not arrive within 200 ms");
  EXPECT_TRUE(SegmentsOf(run_id).empty());
  // The late rank finds the name rank 0 published, but not the segment.
  auto late = ShmCommunicator::Connect(Options(1, 2, run_id, absl::Milliseconds(200)), store);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kNotFound) << late.status();
}

TEST(ShmCommunicator, RanksThatDisagreeGetInvalidArgumentAndStayInStep) {
  Watchdog watchdog(absl::Seconds(20), "mismatched collectives");
  const std::string run_id = UniqueRunId("disagree");
  Comms comms = ConnectThreads(2, [&](int rank) {
    ShmOptions options = Options(rank, 2, run_id);
    options.max_bytes = 64;
    return options;
  });
  ASSERT_EQ(comms.size(), 2u);
  std::vector<absl::Status> mismatch(2), after(2);
  std::vector<float> sums(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      std::vector<float> data(1000 + rank, 1.0f);
      mismatch[rank] = comms[rank]->AllReduceSum(absl::MakeSpan(data));
      std::vector<float> one = {static_cast<float>(rank + 1)};
      after[rank] = comms[rank]->AllReduceSum(absl::MakeSpan(one));
      sums[rank] = one[0];
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatch[0].code(), absl::StatusCode::kInvalidArgument) << mismatch[0];
  EXPECT_EQ(std::string(mismatch[0].message()),
            "shm AllReduceSum #1 on rank 0: ranks disagree: rank 0 called AllReduceSum of 1000 "
            "F32, rank 1 called AllReduceSum of 1001 F32");
  EXPECT_EQ(mismatch[1].code(), absl::StatusCode::kInvalidArgument) << mismatch[1];
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(after[rank].ok()) << after[rank];
    EXPECT_EQ(sums[rank], 3.0f);
  }
}

TEST(ShmCommunicator, RejectsBadOptionsAndRanksThatDisagreeOnThem) {
  gloo::rendezvous::HashStore store;
  ShmOptions options = Options(0, 2, "bad");
  options.max_bytes = 32;
  EXPECT_EQ(std::string(ShmCommunicator::Connect(options, store).status().message()),
            "ShmOptions.max_bytes is 32, must be in [64, 1073741824]");
  EXPECT_EQ(std::string(ShmCommunicator::Connect(Options(2, 2, "bad"), store).status().message()),
            "ShmOptions.rank is 2, must be in [0, 2)");

  Watchdog watchdog(absl::Seconds(20), "disagreeing slot sizes");
  const std::string run_id = UniqueRunId("slot-sizes");
  absl::Status rank0;
  std::thread first([&] {
    rank0 = ShmCommunicator::Connect(Options(0, 2, run_id, absl::Seconds(10)), store).status();
  });
  ShmOptions other = Options(1, 2, run_id, absl::Seconds(10));
  other.max_bytes = 4096;
  absl::Status rank1 = ShmCommunicator::Connect(other, store).status();
  first.join();
  EXPECT_EQ(rank1.code(), absl::StatusCode::kInvalidArgument) << rank1;
  EXPECT_EQ(std::string(rank1.message()),
            "shm connect of rank 1 of 2: rank 0 made the segment for world_size 2 and max_bytes "
            "1048576, this rank has world_size 2 and max_bytes 4096 (rounded up to 64)");
  EXPECT_EQ(rank0.code(), absl::StatusCode::kUnavailable) << rank0;
  EXPECT_EQ(std::string(rank0.message()),
            "shm connect of rank 0 of 2: rank 1 broke the group after a timeout or an error");
  EXPECT_TRUE(SegmentsOf(run_id).empty());

  // Ranks that disagree on slicing would take different numbers of steps per piece.
  const std::string sliced_run_id = UniqueRunId("slicing");
  gloo::rendezvous::HashStore fresh_store;  // `store` still holds the first segment's name
  std::thread sliced_first([&] {
    rank0 = ShmCommunicator::Connect(Options(0, 2, sliced_run_id, absl::Seconds(10)), fresh_store)
                .status();
  });
  ShmOptions unsliced = Options(1, 2, sliced_run_id, absl::Seconds(10));
  unsliced.reduce_scatter_min_bytes = SIZE_MAX;
  rank1 = ShmCommunicator::Connect(unsliced, fresh_store).status();
  sliced_first.join();
  EXPECT_EQ(rank1.code(), absl::StatusCode::kInvalidArgument) << rank1;
  EXPECT_EQ(std::string(rank1.message()),
            "shm connect of rank 1 of 2: rank 0 has reduce_scatter_min_bytes 32768, this rank "
            "18446744073709551615; all ranks must agree");
  EXPECT_EQ(rank0.code(), absl::StatusCode::kUnavailable) << rank0;
}

TEST(ShmCommunicator, PeersOfARankThatClosedFailAtOnce) {
  Watchdog watchdog(absl::Seconds(20), "peer closed");
  Comms comms = ConnectThreads(
      2, [&](int rank) { return Options(rank, 2, UniqueRunId("closed"), absl::Seconds(15)); });
  ASSERT_EQ(comms.size(), 2u);
  comms[1].reset();
  const absl::Time start = absl::Now();
  absl::Status status = comms[0]->Barrier();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(std::string(status.message()),
            "shm Barrier #1 on rank 0: rank 1 left the group (closed its communicator)");
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ShmCommunicator, OneRankNeedsNoSegment) {
  gloo::rendezvous::HashStore store;
  auto comm = ShmCommunicator::Connect(Options(0, 1, "one"), store);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_TRUE((*comm)->segment_name().empty());
  std::vector<float> in = {1, 2}, out(2);
  ASSERT_TRUE((*comm)->AllGather(in, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, in);
  ASSERT_TRUE((*comm)->AllReduceSum(absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, in);
  std::vector<uint8_t> bytes(2);
  EXPECT_EQ((*comm)->Broadcast(absl::MakeSpan(bytes), 1).code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<int64_t> two = {2}, one = {1};
  std::vector<float> exchanged(3, -1.0f);
  ASSERT_TRUE((*comm)->AllToAll(in.data(), two, exchanged.data(), two, DType::kF32).ok());
  EXPECT_EQ(exchanged, (std::vector<float>{1, 2, -1}));
  EXPECT_EQ((*comm)->AllToAll(in.data(), two, exchanged.data(), one, DType::kF32).code(),
            absl::StatusCode::kInvalidArgument);
}


// RequestAbort (a rank being regrouped after its peer died) ends a collective waiting on a
// peer that never comes, long before the collective timeout, on every rank of the group.
TEST(ShmCommunicator, RequestAbortEndsAWaitOnAPeerThatNeverComes) {
  Watchdog watchdog(absl::Seconds(20), "abort");
  const std::string run_id = UniqueRunId("abort");
  Comms comms = ConnectThreads(3, [&](int r) { return Options(r, 3, run_id); });
  ASSERT_TRUE(comms[0] && comms[1] && comms[2]);
  const absl::Time start = absl::Now();
  std::thread waiter([&] {  // rank 0 waits for rank 2, which never calls
    const absl::Status s = comms[0]->Barrier();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  });
  absl::SleepFor(absl::Milliseconds(200));
  comms[1]->RequestAbort();  // from another thread, as WorkerService::Regroup does
  waiter.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // the collective timeout is 20 s
  EXPECT_EQ(comms[2]->Barrier().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tpserve
