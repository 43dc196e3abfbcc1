// The CUDA devices of this machine, asked without starting anything heavy. Plain C++ (no CUDA
// headers), so launchers and tests can include it.
//
//   absl::StatusOr<int> n = CudaDeviceCount();   // error: no driver or no device
//
// Thread-safe.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
#define TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"

namespace tpserve {

// Number of visible CUDA devices. FAILED_PRECONDITION naming the CUDA error when the runtime
// cannot answer (on a machine without a GPU driver: "insufficient driver"); a count of 0 is
// returned as 0.
absl::StatusOr<int> CudaDeviceCount();

// "NVIDIA H200, 139.8 GiB, sm_90" for `ordinal`; an error as for CudaDeviceCount.
absl::StatusOr<std::string> CudaDeviceDescription(int ordinal);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_CUDA_DEVICE_H_
