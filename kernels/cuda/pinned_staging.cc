#include "kernels/cuda/pinned_staging.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"

namespace tpserve::cuda {

absl::StatusOr<std::unique_ptr<PinnedStaging>> PinnedStaging::Create(
    void* stream, const std::atomic<bool>* abort, int64_t slot_bytes) {
  TP_CHECK(slot_bytes > 0, "staging slots must hold at least one byte");
  std::unique_ptr<PinnedStaging> s(new PinnedStaging(stream, abort, slot_bytes));
  for (int i = 0; i < kNumSlots; ++i) {
    const cudaError_t err =
        cudaHostAlloc(&s->memory_[i], static_cast<size_t>(slot_bytes), cudaHostAllocDefault);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky: keep it from the next launch check
      s->memory_[i] = nullptr;
      return absl::ResourceExhaustedError(
          absl::StrCat("copy staging: cannot allocate ", slot_bytes, " bytes of pinned host ",
                       "memory for slot ", i, " (", cudaGetErrorString(err), ")"));
    }
    cudaEvent_t event = nullptr;
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming)));
    s->events_[i] = event;
  }
  return s;
}

PinnedStaging::~PinnedStaging() {
  for (int i = 0; i < kNumSlots; ++i) {
    if (events_[i] != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(events_[i]));
    if (memory_[i] != nullptr) cudaFreeHost(memory_[i]);
  }
}

absl::Status PinnedStaging::QueueToSlot(int slot, const void* src, int64_t bytes) {
  TP_CHECK(bytes <= slot_bytes_, "a staged copy larger than its slot");
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpyAsync(memory_[slot], src, static_cast<size_t>(bytes),
                                              cudaMemcpyDeviceToHost, s)));
  return TPK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(events_[slot]), s));
}

absl::Status PinnedStaging::QueueFromSlot(int slot, void* dst, int64_t bytes) {
  TP_CHECK(bytes <= slot_bytes_, "a staged copy larger than its slot");
  const cudaStream_t s = static_cast<cudaStream_t>(stream_);
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpyAsync(dst, memory_[slot], static_cast<size_t>(bytes),
                                              cudaMemcpyHostToDevice, s)));
  return TPK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(events_[slot]), s));
}

absl::Status PinnedStaging::WaitSlot(int slot) {
  // An event never recorded is complete (cudaEventQuery answers cudaSuccess).
  return WaitForEvent(events_[slot], "queued device work", abort_);
}

}  // namespace tpserve::cuda
