#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"

namespace tpserve {

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cudaGetDeviceCount failed: %s", cudaGetErrorString(err)));
  }
  return count;
}

absl::StatusOr<std::string> CudaDeviceDescription(int ordinal) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(err)));
  }
  return absl::StrFormat("%s, %.1f GiB, sm_%d%d", prop.name,
                         static_cast<double>(prop.totalGlobalMem) / (1 << 30), prop.major,
                         prop.minor);
}

}  // namespace tpserve
