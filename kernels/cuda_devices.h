// The CUDA devices of this machine as a launcher plans for them, in every build (without the
// CUDA toolkit the answer is UNIMPLEMENTED), with no backend linked: a capability query, apart
// from execution (backend_factory.h).
//
//   absl::StatusOr<std::vector<CudaDeviceInfo>> gpus = VisibleCudaDevices();
//
// Thread-safe.
#ifndef TPSERVE_KERNELS_CUDA_DEVICES_H_
#define TPSERVE_KERNELS_CUDA_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

// A visible CUDA device, as the driver describes it.
struct CudaDeviceInfo {
  std::string name;          // cudaDeviceProp.name, e.g. "NVIDIA H100 80GB HBM3"
  int64_t memory_bytes = 0;  // cudaDeviceProp.totalGlobalMem
};

// The visible CUDA devices in ordinal order; empty when the driver sees none.
// FAILED_PRECONDITION "no CUDA driver found" on a machine without a GPU driver, or naming the
// CUDA error when an installed driver cannot answer (kernels/cuda/cuda_device.h);
// UNIMPLEMENTED in a build without CUDA.
absl::StatusOr<std::vector<CudaDeviceInfo>> VisibleCudaDevices();

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_DEVICES_H_
