// All-reduce latency of the CPU communicators: in-process (threads) and Gloo over TCP loopback,
// two ranks as threads of this process, for messages from one hidden row of SmolLM2-135M
// (576 floats = 2304 bytes) up to 4 MB. Not a test: timings vary with the machine and its load.
//
//   bazel run -c opt //worker/comm:comm_bench -- --world_size=2 --seconds_per_size=0.3
//
// Each size: warm-up, then as many iterations as fit in --seconds_per_size; rank 0 times each
// iteration (the collective synchronises the ranks, so that is the collective's latency).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_process_communicator.h"

ABSL_FLAG(int, world_size, 2, "ranks (threads)");
ABSL_FLAG(double, seconds_per_size, 0.3, "measuring time per message size and communicator");

namespace tpserve {
namespace {

using Comms = std::vector<std::unique_ptr<Communicator>>;

struct Latency {
  double p50_us = 0;
  double mean_us = 0;
  int iterations = 0;
};

// Runs `iterations` all-reduces of `n` floats on every rank; returns rank 0's per-call times.
std::vector<double> RunAllReduces(Comms& comms, size_t n, int iterations) {
  std::vector<double> micros;
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> data(n, 1.0f / static_cast<float>(r + 1));
      for (int i = 0; i < iterations; ++i) {
        const absl::Time start = absl::Now();
        absl::Status status = comms[r]->AllReduceSum(absl::MakeSpan(data));
        if (!status.ok()) {
          std::fprintf(stderr, "%s\n", status.ToString().c_str());
          std::exit(1);
        }
        if (r == 0) micros.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      }
    });
  }
  for (auto& t : threads) t.join();
  return micros;
}

Latency Measure(Comms& comms, size_t n, double seconds) {
  std::vector<double> warmup = RunAllReduces(comms, n, 10);
  const double mean_warm = std::accumulate(warmup.begin() + 5, warmup.end(), 0.0) / 5;
  const int iterations =
      std::clamp(static_cast<int>(seconds * 1e6 / std::max(mean_warm, 1.0)), 20, 20000);
  std::vector<double> micros = RunAllReduces(comms, n, iterations);
  Latency latency;
  latency.iterations = iterations;
  latency.mean_us = std::accumulate(micros.begin(), micros.end(), 0.0) / micros.size();
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
  latency.p50_us = micros[micros.size() / 2];
  return latency;
}

Comms MakeInProcess(int world_size) {
  auto group = std::make_shared<InProcessGroup>(world_size);
  Comms comms;
  for (int r = 0; r < world_size; ++r) {
    comms.push_back(std::make_unique<InProcessCommunicator>(group, r));
  }
  return comms;
}

Comms MakeGloo(int world_size, gloo::rendezvous::Store& store) {
  Comms comms(world_size);
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      GlooOptions options;
      options.rank = r;
      options.world_size = world_size;
      auto comm = GlooCommunicator::Connect(options, store);
      if (!comm.ok()) {
        std::fprintf(stderr, "%s\n", comm.status().ToString().c_str());
        std::exit(1);
      }
      comms[r] = std::move(*comm);
    });
  }
  for (auto& t : threads) t.join();
  return comms;
}

int Main() {
  const int world_size = absl::GetFlag(FLAGS_world_size);
  const double seconds = absl::GetFlag(FLAGS_seconds_per_size);
  Comms in_process = MakeInProcess(world_size);
  gloo::rendezvous::HashStore store;
  Comms gloo = MakeGloo(world_size, store);
  std::printf(
      "all-reduce sum of float32, %d ranks as threads; latency in microseconds "
      "(p50 / mean over N calls), algbw = bytes / p50\n",
      world_size);
  std::printf("%9s %8s | %11s %11s %6s | %11s %11s %6s %9s\n", "bytes", "floats", "inproc_p50",
              "inproc_mean", "N", "gloo_p50", "gloo_mean", "N", "gloo_GB/s");
  for (size_t bytes : {2304, 9216, 36864, 147456, 589824, 2359296, 4194304}) {
    const size_t n = bytes / sizeof(float);
    const Latency a = Measure(in_process, n, seconds);
    const Latency b = Measure(gloo, n, seconds);
    std::printf("%9zu %8zu | %11.1f %11.1f %6d | %11.1f %11.1f %6d %9.2f\n", bytes, n, a.p50_us,
                a.mean_us, a.iterations, b.p50_us, b.mean_us, b.iterations,
                static_cast<double>(bytes) / (b.p50_us * 1e3));
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
