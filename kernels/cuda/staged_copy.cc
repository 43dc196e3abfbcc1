#include "kernels/cuda/staged_copy.h"

#include <algorithm>
#include <cstring>

#include "base/status_macros.h"
#include "kernels/check.h"

namespace tpserve::cuda {

std::vector<StagedChunk> PlanStagedCopy(int64_t bytes, int64_t slot_bytes) {
  TP_CHECK(slot_bytes > 0, "staging slots must hold at least one byte");
  std::vector<StagedChunk> chunks;
  for (int64_t offset = 0; offset < bytes; offset += slot_bytes) {
    chunks.push_back({offset, std::min(slot_bytes, bytes - offset),
                      static_cast<int>(chunks.size() % StagingSlots::kNumSlots)});
  }
  return chunks;
}

absl::Status StagedCopyToHost(StagingSlots& slots, void* dst, const void* src, int64_t bytes) {
  const std::vector<StagedChunk> chunks = PlanStagedCopy(bytes, slots.slot_bytes());
  if (chunks.empty()) return absl::OkStatus();
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  TP_RETURN_IF_ERROR(slots.QueueToSlot(chunks[0].slot, from, chunks[0].bytes));
  for (size_t i = 0; i < chunks.size(); ++i) {
    const StagedChunk& c = chunks[i];
    // The next chunk's slot was last read by the host in the previous iteration: the device
    // may fill it while the host copies this one out.
    if (i + 1 < chunks.size()) {
      const StagedChunk& next = chunks[i + 1];
      TP_RETURN_IF_ERROR(slots.QueueToSlot(next.slot, from + next.offset, next.bytes));
    }
    TP_RETURN_IF_ERROR(slots.WaitSlot(c.slot));
    std::memcpy(to + c.offset, slots.slot_memory(c.slot), static_cast<size_t>(c.bytes));
  }
  return absl::OkStatus();
}

absl::Status StagedCopyToDevice(StagingSlots& slots, void* dst, const void* src, int64_t bytes) {
  const auto* from = static_cast<const char*>(src);
  auto* to = static_cast<char*>(dst);
  for (const StagedChunk& c : PlanStagedCopy(bytes, slots.slot_bytes())) {
    // A copy queued earlier (by this call or an earlier one) may still be reading the slot.
    TP_RETURN_IF_ERROR(slots.WaitSlot(c.slot));
    std::memcpy(slots.slot_memory(c.slot), from + c.offset, static_cast<size_t>(c.bytes));
    TP_RETURN_IF_ERROR(slots.QueueFromSlot(c.slot, to + c.offset, c.bytes));
  }
  return absl::OkStatus();
}

}  // namespace tpserve::cuda
