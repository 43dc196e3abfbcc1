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

std::string CollectiveResults::SerializeCommon() const {
  std::string bytes;
  for (const auto& v : reduced) bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  for (const auto& v : gathered) {
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
  for (const auto& v : received) bytes.append(reinterpret_cast<const char*>(v.data()), v.size());
  return bytes;
}

std::string CollectiveResults::Serialize() const {
  std::string bytes = SerializeCommon();
  for (const auto& v : exchanged) {
    bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  }
  for (const auto& v : rooted) bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return bytes;
}

int64_t WorkloadAllToAllCount(int from, int to, size_t n) {
  if (from == 1 && to == 0) return 0;
  return static_cast<int64_t>(n * (1 + 4 * from + to) / 8);
}

float WorkloadAllToAllValue(int from, int to, size_t i) { return RankValue(4 * from + to, i); }

std::vector<float> ExpectedWorkloadAllToAll(int rank, int world_size, size_t n) {
  std::vector<float> expected;
  for (int from = 0; from < world_size; ++from) {
    for (int64_t i = 0; i < WorkloadAllToAllCount(from, rank, n); ++i) {
      expected.push_back(WorkloadAllToAllValue(from, rank, i));
    }
  }
  return expected;
}

namespace {

// The workload's all-to-all for size n, appended to results.exchanged.
absl::Status WorkloadAllToAll(Communicator& comm, size_t n, CollectiveResults& results) {
  const int rank = comm.rank();
  const int world = comm.world_size();
  std::vector<int64_t> send_counts(world), recv_counts(world);
  std::vector<float> send;
  int64_t received = 0;
  for (int peer = 0; peer < world; ++peer) {
    send_counts[peer] = WorkloadAllToAllCount(rank, peer, n);
    recv_counts[peer] = WorkloadAllToAllCount(peer, rank, n);
    received += recv_counts[peer];
    for (int64_t i = 0; i < send_counts[peer]; ++i) {
      send.push_back(WorkloadAllToAllValue(rank, peer, i));
    }
  }
  std::vector<float> exchanged(received, -1.0f);
  absl::Status status =
      comm.AllToAll(send.data(), send_counts, exchanged.data(), recv_counts, DType::kF32);
  results.exchanged.push_back(std::move(exchanged));
  return status;
}

}  // namespace

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
    const int root = static_cast<int>(n % world);
    std::vector<float> rooted(rank == root ? world * n : 0, -1.0f);
    results.status = comm.Gather(mine.data(), static_cast<int64_t>(n), DType::kF32,
                                 rank == root ? rooted.data() : nullptr, root);
    if (!results.status.ok()) return results;
    results.rooted.push_back(std::move(rooted));
    results.status = WorkloadAllToAll(comm, n, results);
    if (!results.status.ok()) return results;
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

uint8_t AllToAllByte(int from, int to, size_t b) {
  return static_cast<uint8_t>(from * 131 + to * 37 + b * 7 + b / 251);
}

std::vector<uint8_t> AllToAllInput(const AllToAllCounts& counts, int rank, size_t elem_bytes) {
  std::vector<uint8_t> in;
  for (size_t to = 0; to < counts[rank].size(); ++to) {
    for (size_t b = 0; b < counts[rank][to] * elem_bytes; ++b) {
      in.push_back(AllToAllByte(rank, static_cast<int>(to), b));
    }
  }
  return in;
}

std::vector<uint8_t> ExpectedAllToAll(const AllToAllCounts& counts, int rank, size_t elem_bytes) {
  std::vector<uint8_t> out;
  for (size_t from = 0; from < counts.size(); ++from) {
    for (size_t b = 0; b < counts[from][rank] * elem_bytes; ++b) {
      out.push_back(AllToAllByte(static_cast<int>(from), rank, b));
    }
  }
  out.insert(out.end(), kAllToAllGuardBytes, kAllToAllPoison);
  return out;
}

AllToAllRun RunAllToAll(const std::vector<std::unique_ptr<Communicator>>& comms,
                        const AllToAllCounts& sends, DType dtype, const AllToAllCounts* expects) {
  const int world = static_cast<int>(comms.size());
  const size_t elem_bytes = static_cast<size_t>(BlockBytes(dtype));
  AllToAllRun run;
  run.status.resize(world);
  run.out.resize(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<int64_t> recv_counts(world);
    int64_t received = 0;
    for (int from = 0; from < world; ++from) {
      recv_counts[from] = expects != nullptr ? (*expects)[rank][from] : sends[from][rank];
      received += recv_counts[from];
    }
    run.out[rank].assign(received * elem_bytes + kAllToAllGuardBytes, kAllToAllPoison);
    threads.emplace_back([&, rank, recv_counts] {
      const std::vector<uint8_t> in = AllToAllInput(sends, rank, elem_bytes);
      run.status[rank] =
          comms[rank]->AllToAll(in.data(), sends[rank], run.out[rank].data(), recv_counts, dtype);
    });
  }
  for (auto& t : threads) t.join();
  return run;
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
