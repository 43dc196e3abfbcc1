// Micro-benchmark of CpuBackend::MatMul for each weight format: time per call, the weight
// bytes streamed per second and GFLOP/s, at m = 1, 2, 4, 5, 8 and 16 rows, for each thread
// count, with each m's cost over m = 1's (x_m1: what verifying drafts or batching streams
// costs) and the roofline of the same run (kernels/cpu/roofline_probe.h): the DRAM read rate
// and the AVX2 FMA rate, and roof_us, the time a call cannot beat (its weight bytes at the DRAM
// rate, or its FLOPs at the FMA rate, whichever is longer). Not a test: timings are only
// printed (docs/PERFORMANCE.md).
//
//   bazel run -c opt //kernels/cpu:matmul_bench -- --threads=1,2 --shapes=4096x4096,576x1536
//
// Each figure is the best of --repeats timed runs of at least --min_seconds each (the machine is
// shared; the best run is the least disturbed one). Beside wall time per call, cpu_us is the
// process CPU time per call summed over threads: on a machine shared with other jobs it
// stays close to the undisturbed cost, where wall time also counts the waits for a core.
// Weights are Gaussian, quantized by QuantizeWeights, so every format multiplies the same
// matrix. The format "bf16-onednn" is bf16 through kernels/cpu/onednn_bf16_matmul (activations
// rounded to bf16, one packed slice per thread), on CPUs where oneDNN has AVX-512 BF16.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/onednn_bf16_matmul.h"
#include "kernels/cpu/roofline_probe.h"
#include "kernels/quantize_weights.h"

ABSL_FLAG(std::string, formats, "f32,bf16,q4_1,q4_k,fp8,fp8-block,int4-g128",
          "comma-separated weight formats (names as ParseTensorFormat)");
ABSL_FLAG(std::string, shapes, "4096x4096,576x1536", "comma-separated NxK (out x in features)");
ABSL_FLAG(std::string, tokens, "1,2,4,5,8,16", "comma-separated activation row counts m");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated thread counts");
ABSL_FLAG(bool, placed, true,
          "multiply each matrix as the engine holds it, placed for MatMul (CpuBackend::"
          "PlaceWeight: Q8_0, Q4_0/1, Q5_0/1 interleaved in row groups); false: its stored form");
ABSL_FLAG(int, repeats, 5, "timed runs per figure; the best is reported");
ABSL_FLAG(double, min_seconds, 0.2, "minimum length of one timed run");

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view t : absl::StrSplit(s, ',')) {
    int64_t v = 0;
    if (absl::SimpleAtoi(t, &v) && v > 0) out.push_back(v);
  }
  return out;
}

std::vector<float> Random(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct PerCall {
  double wall_s = 1e30;  // best run's wall time per call
  double cpu_s = 1e30;   // best run's process CPU time per call
};

// The best of `repeats` runs of `call`, each long enough to time reliably.
PerCall TimePerCall(const std::function<void()>& call) {
  call();  // warm up: scratch buffers, caches, pages
  PerCall best;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    int64_t calls = 0;
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < absl::GetFlag(FLAGS_min_seconds));
    best.wall_s = std::min(best.wall_s, elapsed / calls);
    best.cpu_s = std::min(best.cpu_s, (ProcessCpuSeconds() - cpu0) / calls);
  }
  return best;
}

int Main() {
  const std::vector<int64_t> tokens = ParseList(absl::GetFlag(FLAGS_tokens));
  const std::vector<int64_t> threads = ParseList(absl::GetFlag(FLAGS_threads));
  std::vector<double> dram_gbs, fma_gflops;  // per thread count, this run
  for (int64_t t : threads) {
    dram_gbs.push_back(DramReadGBs(static_cast<int>(t)));
    fma_gflops.push_back(FmaPeakGflops(static_cast<int>(t)));
    std::printf("roofline, %lld thread(s): DRAM read %.2f GB/s, AVX2 FMA %.1f GFLOP/s\n",
                static_cast<long long>(t), dram_gbs.back(), fma_gflops.back());
  }
  std::printf("%-10s %-10s %4s %3s %10s %8s %8s %10s %6s %9s\n", "shape", "format", "m", "thr",
              "us/call", "GB/s", "GFLOP/s", "cpu_us", "x_m1", "roof_us");
  for (absl::string_view shape : absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',')) {
    const std::vector<std::string> dims = absl::StrSplit(shape, 'x');
    int64_t n = 0, k = 0;
    if (dims.size() != 2 || !absl::SimpleAtoi(dims[0], &n) || !absl::SimpleAtoi(dims[1], &k)) {
      std::fprintf(stderr, "bad --shapes entry \"%s\"\n", std::string(shape).c_str());
      return 1;
    }
    const std::vector<float> w = Random(n * k, 1, 0.02f);
    const int64_t max_m = *std::max_element(tokens.begin(), tokens.end());
    const std::vector<float> x = Random(max_m * k, 2, 1.0f);
    std::vector<float> y(max_m * n);
    for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_formats), ',')) {
      const bool onednn = name == "bf16-onednn";
      if (onednn && !OneDnnBf16MatMul::Supported()) {
        std::printf("%-10s %-10s skipped: oneDNN has no AVX-512 BF16 on this CPU\n",
                    std::string(shape).c_str(), std::string(name).c_str());
        continue;
      }
      const absl::StatusOr<TensorFormat> format =
          ParseTensorFormat(onednn ? std::string("bf16") : std::string(name));
      if (!format.ok() || !MatrixBytes(*format, n, k, "bench").ok() ||
          k % InputBlockValues(*format) != 0) {
        std::printf("%-10s %-10s skipped: not a valid format for this shape\n",
                    std::string(shape).c_str(), std::string(name).c_str());
        continue;
      }
      const HostMatrix wq = QuantizeWeights(*format, w.data(), n, k);
      const double bytes = static_cast<double>(WeightMatrixBytes(wq.matrix));
      for (size_t ti = 0; ti < threads.size(); ++ti) {
        const int64_t t = threads[ti];
        CpuBackend backend(CpuBackendOptions{.num_threads = static_cast<int>(t)});
        absl::StatusOr<PlacedWeight> placed =
            absl::GetFlag(FLAGS_placed)
                ? backend.PlaceWeight(wq, WeightUse::kMatMul, "bench weights")
                : PlaceStoredWeight(backend, wq, "bench weights");
        if (!placed.ok()) {
          std::fprintf(stderr, "%s\n", std::string(placed.status().message()).c_str());
          return 1;
        }
        ThreadPool pool(static_cast<int>(t));
        std::unique_ptr<OneDnnBf16MatMul> packed;
        if (onednn) {
          absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> made =
              OneDnnBf16MatMul::Pack(wq.matrix, static_cast<int>(t));
          if (!made.ok()) {
            std::fprintf(stderr, "%s\n", std::string(made.status().message()).c_str());
            return 1;
          }
          packed = *std::move(made);
        }
        double one_row_s = 0;  // m = 1's time, when m = 1 is timed first
        for (int64_t m : tokens) {
          const PerCall p = TimePerCall([&] {
            if (packed != nullptr) {
              packed->Run(x.data(), m, y.data(), &pool).IgnoreError();  // checked by its test
            } else {
              backend.MatMul(x.data(), m, placed->matrix, y.data(), DType::kF32);
            }
          });
          if (m == 1) one_row_s = p.wall_s;
          const double flops = 2.0 * m * n * k;
          const double roof_s = std::max(bytes / (dram_gbs[ti] * 1e9),
                                         fma_gflops[ti] > 0 ? flops / (fma_gflops[ti] * 1e9) : 0);
          std::printf("%-10s %-10s %4lld %3lld %10.1f %8.2f %8.2f %10.1f %6.2f %9.1f\n",
                      std::string(shape).c_str(), std::string(name).c_str(),
                      static_cast<long long>(m), static_cast<long long>(t), p.wall_s * 1e6,
                      bytes / p.wall_s * 1e-9, flops / p.wall_s * 1e-9, p.cpu_s * 1e6,
                      one_row_s > 0 ? p.wall_s / one_row_s : 0.0, roof_s * 1e6);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
