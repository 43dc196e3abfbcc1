#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_format.h"

namespace tpserve {

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    int driver_version = 0;  // 0: no driver installed (libcuda.so.1 not found)
    if (cudaDriverGetVersion(&driver_version) == cudaSuccess && driver_version == 0) {
      return absl::FailedPreconditionError("no CUDA driver found");
    }
    return absl::FailedPreconditionError(
        absl::StrFormat("cudaGetDeviceCount failed: %s", cudaGetErrorString(err)));
  }
  return count;
}

absl::Status CudaDeviceNameAndMemory(int ordinal, std::string* name, int64_t* memory_bytes) {
  cudaDeviceProp prop;
  const cudaError_t err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cudaGetDeviceProperties(%d) failed: %s", ordinal, cudaGetErrorString(err)));
  }
  *name = prop.name;
  *memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  return absl::OkStatus();
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
