// The CUDA devices of this machine, asked without starting anything heavy. Plain C++ (no CUDA
// headers), so launchers and tests can include it.
//
//   absl::StatusOr<int> n = CudaDeviceCount();   // error: no driver, or it cannot answer
//
// Thread-safe.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
#define TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tpserve {

// Number of visible CUDA devices. FAILED_PRECONDITION "no CUDA driver found" on a machine
// without a GPU driver (the runtime's own word for it is "driver version is insufficient",
// which misleads there); FAILED_PRECONDITION "cudaGetDeviceCount failed: ..." when a driver is
// installed but cannot answer (e.g. older than the runtime). A count of 0 is returned as 0.
absl::StatusOr<int> CudaDeviceCount();

// cudaDeviceProp.name (e.g. "NVIDIA H100 80GB HBM3") and .totalGlobalMem of `ordinal`.
absl::Status CudaDeviceNameAndMemory(int ordinal, std::string* name, int64_t* memory_bytes);

// "NVIDIA H200, 139.8 GiB, sm_90" for `ordinal`; an error as for CudaDeviceCount.
absl::StatusOr<std::string> CudaDeviceDescription(int ordinal);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
