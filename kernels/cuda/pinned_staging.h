// The CUDA backend's StagingSlots (staged_copy.h): two slots of pinned host memory allocated
// once, when the backend is made (never on the step path), each with an event recorded after
// its copy; waits poll that event with the device deadline and the backend's abort flag
// (device_wait.h).
//
//   TP_ASSIGN_OR_RETURN(auto staging, PinnedStaging::Create(stream, &abort_requested_));
//   TP_RETURN_IF_ERROR(StagedCopyToHost(*staging, dst, src, bytes));
//
// Plain C++ header (no CUDA includes). Threading: one thread at a time, like the backend owning
// it; the abort flag may be set from any thread.
#ifndef TPSERVE_KERNELS_CUDA_PINNED_STAGING_H_
#define TPSERVE_KERNELS_CUDA_PINNED_STAGING_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/cuda/staged_copy.h"

namespace tpserve::cuda {

// 8 MiB a slot, 16 MiB pinned per backend: a step's metadata and a decode step's logits
// (256 rows x a 128K vocabulary x 4 bytes = 128 MiB goes in 16 pieces, each a PCIe copy of
// about 0.3 ms at 25 GB/s overlapped with the host's copy-out of the other slot).
inline constexpr int64_t kStagingSlotBytes = int64_t{8} << 20;

class PinnedStaging final : public StagingSlots {
 public:
  // Allocates the slots (cudaHostAlloc) and their events on the current device; copies are
  // queued on `stream` (a cudaStream_t). RESOURCE_EXHAUSTED (or the CUDA error) when pinned
  // memory is short. `abort` (may be null) ends a WaitSlot with UNAVAILABLE.
  static absl::StatusOr<std::unique_ptr<PinnedStaging>> Create(
      void* stream, const std::atomic<bool>* abort, int64_t slot_bytes = kStagingSlotBytes);
  // Frees the slots; the owner has waited for the stream (a queued copy may read them).
  ~PinnedStaging() override;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  int64_t slot_bytes() const override { return slot_bytes_; }
  void* slot_memory(int slot) override { return memory_[slot]; }
  absl::Status QueueToSlot(int slot, const void* src, int64_t bytes) override;
  absl::Status QueueFromSlot(int slot, void* dst, int64_t bytes) override;
  // The wait is named "queued device work" (it waits for everything queued before the copy).
  absl::Status WaitSlot(int slot) override;

 private:
  PinnedStaging(void* stream, const std::atomic<bool>* abort, int64_t slot_bytes)
      : stream_(stream), abort_(abort), slot_bytes_(slot_bytes) {}

  void* const stream_;
  const std::atomic<bool>* const abort_;
  const int64_t slot_bytes_;
  void* memory_[kNumSlots] = {nullptr, nullptr};
  void* events_[kNumSlots] = {nullptr, nullptr};  // cudaEvent_t
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_PINNED_STAGING_H_
