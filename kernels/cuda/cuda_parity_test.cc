// The backend-parity suite (kernels/testing/backend_parity.h) with the CUDA backend (device 0,
// bf16 activations) as the candidate and the CPU's scalar kernels (f32) as the reference.
// Without a usable device it skips with one line naming why.
#include <cstdio>
#include <thread>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/testing/backend_parity.h"

namespace tpserve {
namespace {

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
}

}  // namespace
}  // namespace tpserve
