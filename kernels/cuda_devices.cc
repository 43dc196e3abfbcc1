#include "kernels/cuda_devices.h"

#if TPSERVE_WITH_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace tpserve {

absl::StatusOr<std::vector<CudaDeviceInfo>> VisibleCudaDevices() {
#if TPSERVE_WITH_CUDA
  absl::StatusOr<int> count = CudaDeviceCount();
  if (!count.ok()) return count.status();
  std::vector<CudaDeviceInfo> devices(*count);
  for (int i = 0; i < *count; ++i) {
    absl::Status s = CudaDeviceNameAndMemory(i, &devices[i].name, &devices[i].memory_bytes);
    if (!s.ok()) return s;
  }
  return devices;
#else
  return absl::UnimplementedError("this build has no CUDA (built without the CUDA toolkit)");
#endif
}

}  // namespace tpserve
