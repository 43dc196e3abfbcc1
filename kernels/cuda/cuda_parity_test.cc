// The backend-parity suite (kernels/testing/backend_parity.h) with the CUDA backend (device 0,
// bf16 activations) as the candidate and the CPU's scalar kernels (f32) as the reference.
// Without a usable device it skips with one line naming why. With one, "no failure" is not
// enough: a floor of cases must have run (a backend that answered "not supported" to
// everything would otherwise pass), every op must have run at least once, and every skipped
// case is listed.
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/testing/backend_parity.h"

namespace tpserve {
namespace {

// The suite has 709 cases where the candidate supports everything (the CPU's AVX2 run,
// 2026-12); the CUDA backend lacks the GGML block formats by design (SupportsWeight false:
// 126 MatMul, 12 MatMulChunked and 9 EmbeddingRows cases become one "not supported" line per
// format), leaving 562, and bf16 activations add an f32-output case per MatMul shape at m = 1
// and 33 (64 more). The floor leaves room for a few odd shapes a kernel may decline, not for
// an op family that stopped running.
constexpr int64_t kMinCasesRun = 500;

// Why `results` do not count as a parity run of the GPU backend (empty: they do): fewer than
// `floor` cases ran, or every case of some op was skipped. Skipped cases are listed on `log`.
std::vector<std::string> CoverageProblems(const std::vector<ParityResult>& results, int64_t floor,
                                          std::FILE* log) {
  int64_t run = 0;
  std::map<std::string, int64_t> run_per_op;  // every op seen, with its cases that ran
  for (const ParityResult& r : results) {
    run_per_op[r.op];  // an op whose every case was skipped stays at 0
    if (r.outcome == ParityOutcome::kNotSupported) {
      std::fprintf(log, "skipped: %s %s %s: %s\n", r.op.c_str(), r.dtype.c_str(), r.shape.c_str(),
                   r.detail.c_str());
      continue;
    }
    ++run;
    ++run_per_op[r.op];
  }
  std::fprintf(log, "%lld of %zu cases ran (floor %lld)\n", static_cast<long long>(run),
               results.size(), static_cast<long long>(floor));
  std::vector<std::string> problems;
  if (run < floor) {
    problems.push_back("only " + std::to_string(run) + " cases ran, below the floor of " +
                       std::to_string(floor));
  }
  for (const auto& [op, count] : run_per_op) {
    if (count == 0) problems.push_back(op + ": every case was skipped");
  }
  return problems;
}

TEST(CudaParity, CudaMatchesCpuReferenceOnEveryOp) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok()) GTEST_SKIP() << "no CUDA device: " << devices.status().message();
  if (*devices == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount found 0 devices";
  absl::StatusOr<std::unique_ptr<Backend>> cuda = CreateCudaBackend(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CpuBackend reference(CpuBackendOptions{.num_threads = threads, .isa = CpuIsa::kScalar});
  const std::vector<ParityResult> results = RunBackendParity(**cuda, reference);
  PrintParityTable(results, stdout);
  EXPECT_EQ(CountParityFailures(results), 0);
  for (const std::string& problem : CoverageProblems(results, kMinCasesRun, stdout)) {
    ADD_FAILURE() << problem;
  }
}

// The floor itself, without a GPU: a run where everything was "not supported" cannot pass,
// nor one where a whole op was skipped; a full one passes.
TEST(CudaParity, CoverageFloorRefusesSkippedRuns) {
  auto results_of = [](int64_t n, const char* op, ParityOutcome outcome) {
    std::vector<ParityResult> r(n);
    for (ParityResult& one : r) {
      one.op = op;
      one.outcome = outcome;
    }
    return r;
  };
  std::FILE* null = std::fopen("/dev/null", "w");
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(
      CoverageProblems(results_of(700, "MatMul", ParityOutcome::kNotSupported), 500, null).size(),
      2u);  // below the floor, and MatMul never ran
  std::vector<ParityResult> full = results_of(600, "MatMul", ParityOutcome::kOk);
  EXPECT_TRUE(CoverageProblems(full, 500, null).empty());
  const std::vector<ParityResult> attention =
      results_of(3, "PagedAttention", ParityOutcome::kNotSupported);
  full.insert(full.end(), attention.begin(), attention.end());
  const std::vector<std::string> problems = CoverageProblems(full, 500, null);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "PagedAttention: every case was skipped");
  std::fclose(null);
}

}  // namespace
}  // namespace tpserve
