#include "comm/cuda_status.h"

#include "absl/strings/str_cat.h"

namespace tpserve {

absl::Status CudaStatus(cudaError_t error, const char* call, const char* file, int line) {
  return cuda::CudaCallStatus(static_cast<int>(error), call, file, line);
}

absl::Status NcclStatus(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const std::string message =
      absl::StrCat(call, " failed at ", file, ":", line, ": NCCL error ", static_cast<int>(result),
                   " (", ncclGetErrorString(result), ")");
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace tpserve
