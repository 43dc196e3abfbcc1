// RunStepBatchParity's batches (decodes then prompt chunks in one step, Llama 3.1 405B's
// grouping at TP 8, a window of 16 over sequences of 40 with and without a soft-cap of 50) on
// the CPU's optimised kernels against its scalar reference: every case runs and passes here,
// without a GPU, so the batches themselves are sound before //kernels/cuda:cuda_parity_test
// runs them against the CUDA backend on a device.
#include <cstdio>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/testing/backend_parity.h"

namespace tpserve {
namespace {

TEST(StepBatchParity, CpuOptimisedMatchesScalarReferenceOnEveryBatch) {
  CpuBackend reference(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend candidate(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  const std::vector<ParityResult> results = RunStepBatchParity(candidate, reference);
  PrintParityTable(results, stdout);
  EXPECT_EQ(CountParityFailures(results), 0);
  std::map<std::string, int> per_op;
  for (const ParityResult& r : results) {
    EXPECT_EQ(r.outcome, ParityOutcome::kOk) << r.op << " " << r.dtype << " " << r.shape;
    ++per_op[r.op];
  }
  // 84 batches, each a WriteKv and a PagedAttention result: 405B at TP 8 (6 batches x 4 KV
  // dtypes), decodes then chunks on two more shapes (2 x 3 x 2), windows and caps (2 shapes x
  // 4 batches x 3 scorings x 2 dtypes).
  EXPECT_EQ(per_op["PagedAttention"], 84);
  EXPECT_EQ(per_op["WriteKv"], 84);
  EXPECT_EQ(results.size(), 168u);
}

}  // namespace
}  // namespace tpserve
