// Copies between pageable host memory and the device through a fixed pinned buffer of two
// slots, so that no copy makes the host wait inside the CUDA driver. A cudaMemcpyAsync to or
// from pageable memory is synchronous for the host: to the host it returns only once the copy,
// and so every op queued before it (the whole step), has finished, waiting inside the driver
// with no deadline behind a collective stuck on a dead peer. Into pinned memory it returns at
// once; the host then waits for the slot's event with the deadline and abort flag of every host
// wait (device_wait.h), and copies the slot out. While it copies one slot out, the other slot's
// copy runs on the device.
//
//   TP_RETURN_IF_ERROR(StagedCopyToHost(staging, logits_host, logits_device, bytes));
//   TP_RETURN_IF_ERROR(StagedCopyToDevice(staging, step_words_device, words.data(), bytes));
//
// The CUDA calls are behind StagingSlots (pinned_staging.h has the CUDA one; tests fake it), so
// the ordering rule is tested without a GPU: the host touches a slot's memory only after
// waiting for that slot's last queued copy. Plain C++.
// Threading: one thread at a time per StagingSlots (the backend's).
#ifndef TPSERVE_KERNELS_CUDA_STAGED_COPY_H_
#define TPSERVE_KERNELS_CUDA_STAGED_COPY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace tpserve::cuda {

// Two slots of pinned host memory, each with the event of its last queued copy.
class StagingSlots {
 public:
  static constexpr int kNumSlots = 2;
  virtual ~StagingSlots() = default;

  // Bytes in each slot (> 0).
  virtual int64_t slot_bytes() const = 0;
  // The slot's pinned memory. The host may read or write it only after WaitSlot(slot).
  virtual void* slot_memory(int slot) = 0;
  // Queues a copy of `bytes` from device memory `src` into the slot, then records the slot's
  // event. REQUIRES: bytes <= slot_bytes().
  virtual absl::Status QueueToSlot(int slot, const void* src, int64_t bytes) = 0;
  // Queues a copy of the slot's first `bytes` to device memory `dst`, then records the slot's
  // event. REQUIRES: bytes <= slot_bytes().
  virtual absl::Status QueueFromSlot(int slot, void* dst, int64_t bytes) = 0;
  // Waits until the slot's last queued copy (and everything queued before it) has finished:
  // OK at once when none was queued; DEADLINE_EXCEEDED, UNAVAILABLE (abort) or the device's
  // error otherwise (device_wait.h).
  virtual absl::Status WaitSlot(int slot) = 0;
};

// One piece of a staged copy: bytes [offset, offset + bytes) through `slot`.
struct StagedChunk {
  int64_t offset = 0;
  int64_t bytes = 0;
  int slot = 0;
};

// The pieces of a copy of `bytes` through slots of `slot_bytes`: in order, contiguous, each at
// most slot_bytes, the slots taking turns from 0. Empty for bytes <= 0. REQUIRES: slot_bytes > 0.
std::vector<StagedChunk> PlanStagedCopy(int64_t bytes, int64_t slot_bytes);

// Device `src` -> pageable host `dst`. Returns once dst holds the bytes, or with the first
// error of a queue or a wait (dst then holds at most the chunks before it).
absl::Status StagedCopyToHost(StagingSlots& slots, void* dst, const void* src, int64_t bytes);

// Pageable host `src` -> device `dst`, in stream order with the work queued before it. Returns
// once `src` has been read (the caller may reuse it); the copies to the device may still be
// queued. Each slot is rewritten only after its previous copy has read it.
absl::Status StagedCopyToDevice(StagingSlots& slots, void* dst, const void* src, int64_t bytes);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_STAGED_COPY_H_
