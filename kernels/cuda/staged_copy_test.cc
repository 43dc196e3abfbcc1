// Staged copies over a fake device whose stream runs as late as a real one may: a queued copy
// happens only when the host waits for it (or the test drains the stream), so a copy that read
// a slot before waiting for it, or rewrote a slot a queued copy still reads, moves the wrong
// bytes and the comparisons below fail. The CUDA backend's CopyToHost and CopyToDevice go
// through these (pinned_staging.h); before, CopyToHost was one cudaMemcpyAsync into pageable
// memory, which waits inside the driver with no deadline (device_wait_test's
// CopyToHostBehindStuckWorkEndsOnAbort checks that on a GPU).
#include "kernels/cuda/staged_copy.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

constexpr char kPoison = static_cast<char>(0xAB);

// Two pinned slots on a lazy stream. Device memory is the test's own bytes.
class LazyStreamSlots final : public StagingSlots {
 public:
  explicit LazyStreamSlots(int64_t slot_bytes) : slot_bytes_(slot_bytes) {
    for (std::vector<char>& m : memory_) m.assign(slot_bytes, kPoison);
  }

  int64_t slot_bytes() const override { return slot_bytes_; }
  void* slot_memory(int slot) override { return memory_[slot].data(); }
  absl::Status QueueToSlot(int slot, const void* src, int64_t bytes) override {
    return Queue({true, slot, static_cast<char*>(const_cast<void*>(src)), bytes});
  }
  absl::Status QueueFromSlot(int slot, void* dst, int64_t bytes) override {
    return Queue({false, slot, static_cast<char*>(dst), bytes});
  }
  absl::Status WaitSlot(int slot) override {
    ++waits;
    if (waits == fail_wait) return absl::DeadlineExceededError("queued device work did not "
                                                               "complete within 5m");
    RunThrough(last_op_[slot]);
    return absl::OkStatus();
  }

  // Runs every queued copy (what the stream does in the end).
  void Drain() { RunThrough(queue_.size()); }

  int waits = 0;
  int fail_wait = 0;  // the n-th WaitSlot (from 1) returns DEADLINE_EXCEEDED; 0: none
  int64_t largest_copy = 0;

 private:
  struct Op {
    bool to_slot;
    int slot;
    char* device;
    int64_t bytes;
  };
  absl::Status Queue(const Op& op) {
    EXPECT_LE(op.bytes, slot_bytes_) << "a copy larger than its slot";
    largest_copy = std::max(largest_copy, op.bytes);
    queue_.push_back(op);
    last_op_[op.slot] = queue_.size();
    return absl::OkStatus();
  }
  // A stream runs in order: waiting for one copy runs every copy queued before it.
  void RunThrough(size_t n) {
    for (; done_ < n; ++done_) {
      const Op& op = queue_[done_];
      if (op.to_slot) {
        std::memcpy(memory_[op.slot].data(), op.device, op.bytes);
      } else {
        std::memcpy(op.device, memory_[op.slot].data(), op.bytes);
      }
    }
  }

  const int64_t slot_bytes_;
  std::vector<char> memory_[kNumSlots];
  std::vector<Op> queue_;
  size_t done_ = 0;
  size_t last_op_[kNumSlots] = {0, 0};  // queue_ index + 1 of each slot's last copy
};

std::vector<char> Pattern(int64_t n, int seed) {
  std::vector<char> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 7 + seed * 13 + i / 251) & 0xFF);
  return v;
}

TEST(PlanStagedCopy, ContiguousPiecesOfAtMostOneSlotTakingTurns) {
  const std::vector<StagedChunk> chunks = PlanStagedCopy(250, 100);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].offset, 0);
  EXPECT_EQ(chunks[0].bytes, 100);
  EXPECT_EQ(chunks[0].slot, 0);
  EXPECT_EQ(chunks[1].offset, 100);
  EXPECT_EQ(chunks[1].bytes, 100);
  EXPECT_EQ(chunks[1].slot, 1);
  EXPECT_EQ(chunks[2].offset, 200);
  EXPECT_EQ(chunks[2].bytes, 50);
  EXPECT_EQ(chunks[2].slot, 0);
  EXPECT_EQ(PlanStagedCopy(200, 100).size(), 2u);
  EXPECT_EQ(PlanStagedCopy(1, 100).size(), 1u);
  EXPECT_TRUE(PlanStagedCopy(0, 100).empty());
  EXPECT_TRUE(PlanStagedCopy(-5, 100).empty());
}

// Logits of 5.5 slots: every byte arrives, through slots no larger than they are, one wait a
// piece.
TEST(StagedCopyToHost, CopiesEveryByteWaitingForEachSlotBeforeReadingIt) {
  LazyStreamSlots slots(64);
  const std::vector<char> device = Pattern(352, 1);
  std::vector<char> host(352, kPoison);
  ASSERT_TRUE(StagedCopyToHost(slots, host.data(), device.data(), 352).ok());
  EXPECT_EQ(host, device);
  EXPECT_EQ(slots.waits, 6);
  EXPECT_EQ(slots.largest_copy, 64);
}

TEST(StagedCopyToHost, AWaitThatTimesOutEndsTheCopyWithItsErrorAndWritesNoMore) {
  LazyStreamSlots slots(64);
  const std::vector<char> device = Pattern(352, 2);
  std::vector<char> host(352, kPoison);
  slots.fail_wait = 2;  // the first piece arrives, the second's wait runs out
  const absl::Status s = StagedCopyToHost(slots, host.data(), device.data(), 352);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(), "queued device work did not complete within 5m");
  EXPECT_EQ(slots.waits, 2);
  EXPECT_TRUE(std::equal(host.begin(), host.begin() + 64, device.begin()));
  EXPECT_TRUE(std::all_of(host.begin() + 64, host.end(), [](char c) { return c == kPoison; }));
}

TEST(StagedCopyToHost, NothingToCopyQueuesAndWaitsForNothing) {
  LazyStreamSlots slots(64);
  EXPECT_TRUE(StagedCopyToHost(slots, nullptr, nullptr, 0).ok());
  EXPECT_EQ(slots.waits, 0);
  EXPECT_EQ(slots.largest_copy, 0);
}

// The caller may reuse `src` once the call returns, though the copies to the device run
// later; and a slot is never rewritten while its earlier copy is queued.
TEST(StagedCopyToDevice, SourceIsReusableOnReturnAndEveryByteArrives) {
  LazyStreamSlots slots(64);
  const std::vector<char> want = Pattern(300, 3);
  std::vector<char> src = want;
  std::vector<char> device(300, kPoison);
  ASSERT_TRUE(StagedCopyToDevice(slots, device.data(), src.data(), 300).ok());
  std::fill(src.begin(), src.end(), 0);  // reused by the caller
  slots.Drain();
  EXPECT_EQ(device, want);
  EXPECT_EQ(slots.largest_copy, 64);
}

// An upload then a download of the same bytes (step metadata, then a result), one slot size
// apart: the download's first piece goes into a slot the upload's last piece may still be
// reading, which stream order makes safe.
TEST(StagedCopy, AnUploadThenADownloadRoundTrips) {
  LazyStreamSlots slots(50);
  const std::vector<char> want = Pattern(170, 4);
  std::vector<char> device(170, kPoison), back(170, kPoison);
  ASSERT_TRUE(StagedCopyToDevice(slots, device.data(), want.data(), 170).ok());
  ASSERT_TRUE(StagedCopyToHost(slots, back.data(), device.data(), 170).ok());
  EXPECT_EQ(back, want);
  // And again, the other way round over different bytes.
  const std::vector<char> more = Pattern(170, 5);
  ASSERT_TRUE(StagedCopyToDevice(slots, device.data(), more.data(), 170).ok());
  slots.Drain();
  EXPECT_EQ(device, more);
}

TEST(StagedCopyToDevice, AWaitThatIsAbortedEndsTheCopyWithItsError) {
  class Aborting final : public StagingSlots {
   public:
    int64_t slot_bytes() const override { return 8; }
    void* slot_memory(int slot) override { return memory[slot]; }
    absl::Status QueueToSlot(int, const void*, int64_t) override { return absl::OkStatus(); }
    absl::Status QueueFromSlot(int, void*, int64_t) override {
      ++queued;
      return absl::OkStatus();
    }
    absl::Status WaitSlot(int) override {
      return absl::UnavailableError("queued device work: aborted on request");
    }
    char memory[kNumSlots][8] = {};
    int queued = 0;
  } slots;
  const std::vector<char> src = Pattern(20, 6);
  std::vector<char> device(20);
  const absl::Status s = StagedCopyToDevice(slots, device.data(), src.data(), 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(slots.queued, 0);
}

}  // namespace
}  // namespace tpserve::cuda
