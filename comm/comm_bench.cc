// All-reduce latency of the CPU communicators: in-process (threads), Gloo over TCP loopback and
// shared memory (shm), for messages from one hidden row of SmolLM2-135M (576 floats = 2304
// bytes) and 16384 floats (65536 bytes) up to 4 MB. Ranks are threads of this process, or with
// --processes separate processes (fork) meeting through a FileStore, as rank processes do.
// Not a test: timings vary with the machine and its load.
//
//   bazel run -c opt //comm:comm_bench -- --world_size=2,3,4 --seconds_per_size=0.3
//   bazel run -c opt //comm:comm_bench -- --world_size=2,3,4 --processes
//
// Each size: warm-up, then as many iterations as fit in --seconds_per_size (rank 0 decides and
// broadcasts the count); rank 0 times each iteration (the collective synchronises the ranks, so
// that is the collective's latency).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "comm/gloo_communicator.h"
#include "comm/in_process_communicator.h"
#include "comm/shm_communicator.h"
#include "gloo/rendezvous/hash_store.h"

ABSL_FLAG(std::vector<std::string>, world_size, {"2"}, "comma-separated rank counts, e.g. 2,3,4");
ABSL_FLAG(std::vector<std::string>, comms, std::vector<std::string>({"in_process", "gloo", "shm"}),
          "communicators to measure (in_process is skipped with --processes)");
ABSL_FLAG(std::vector<std::string>, sizes_bytes,
          std::vector<std::string>({"2304", "9216", "36864", "65536", "147456", "589824", "2359296",
                                    "4194304"}),
          "message sizes in bytes (multiples of 4)");
ABSL_FLAG(double, seconds_per_size, 0.3, "measuring time per message size and communicator");
ABSL_FLAG(bool, processes, false, "ranks as processes (fork + FileStore) instead of threads");
ABSL_FLAG(int64_t, shm_max_bytes, 1 << 20, "ShmOptions.max_bytes: slot size of the shm ranks");
ABSL_FLAG(int, shm_spin_iterations, -1, "ShmOptions.spin_iterations (-1: by CPU count)");
ABSL_FLAG(int64_t, shm_reduce_scatter_min_bytes, 32 << 10,
          "ShmOptions.reduce_scatter_min_bytes: all-reduces this large are split across ranks");

namespace tpserve {
namespace {

struct Latency {
  double p50_us = 0;
  double mean_us = 0;
  int iterations = 0;
};

using Connect = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>;

void DieIf(const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  std::exit(1);
}

// `iterations` all-reduces of `n` floats; rank 0's per-call times (others: empty).
std::vector<double> TimeAllReduces(Communicator& comm, size_t n, int iterations) {
  std::vector<float> data(n, 1.0f / static_cast<float>(comm.rank() + 1));
  std::vector<double> micros;
  for (int i = 0; i < iterations; ++i) {
    const absl::Time start = absl::Now();
    DieIf(comm.AllReduceSum(absl::MakeSpan(data)));
    if (comm.rank() == 0) micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  return micros;
}

// Runs on every rank, in step; returns rank 0's latency per size (others: zeros).
std::vector<Latency> BenchRank(Communicator& comm, const std::vector<size_t>& sizes_bytes,
                               double seconds) {
  std::vector<Latency> latencies;
  for (size_t bytes : sizes_bytes) {
    const size_t n = bytes / sizeof(float);
    const std::vector<double> warmup = TimeAllReduces(comm, n, 10);
    std::vector<int32_t> iterations = {0};
    if (comm.rank() == 0) {
      const double mean_warm = std::accumulate(warmup.begin() + 5, warmup.end(), 0.0) / 5;
      iterations[0] =
          std::clamp(static_cast<int>(seconds * 1e6 / std::max(mean_warm, 1.0)), 20, 20000);
    }
    DieIf(BroadcastInt32s(comm, absl::MakeSpan(iterations), 0));
    std::vector<double> micros = TimeAllReduces(comm, n, iterations[0]);
    Latency latency;
    latency.iterations = iterations[0];
    if (!micros.empty()) {
      latency.mean_us = std::accumulate(micros.begin(), micros.end(), 0.0) / micros.size();
      std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
      latency.p50_us = micros[micros.size() / 2];
    }
    latencies.push_back(latency);
  }
  return latencies;
}

std::vector<Latency> RunOnThreads(int world_size, const Connect& connect,
                                  const std::vector<size_t>& sizes, double seconds) {
  std::vector<std::unique_ptr<Communicator>> comms(world_size);
  std::vector<Latency> rank0;
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm = connect(r);
      DieIf(comm.status());
      std::vector<Latency> mine = BenchRank(**comm, sizes, seconds);
      if (r == 0) rank0 = std::move(mine);
      DieIf((*comm)->Barrier());  // no rank leaves while another still measures
    });
  }
  for (auto& t : threads) t.join();
  return rank0;
}

// Forks one process per rank; rank 0 sends its latencies back through a pipe.
std::vector<Latency> RunOnProcesses(int world_size, const Connect& connect,
                                    const std::vector<size_t>& sizes, double seconds) {
  int fds[2];
  if (pipe(fds) != 0) DieIf(absl::InternalError("pipe failed"));
  std::vector<pid_t> children;
  for (int r = 0; r < world_size; ++r) {
    const pid_t pid = fork();
    if (pid < 0) DieIf(absl::InternalError("fork failed"));
    if (pid == 0) {
      close(fds[0]);
      absl::StatusOr<std::unique_ptr<Communicator>> comm = connect(r);
      DieIf(comm.status());
      const std::vector<Latency> mine = BenchRank(**comm, sizes, seconds);
      DieIf((*comm)->Barrier());
      const size_t bytes = mine.size() * sizeof(Latency);
      if (r == 0 && write(fds[1], mine.data(), bytes) != static_cast<ssize_t>(bytes)) _exit(4);
      _exit(0);
    }
    children.push_back(pid);
  }
  close(fds[1]);
  std::vector<Latency> rank0(sizes.size());
  const size_t want = rank0.size() * sizeof(Latency);
  size_t got = 0;
  while (got < want) {
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(rank0.data()) + got, want - got);
    if (n <= 0) break;
    got += n;
  }
  close(fds[0]);
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      DieIf(absl::InternalError(absl::StrCat("rank process failed, status ", status)));
    }
  }
  if (got != want) DieIf(absl::InternalError("rank 0 sent no results"));
  return rank0;
}

Connect MakeConnect(const std::string& kind, int world_size, bool processes,
                    gloo::rendezvous::Store& hash_store, const std::string& store_dir) {
  const std::string run_id = absl::StrCat("bench-", kind, "-", world_size, "-", getpid(), "-",
                                          absl::ToUnixNanos(absl::Now()));
  if (kind == "in_process") {
    auto group = std::make_shared<InProcessGroup>(world_size);
    return [group](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      return std::make_unique<InProcessCommunicator>(group, rank);
    };
  }
  if (kind == "gloo") {
    return [=, &hash_store](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      GlooOptions options{.rank = rank, .world_size = world_size};
      auto comm = processes ? GlooCommunicator::ConnectWithFileStore(options, store_dir, run_id)
                            : GlooCommunicator::Connect(options, hash_store);
      if (!comm.ok()) return comm.status();
      return std::unique_ptr<Communicator>(*std::move(comm));
    };
  }
  if (kind == "shm") {
    return [=, &hash_store](int rank) -> absl::StatusOr<std::unique_ptr<Communicator>> {
      ShmOptions options{.rank = rank, .world_size = world_size, .run_id = run_id};
      options.max_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_shm_max_bytes));
      options.spin_iterations = absl::GetFlag(FLAGS_shm_spin_iterations);
      options.reduce_scatter_min_bytes =
          static_cast<size_t>(absl::GetFlag(FLAGS_shm_reduce_scatter_min_bytes));
      auto comm = processes ? ShmCommunicator::ConnectWithFileStore(options, store_dir, run_id)
                            : ShmCommunicator::Connect(options, hash_store);
      if (!comm.ok()) return comm.status();
      return std::unique_ptr<Communicator>(*std::move(comm));
    };
  }
  DieIf(absl::InvalidArgumentError(absl::StrCat("--comms: unknown communicator '", kind, "'")));
  return nullptr;
}

std::vector<int> ParseInts(const std::vector<std::string>& texts, const char* flag) {
  std::vector<int> values;
  for (const std::string& text : texts) {
    int value = 0;
    if (!absl::SimpleAtoi(text, &value) || value < 1) {
      DieIf(absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", text, "' is not >= 1")));
    }
    values.push_back(value);
  }
  return values;
}

int Main() {
  const bool processes = absl::GetFlag(FLAGS_processes);
  const double seconds = absl::GetFlag(FLAGS_seconds_per_size);
  std::vector<size_t> sizes;
  for (int bytes : ParseInts(absl::GetFlag(FLAGS_sizes_bytes), "sizes_bytes")) {
    sizes.push_back(static_cast<size_t>(bytes) / sizeof(float) * sizeof(float));
  }
  std::vector<std::string> kinds;
  for (const std::string& kind : absl::GetFlag(FLAGS_comms)) {
    if (!(processes && kind == "in_process")) kinds.push_back(kind);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string store_dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/comm_bench_store_", getpid());
  for (int world_size : ParseInts(absl::GetFlag(FLAGS_world_size), "world_size")) {
    std::vector<std::vector<Latency>> table;
    for (const std::string& kind : kinds) {
      gloo::rendezvous::HashStore hash_store;
      const Connect connect = MakeConnect(kind, world_size, processes, hash_store, store_dir);
      table.push_back(processes ? RunOnProcesses(world_size, connect, sizes, seconds)
                                : RunOnThreads(world_size, connect, sizes, seconds));
    }
    std::printf(
        "\nall-reduce sum of float32, %d ranks as %s; latency in microseconds: p50 and mean "
        "over N calls\n%9s %8s",
        world_size, processes ? "processes" : "threads", "bytes", "floats");
    for (const std::string& kind : kinds) {
      std::printf(" | %10s_p50 %8s %6s", kind.c_str(), "mean", "N");
    }
    const auto gloo = std::find(kinds.begin(), kinds.end(), "gloo");
    const auto shm = std::find(kinds.begin(), kinds.end(), "shm");
    const bool ratio = gloo != kinds.end() && shm != kinds.end();
    std::printf(ratio ? " | gloo/shm\n" : "\n");
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::printf("%9zu %8zu", sizes[s], sizes[s] / sizeof(float));
      for (const auto& column : table) {
        std::printf(" | %14.1f %8.1f %6d", column[s].p50_us, column[s].mean_us,
                    column[s].iterations);
      }
      if (ratio) {
        std::printf(" | %7.1fx",
                    table[gloo - kinds.begin()][s].p50_us / table[shm - kinds.begin()][s].p50_us);
      }
      std::printf("\n");
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);  // the FileStore keys of --processes
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
