#include "kernels/cuda/cuda_status.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"

namespace tpserve::cuda {

absl::Status CudaCallStatus(int cuda_error, const char* call, const char* file, int line) {
  const auto error = static_cast<cudaError_t>(cuda_error);
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " failed at ", file, ":", line, ": ", cudaGetErrorName(error), " (",
                   cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidConfiguration:
      return absl::InvalidArgumentError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return absl::FailedPreconditionError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasCallStatus(int cublas_status, const char* call, const char* file, int line) {
  const auto status = static_cast<cublasStatus_t>(cublas_status);
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat(call, " failed at ", file, ":", line, ": cuBLAS status ",
                                           cublas_status, " (", cublasLtGetStatusName(status),
                                           ": ", cublasLtGetStatusString(status), ")");
  switch (status) {
    case CUBLAS_STATUS_INVALID_VALUE:
      return absl::InvalidArgumentError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return absl::FailedPreconditionError(message);
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace tpserve::cuda
