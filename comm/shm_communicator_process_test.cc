// ShmCommunicator with ranks as separate processes (fork), meeting through a FileStore in
// $TEST_TMPDIR, as the rank processes of a deployment do.
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "comm/comm_test_util.h"
#include "comm/in_process_communicator.h"
#include "comm/shm_communicator.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

// A run id no other test or test run uses (pids repeat in a sandbox's pid namespace), so
// /dev/shm can be searched for its segments.
std::string UniqueRunId(const std::string& test) {
  return test + "-" + std::to_string(getpid()) + "-" +
         std::to_string(absl::ToUnixNanos(absl::Now()));
}

int SegmentsOf(const std::string& run_id) {
  int found = 0;
  const std::string prefix = "tpserve-shm-" + run_id + "-";
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  while (dirent* entry = readdir(dir)) found += std::string(entry->d_name).rfind(prefix, 0) == 0;
  closedir(dir);
  return found;
}

ShmOptions Options(int rank, int world_size, const std::string& run_id, absl::Duration timeout) {
  ShmOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.timeout = timeout;
  options.run_id = run_id;
  options.max_bytes = 1024;  // 576 and 1001 floats go in pieces
  return options;
}

TEST(ShmCommunicatorProcesses, ThreeProcessesMatchInProcessBitwiseAndLeaveNoSegment) {
  constexpr int kWorld = 3;
  const std::string dir = TestDir("shm_file_store");
  const std::string run_id = UniqueRunId("processes");
  const std::vector<size_t> sizes = {1, 576, 1001, 16384};
  const std::vector<std::string> results =
      RunWorkloadInProcesses(kWorld, sizes, dir, [&](int rank) {
        return AsCommunicator(ShmCommunicator::ConnectWithFileStore(
            Options(rank, kWorld, run_id, absl::Seconds(20)), dir, run_id));
      });
  std::vector<CollectiveResults> reference = RunInProcess(kWorld, sizes);
  for (int rank = 0; rank < kWorld; ++rank) {
    ASSERT_TRUE(reference[rank].status.ok()) << reference[rank].status;
    EXPECT_TRUE(results[rank] == reference[rank].Serialize())
        << "rank " << rank << ": " << results[rank].substr(0, 200);
  }
  EXPECT_EQ(SegmentsOf(run_id), 0);
}

TEST(ShmCommunicatorProcesses, SurvivorOfASigkilledPeerNamesItWithinTheTimeout) {
  const std::string dir = TestDir("shm_kill");
  const std::string run_id = UniqueRunId("kill");
  const absl::Duration timeout = absl::Milliseconds(500);
  std::vector<float> data(4096, 1.0f);
  const pid_t victim = fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    auto comm = ShmCommunicator::ConnectWithFileStore(Options(1, 2, run_id, timeout), dir, run_id);
    if (!comm.ok()) _exit(2);
    while ((*comm)->AllReduceSum(absl::MakeSpan(data)).ok()) {
    }
    _exit(0);
  }
  auto comm = ShmCommunicator::ConnectWithFileStore(Options(0, 2, run_id, timeout), dir, run_id);
  ASSERT_TRUE(comm.ok()) << comm.status();
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*comm)->AllReduceSum(absl::MakeSpan(data)).ok());

  Watchdog watchdog(absl::Seconds(10), "collective after the peer was SIGKILLed");
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(waitpid(victim, &wait_status, 0), victim);
  EXPECT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL) << wait_status;
  // The victim may have published one more step before it died; then one call still completes.
  absl::Status status;
  int completed_after_kill = 0;
  absl::Time start;
  while (status.ok() && completed_after_kill < 3) {
    start = absl::Now();
    status = (*comm)->AllReduceSum(absl::MakeSpan(data));
    completed_after_kill += status.ok();
  }
  const absl::Duration waited = absl::Now() - start;
  EXPECT_LE(completed_after_kill, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("on rank 0: rank 1 of 2 did not arrive within 500 ms"),
            std::string::npos)
      << status;
  EXPECT_LT(waited, absl::Seconds(4));
  EXPECT_EQ(SegmentsOf(run_id), 0);
}

}  // namespace
}  // namespace tpserve
