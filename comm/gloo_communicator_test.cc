#include "comm/gloo_communicator.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/comm_test_util.h"
#include "comm/in_process_communicator.h"
#include "comm/rendezvous_store.h"
#include "formats/dtype.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

// 300007 floats are 1.2 MB: more than Gloo's 1 MiB ring segment.
const std::vector<size_t> kSizes = {0, 1, 3, 576, 1001, 300007};

GlooOptions Options(int rank, int world_size, absl::Duration timeout = absl::Seconds(20)) {
  GlooOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = timeout;
  return options;
}

std::vector<CollectiveResults> RunGlooThreads(int world_size, gloo::rendezvous::Store& store) {
  return RunOnThreads(world_size, kSizes,
                      [&](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
                        auto comm = GlooCommunicator::Connect(Options(rank, world_size), store);
                        if (!comm.ok()) return comm.status();
                        return std::unique_ptr<Communicator>(std::move(*comm));
                      });
}

void ExpectAllOk(const std::vector<CollectiveResults>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_TRUE(results[r].status.ok()) << "rank " << r << ": " << results[r].status;
  }
}

TEST(GlooCommunicator, TwoRanksOnThreadsMatchInProcessBitwise) {
  gloo::rendezvous::HashStore store;
  std::vector<CollectiveResults> gloo_results = RunGlooThreads(2, store);
  ExpectAllOk(gloo_results);
  std::vector<CollectiveResults> reference = RunInProcess(2, kSizes);
  ExpectAllOk(reference);
  // With two ranks x0 + x1 == x1 + x0 exactly, so Gloo's ring order cannot change the bits.
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(gloo_results[r].Serialize() == reference[r].Serialize()) << "rank " << r;
  }
}

TEST(GlooCommunicator, ThreeRanksAgreeBitwiseAndMatchInProcessWithinRounding) {
  constexpr int kWorld = 3;
  gloo::rendezvous::HashStore store;
  std::vector<CollectiveResults> gloo_results = RunGlooThreads(kWorld, store);
  ExpectAllOk(gloo_results);
  std::vector<CollectiveResults> reference = RunInProcess(kWorld, kSizes);
  ExpectAllOk(reference);
  for (int r = 1; r < kWorld; ++r) {
    EXPECT_TRUE(gloo_results[r].SerializeCommon() == gloo_results[0].SerializeCommon())
        << "rank " << r;
  }
  // Gather and broadcast move bytes: exact. Sums may be added in another order than rank
  // order; reordering a 3-term float sum changes it by at most 2 * eps * sum(|x_r|).
  for (size_t s = 0; s < kSizes.size(); ++s) {
    EXPECT_EQ(gloo_results[0].gathered[s], reference[0].gathered[s]) << "n " << kSizes[s];
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(gloo_results[r].exchanged[s] == reference[r].exchanged[s])
          << "rank " << r << " n " << kSizes[s];
      EXPECT_TRUE(gloo_results[r].exchanged[s] == ExpectedWorkloadAllToAll(r, kWorld, kSizes[s]))
          << "rank " << r << " n " << kSizes[s];
    }
    for (size_t i = 0; i < kSizes[s]; ++i) {
      double magnitude = 0;
      for (int r = 0; r < kWorld; ++r) magnitude += std::fabs(RankValue(r, i));
      ASSERT_LE(std::fabs(gloo_results[0].reduced[s][i] - reference[0].reduced[s][i]),
                2.0 * FLT_EPSILON * magnitude)
          << "n " << kSizes[s] << " i " << i;
    }
  }
  EXPECT_EQ(gloo_results[2].received, reference[2].received);
}

TEST(GlooCommunicator, RepeatedRunsGiveTheSameBits) {
  gloo::rendezvous::HashStore first_store, second_store;
  std::vector<CollectiveResults> first = RunGlooThreads(3, first_store);
  std::vector<CollectiveResults> second = RunGlooThreads(3, second_store);
  ExpectAllOk(first);
  ExpectAllOk(second);
  EXPECT_TRUE(first[1].Serialize() == second[1].Serialize());
}

TEST(GlooCommunicator, ConnectsThroughAKeyValueStore) {
  InMemoryRendezvousKv kv;
  KvGlooStore store(&kv);
  std::vector<CollectiveResults> results =
      RunOnThreads(2, {5}, [&](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
        auto comm = GlooCommunicator::Connect(Options(rank, 2), store);
        if (!comm.ok()) return comm.status();
        return std::unique_ptr<Communicator>(std::move(*comm));
      });
  ExpectAllOk(results);
  EXPECT_GT(kv.size(), 0u);
  EXPECT_EQ(results[1].reduced[0][4], RankValue(0, 4) + RankValue(1, 4));
}

TEST(GlooCommunicator, ConnectTimesOutWhenAPeerNeverArrives) {
  Watchdog watchdog(absl::Seconds(10), "connect without a peer");
  gloo::rendezvous::HashStore store;
  auto comm = GlooCommunicator::Connect(Options(0, 2, absl::Milliseconds(300)), store);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_NE(comm.status().message().find("Gloo connect of rank 0 of 2 (timeout 300ms)"),
            std::string::npos)
      << comm.status();
}

TEST(GlooCommunicator, CollectiveTimesOutWhenAPeerDoesNotJoinAndStaysBroken) {
  Watchdog watchdog(absl::Seconds(10), "barrier without a peer");
  gloo::rendezvous::HashStore store;
  std::promise<void> rank0_done;
  std::thread rank1([&] {
    auto comm = GlooCommunicator::Connect(Options(1, 2, absl::Milliseconds(300)), store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    rank0_done.get_future().wait();  // stays connected but never joins the barrier
  });
  auto comm = GlooCommunicator::Connect(Options(0, 2, absl::Milliseconds(300)), store);
  ASSERT_TRUE(comm.ok()) << comm.status();
  absl::Status status = (*comm)->Barrier();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("Barrier on gloo rank 0/2 via 127.0.0.1"), std::string::npos)
      << status;
  std::vector<float> data(3);
  absl::Status after = (*comm)->AllReduceSum(absl::MakeSpan(data));
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_NE(after.message().find("broken by an earlier failure"), std::string::npos) << after;
  rank0_done.set_value();
  rank1.join();
}

// A cold start (issue 38): a rank that arrives late, and a first collective a peer joins late,
// stay within the startup timeout though past the collective timeout; once warm, a collective
// a peer joins as late fails at the collective timeout.
TEST(GlooCommunicator, StartupTimeoutBoundsTheConnectAndTheFirstCollectiveOnly) {
  Watchdog watchdog(absl::Seconds(20), "late joiner");
  gloo::rendezvous::HashStore store;
  GlooOptions options = Options(0, 2, absl::Milliseconds(300));
  options.startup_timeout = absl::Seconds(5);
  std::promise<void> rank0_done;
  std::thread rank1([&] {
    absl::SleepFor(absl::Milliseconds(900));  // joins three collective timeouts late
    GlooOptions mine = options;
    mine.rank = 1;
    auto comm = GlooCommunicator::Connect(mine, store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    absl::SleepFor(absl::Milliseconds(900));  // and is as late to the first collective
    ASSERT_TRUE((*comm)->Barrier().ok());
    rank0_done.get_future().wait();  // never joins a second one
  });
  auto comm = GlooCommunicator::Connect(options, store);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const absl::Status first = (*comm)->Barrier();
  EXPECT_TRUE(first.ok()) << first;
  const absl::Time start = absl::Now();
  const absl::Status second = (*comm)->Barrier();
  EXPECT_EQ(second.code(), absl::StatusCode::kDeadlineExceeded) << second;
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "the warm timeout, not the startup one";
  rank0_done.set_value();
  rank1.join();
}

TEST(GlooCommunicator, VerifiedCollectivesTurnSizeMismatchIntoInvalidArgument) {
  Watchdog watchdog(absl::Seconds(20), "mismatched all-reduce");
  gloo::rendezvous::HashStore store;
  std::vector<absl::Status> mismatch(2), after(2);
  std::vector<float> sums(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions options = Options(rank, 2);
      options.verify_collectives = true;
      auto comm = GlooCommunicator::Connect(options, store);
      if (!comm.ok()) {
        mismatch[rank] = comm.status();
        return;
      }
      std::vector<float> data(1000 + rank, 1.0f);
      mismatch[rank] = (*comm)->AllReduceSum(absl::MakeSpan(data));
      // Nothing was sent for the refused call, so the ranks are still in step.
      std::vector<float> one = {static_cast<float>(rank + 1)};
      after[rank] = (*comm)->AllReduceSum(absl::MakeSpan(one));
      sums[rank] = one[0];
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatch[0].code(), absl::StatusCode::kInvalidArgument) << mismatch[0];
  EXPECT_NE(mismatch[0].message().find(
                "AllReduceSum on gloo rank 0/2 via 127.0.0.1: ranks disagree: this rank called "
                "collective #1 with 1000 elements and root 0, rank 1 called collective #1 with "
                "1001 elements"),
            std::string::npos)
      << mismatch[0];
  EXPECT_EQ(mismatch[1].code(), absl::StatusCode::kInvalidArgument) << mismatch[1];
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(after[rank].ok()) << after[rank];
    EXPECT_EQ(sums[rank], 3.0f);
  }
}

TEST(GlooCommunicator, RejectsBadOptionsAndArgumentsLocally) {
  gloo::rendezvous::HashStore store;
  auto bad_rank = GlooCommunicator::Connect(Options(2, 2), store);
  EXPECT_EQ(bad_rank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_rank.status().message(), "GlooOptions.rank is 2, must be in [0, 2)");
  auto single = GlooCommunicator::Connect(Options(0, 1), store);
  ASSERT_TRUE(single.ok()) << single.status();
  std::vector<float> in = {1, 2}, out(2);
  ASSERT_TRUE((*single)->AllGather(in, absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, in);
  std::vector<uint8_t> bytes(2);
  EXPECT_EQ((*single)->Broadcast(absl::MakeSpan(bytes), 1).code(),
            absl::StatusCode::kInvalidArgument);
}

std::vector<std::unique_ptr<Communicator>> ConnectGloo(int world_size, bool verify,
                                                       absl::Duration timeout = absl::Seconds(20)) {
  gloo::rendezvous::HashStore store;
  std::vector<std::unique_ptr<Communicator>> comms(world_size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      GlooOptions options = Options(rank, world_size, timeout);
      options.verify_collectives = verify;
      auto comm = GlooCommunicator::Connect(options, store);
      EXPECT_TRUE(comm.ok()) << "rank " << rank << ": " << comm.status();
      if (comm.ok()) comms[rank] = *std::move(comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

// Rank p sends kSends[p][q] elements to rank q: a zero pair, own pieces, no two alike.
const AllToAllCounts kSends = {{5, 0, 48}, {16, 53, 27}, {342, 64, 0}};

TEST(GlooCommunicator, AllToAllPutsEveryPieceAtItsOffset) {
  Watchdog watchdog(absl::Seconds(30), "Gloo all-to-all");
  for (bool verify : {false, true}) {
    std::vector<std::unique_ptr<Communicator>> comms = ConnectGloo(3, verify);
    ASSERT_TRUE(comms[0] && comms[1] && comms[2]);
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI32}) {
      AllToAllRun run = RunAllToAll(comms, kSends, dtype);
      for (int r = 0; r < 3; ++r) {
        ASSERT_TRUE(run.status[r].ok()) << run.status[r];
        EXPECT_TRUE(run.out[r] == ExpectedAllToAll(kSends, r, BlockBytes(dtype)))
            << "rank " << r << " " << DTypeName(dtype) << " verify " << verify;
      }
    }
    const AllToAllCounts zeros(3, std::vector<int64_t>(3, 0));
    AllToAllRun run = RunAllToAll(comms, zeros, DType::kF16);
    for (int r = 0; r < 3; ++r) {
      ASSERT_TRUE(run.status[r].ok()) << run.status[r];
      EXPECT_EQ(run.out[r], std::vector<uint8_t>(kAllToAllGuardBytes, kAllToAllPoison));
    }
  }
}

TEST(GlooCommunicator, VerifiedAllToAllCountsThatDoNotPairUpAreInvalidArgumentEverywhere) {
  Watchdog watchdog(absl::Seconds(30), "mismatched Gloo all-to-all");
  std::vector<std::unique_ptr<Communicator>> comms = ConnectGloo(3, /*verify=*/true);
  ASSERT_TRUE(comms[0] && comms[1] && comms[2]);
  AllToAllCounts expects = {{5, 16, 342}, {0, 53, 64}, {48, 27, 0}};  // kSends transposed
  expects[0][2] = 340;  // rank 0 expects 2 elements fewer from rank 2 than it sends
  AllToAllRun run = RunAllToAll(comms, kSends, DType::kF32, &expects);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(run.status[r].code(), absl::StatusCode::kInvalidArgument) << run.status[r];
    EXPECT_EQ(run.status[r].message(),
              absl::StrCat("AllToAll on gloo rank ", r,
                           "/3 via 127.0.0.1: ranks disagree: "
                           "rank 2 sends 342 elements to rank 0, which expects 340"));
    EXPECT_TRUE(run.out[r] == std::vector<uint8_t>(run.out[r].size(), kAllToAllPoison));
  }
  // Nothing was sent for the refused call: the ranks are still in step.
  run = RunAllToAll(comms, kSends, DType::kF32);
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    EXPECT_TRUE(run.out[r] == ExpectedAllToAll(kSends, r, 4)) << "rank " << r;
  }
  // Another collective against an all-to-all.
  std::vector<absl::Status> other(2);
  std::vector<std::unique_ptr<Communicator>> pair = ConnectGloo(2, /*verify=*/true);
  ASSERT_TRUE(pair[0] && pair[1]);
  std::thread rank1([&] {
    std::vector<float> data(3);
    other[1] = pair[1]->AllReduceSum(absl::MakeSpan(data));
  });
  std::vector<float> in(2), out(2);
  const std::vector<int64_t> ones = {1, 1};
  other[0] = pair[0]->AllToAll(in.data(), ones, out.data(), ones, DType::kF32);
  rank1.join();
  EXPECT_EQ(other[0].code(), absl::StatusCode::kInvalidArgument) << other[0];
  EXPECT_EQ(other[0].message(),
            "AllToAll on gloo rank 0/2 via 127.0.0.1: ranks disagree: this rank called AllToAll "
            "of 4-byte elements, rank 1 called collective #1 with 3 elements and root 0");
  EXPECT_EQ(other[1].code(), absl::StatusCode::kInvalidArgument) << other[1];
}

TEST(GlooCommunicator, AllToAllRefusesBadCountsLocallyAndTheRanksStayInStep) {
  Watchdog watchdog(absl::Seconds(30), "bad Gloo all-to-all counts");
  std::vector<std::unique_ptr<Communicator>> comms = ConnectGloo(2, /*verify=*/false);
  ASSERT_TRUE(comms[0] && comms[1]);
  std::vector<uint8_t> in(64), out(64);
  const std::vector<int64_t> two = {1, 1}, three = {1, 1, 1}, negative = {1, -1}, own = {2, 1};
  EXPECT_EQ(comms[0]->AllToAll(in.data(), three, out.data(), two, DType::kF32).message(),
            "AllToAll: send_counts has 3 entries, expected one per rank (2)");
  EXPECT_EQ(comms[0]->AllToAll(in.data(), negative, out.data(), two, DType::kF32).message(),
            "AllToAll: send_counts[1] is -1, below 0");
  EXPECT_EQ(comms[0]->AllToAll(in.data(), two, out.data(), two, DType::kQ5_K).message(),
            "AllToAll: Q5_K is block-quantized; it moves whole elements");
  // Unverified, Gloo cannot see a peer's counts, but this rank's own piece it can check.
  absl::Status self = comms[0]->AllToAll(in.data(), own, out.data(), two, DType::kF32);
  EXPECT_EQ(self.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(self.message(),
            "AllToAll on gloo rank 0/2 via 127.0.0.1: this rank sends itself 2 elements but "
            "expects 1");
  AllToAllRun run = RunAllToAll(comms, {{1, 2}, {3, 4}}, DType::kF32);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(run.status[r].ok()) << run.status[r];
    EXPECT_TRUE(run.out[r] == ExpectedAllToAll({{1, 2}, {3, 4}}, r, 4));
  }
  gloo::rendezvous::HashStore store;
  auto single = GlooCommunicator::Connect(Options(0, 1), store);
  ASSERT_TRUE(single.ok()) << single.status();
  std::vector<float> mine = {1, 2}, exchanged(2);
  const std::vector<int64_t> counts = {2};
  ASSERT_TRUE((*single)->AllToAll(mine.data(), counts, exchanged.data(), counts, DType::kF32).ok());
  EXPECT_EQ(exchanged, mine);
}

TEST(GlooCommunicator, AllToAllTimesOutWhenAPeerDoesNotJoinAndStaysBroken) {
  Watchdog watchdog(absl::Seconds(10), "all-to-all without a peer");
  gloo::rendezvous::HashStore store;
  std::promise<void> rank0_done;
  std::thread rank1([&] {
    auto comm = GlooCommunicator::Connect(Options(1, 2, absl::Milliseconds(300)), store);
    ASSERT_TRUE(comm.ok()) << comm.status();
    rank0_done.get_future().wait();  // stays connected but never joins the all-to-all
  });
  auto comm = GlooCommunicator::Connect(Options(0, 2, absl::Milliseconds(300)), store);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> in(5), out(5);
  const std::vector<int64_t> send = {2, 3}, recv = {2, 3};
  const absl::Time start = absl::Now();
  absl::Status status = (*comm)->AllToAll(in.data(), send, out.data(), recv, DType::kF32);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("AllToAll on gloo rank 0/2 via 127.0.0.1"), std::string::npos)
      << status;
  EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kUnavailable);
  rank0_done.set_value();
  rank1.join();
}

// ---- Ranks as separate processes (fork), meeting through a FileStore in $TEST_TMPDIR.

TEST(GlooCommunicatorProcesses, TwoProcessesMatchInProcessBitwise) {
  const std::string dir = TestDir("gloo_file_store");
  const std::vector<size_t> sizes = {1, 576, 1001};
  const std::vector<std::string> results = RunWorkloadInProcesses(2, sizes, dir, [&](int rank) {
    return AsCommunicator(
        GlooCommunicator::ConnectWithFileStore(Options(rank, 2), dir, "collectives"));
  });
  std::vector<CollectiveResults> reference = RunInProcess(2, sizes);
  ExpectAllOk(reference);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(results[rank] == reference[rank].Serialize())
        << "rank " << rank << ": " << results[rank].substr(0, 200);
  }
}

TEST(GlooCommunicatorProcesses, SurvivorOfASigkilledPeerGetsAnErrorWithinTheTimeout) {
  const std::string dir = TestDir("gloo_kill");
  const absl::Duration timeout = absl::Seconds(2);
  std::vector<float> data(4096, 1.0f);
  const pid_t victim = fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    auto comm = GlooCommunicator::ConnectWithFileStore(Options(1, 2, timeout), dir, "kill");
    if (!comm.ok()) _exit(2);
    while ((*comm)->AllReduceSum(absl::MakeSpan(data)).ok()) {
    }
    _exit(0);
  }
  auto comm = GlooCommunicator::ConnectWithFileStore(Options(0, 2, timeout), dir, "kill");
  ASSERT_TRUE(comm.ok()) << comm.status();
  // A write to the dead peer must fail with EPIPE, not kill this process.
  struct sigaction sigpipe {};
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &sigpipe), 0);
  EXPECT_EQ(sigpipe.sa_handler, SIG_IGN);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*comm)->AllReduceSum(absl::MakeSpan(data)).ok());

  Watchdog watchdog(absl::Seconds(10), "collective after the peer was SIGKILLed");
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  absl::Status status;
  int collectives_after_kill = 0;
  while (status.ok() && collectives_after_kill < 1000000) {
    status = (*comm)->AllReduceSum(absl::MakeSpan(data));
    ++collectives_after_kill;
  }
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kDeadlineExceeded)
      << status;
  EXPECT_NE(status.message().find("AllReduceSum on gloo rank 0/2"), std::string::npos) << status;
  int wait_status = 0;
  ASSERT_EQ(waitpid(victim, &wait_status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) << wait_status;
  EXPECT_EQ((*comm)->Barrier().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tpserve
