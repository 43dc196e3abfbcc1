#include "kernels/cuda/device_scratch.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"

namespace tpserve::cuda {

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) cudaFree(data_);  // nothing to report to in a destructor
}

absl::Status DeviceScratch::Reserve(int64_t bytes, void* stream) {
  if (bytes <= capacity_) return absl::OkStatus();
  if (data_ != nullptr) {
    TP_RETURN_IF_ERROR(
        WaitForStream(stream, absl::StrCat("CUDA scratch ", what_, ": growing"), abort_));
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaFree(data_)));
    data_ = nullptr;
    capacity_ = 0;
  }
  // Round up so that slowly growing requests do not reallocate every time.
  const int64_t size = std::max<int64_t>(bytes + bytes / 4, 1 << 16);
  const cudaError_t err = cudaMalloc(&data_, static_cast<size_t>(size));
  if (err != cudaSuccess) {
    cudaGetLastError();  // a failed allocation must not be reported by the next launch check
    data_ = nullptr;
    return absl::ResourceExhaustedError(absl::StrCat("CUDA scratch ", what_, ": cannot allocate ",
                                                     size, " bytes: ", cudaGetErrorString(err)));
  }
  capacity_ = size;
  if (generation_ != nullptr) ++*generation_;
  return absl::OkStatus();
}

}  // namespace tpserve::cuda
