// Device memory for GPU tests, freed on scope exit; a failed CUDA call is a test failure.
//
//   const TestDeviceBuffer w(host.data(), bytes), y(out_bytes);
//   std::vector<uint16_t> got = y.Read<uint16_t>(count);
//
// Threading: one test thread.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_DEVICE_BUFFER_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_DEVICE_BUFFER_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve::cuda {

class TestDeviceBuffer {
 public:
  explicit TestDeviceBuffer(int64_t bytes) {
    EXPECT_EQ(cudaMalloc(&p_, bytes > 0 ? bytes : 16), cudaSuccess);
  }
  TestDeviceBuffer(const void* host, int64_t bytes) : TestDeviceBuffer(bytes) {
    EXPECT_EQ(cudaMemcpy(p_, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~TestDeviceBuffer() { cudaFree(p_); }
  TestDeviceBuffer(const TestDeviceBuffer&) = delete;
  TestDeviceBuffer& operator=(const TestDeviceBuffer&) = delete;

  void* get() const { return p_; }
  // The first `count` Ts.
  template <typename T>
  std::vector<T> Read(int64_t count) const {
    std::vector<T> v(count);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  void* p_ = nullptr;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_TEST_DEVICE_BUFFER_H_
