#include "comm/comm_test_util.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "comm/in_process_communicator.h"

namespace tpserve {

float RankValue(int rank, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * 1000.0 /
                            (rank + 1));
}

std::string CollectiveResults::Serialize() const {
  std::string bytes;
  for (const auto& v : reduced) bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  for (const auto& v : gathered) {
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
  for (const auto& v : received) bytes.append(reinterpret_cast<const char*>(v.data()), v.size());
  return bytes;
}

CollectiveResults RunWorkload(Communicator& comm, const std::vector<size_t>& sizes) {
  CollectiveResults results;
  const int rank = comm.rank();
  const int world = comm.world_size();
  for (size_t n : sizes) {
    std::vector<float> mine(n);
    for (size_t i = 0; i < n; ++i) mine[i] = RankValue(rank, i);
    std::vector<float> reduced = mine;
    results.status = comm.AllReduceSum(absl::MakeSpan(reduced));
    if (!results.status.ok()) return results;
    results.reduced.push_back(std::move(reduced));
    std::vector<float> gathered(world * n, -1.0f);
    results.status = comm.AllGather(mine, absl::MakeSpan(gathered));
    if (!results.status.ok()) return results;
    results.gathered.push_back(std::move(gathered));
  }
  for (int root = 0; root < world; ++root) {
    std::vector<uint8_t> bytes(kBroadcastBytes);
    for (size_t i = 0; i < kBroadcastBytes; ++i) bytes[i] = static_cast<uint8_t>(rank * 31 + i);
    results.status = comm.Broadcast(absl::MakeSpan(bytes), root);
    if (!results.status.ok()) return results;
    results.received.push_back(std::move(bytes));
  }
  results.status = comm.Barrier();
  return results;
}

std::vector<CollectiveResults> RunOnThreads(
    int world_size, const std::vector<size_t>& sizes,
    const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& connect) {
  std::vector<CollectiveResults> results(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = connect(r);
      if (!comm.ok()) {
        results[r].status = comm.status();
        return;
      }
      results[r] = RunWorkload(**comm, sizes);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

Watchdog::Watchdog(absl::Duration limit, std::string what) {
  thread_ = std::make_unique<std::thread>([this, limit, what = std::move(what)] {
    if (!done_.WaitForNotificationWithTimeout(limit)) {
      std::fprintf(stderr, "WATCHDOG: %s did not finish within %s; aborting\n", what.c_str(),
                   absl::FormatDuration(limit).c_str());
      std::abort();
    }
  });
}

Watchdog::~Watchdog() {
  done_.Notify();
  thread_->join();
}

std::vector<CollectiveResults> RunInProcess(int world_size, const std::vector<size_t>& sizes) {
  auto group = std::make_shared<InProcessGroup>(world_size);
  return RunOnThreads(world_size, sizes, [&](int rank) {
    return absl::StatusOr<std::unique_ptr<Communicator>>(
        std::make_unique<InProcessCommunicator>(group, rank));
  });
}

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name + "_" + std::to_string(getpid());
}

std::vector<std::string> RunWorkloadInProcesses(
    int world_size, const std::vector<size_t>& sizes, const std::string& dir,
    const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& connect,
    absl::Duration limit) {
  std::filesystem::create_directories(dir);
  auto result_path = [&](int rank) { return dir + "/result_" + std::to_string(rank); };
  std::vector<pid_t> children;
  for (int rank = 0; rank < world_size; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) std::abort();
    if (pid == 0) {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = connect(rank);
      std::string out;
      if (!comm.ok()) {
        out = "connect: " + comm.status().ToString();
      } else {
        CollectiveResults results = RunWorkload(**comm, sizes);
        out = results.status.ok() ? results.Serialize() : results.status.ToString();
      }
      std::ofstream(result_path(rank), std::ios::binary) << out;
      _exit(0);
    }
    children.push_back(pid);
  }
  {
    Watchdog watchdog(limit, std::to_string(world_size) + " ranks as processes");
    for (pid_t child : children) waitpid(child, nullptr, 0);
  }
  std::vector<std::string> results;
  for (int rank = 0; rank < world_size; ++rank) {
    std::ifstream in(result_path(rank), std::ios::binary);
    results.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return results;
}

}  // namespace tpserve
