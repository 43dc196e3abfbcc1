#include "kernels/cuda/device_wait.h"

#include <cuda_runtime_api.h>

#include "base/poll_wait.h"
#include "kernels/cuda/cuda_status.h"

namespace tpserve::cuda {
namespace {

// A query's answer as PollUntil wants it: done, not yet, or the work's error.
absl::StatusOr<bool> Finished(cudaError_t query, const char* call) {
  if (query == cudaSuccess) return true;
  if (query == cudaErrorNotReady) return false;
  return CudaCallStatus(query, call, __FILE__, __LINE__);
}

}  // namespace

absl::Status WaitForStream(void* stream, std::string_view what, const std::atomic<bool>* abort,
                           absl::Duration timeout) {
  return PollUntil(what, {.timeout = timeout, .abort = abort}, [stream] {
    return Finished(cudaStreamQuery(static_cast<cudaStream_t>(stream)), "cudaStreamQuery");
  });
}

absl::Status WaitForEvent(void* event, std::string_view what, const std::atomic<bool>* abort,
                          absl::Duration timeout) {
  return PollUntil(what, {.timeout = timeout, .abort = abort}, [event] {
    return Finished(cudaEventQuery(static_cast<cudaEvent_t>(event)), "cudaEventQuery");
  });
}

}  // namespace tpserve::cuda
