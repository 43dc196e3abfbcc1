// The backend-parity suite (kernels/testing/backend_parity.h) with the CPU's optimised kernels
// (AVX2 where the CPU has it, two threads) as the candidate and the portable scalar kernels on
// one thread as the reference. Both compute in f32, so every bound is the f32 summation-order
// bound; the table goes to stdout.
#include <cstdio>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/testing/backend_parity.h"

namespace tpserve {
namespace {

TEST(CpuParity, OptimisedMatchesScalarReferenceOnEveryOp) {
  CpuBackend reference(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend candidate(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  const std::vector<ParityResult> results = RunBackendParity(candidate, reference);
  PrintParityTable(results, stdout);
  EXPECT_EQ(CountParityFailures(results), 0);
  // The CPU backend supports every op and dtype of the suite.
  for (const ParityResult& r : results) {
    EXPECT_NE(r.outcome, ParityOutcome::kNotSupported) << r.op << " " << r.dtype;
  }
  EXPECT_GT(results.size(), 500u);
}

}  // namespace
}  // namespace tpserve
