#include "comm/shm_layout.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tpserve {
namespace {

constexpr int kYields = 8;
constexpr absl::Duration kMaxSleep = absl::Milliseconds(50);  // then re-check broken_by

size_t RoundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }
size_t SlotStride(size_t slot_bytes) { return sizeof(ShmSlotHeader) + slot_bytes; }

bool Reached(uint32_t published, uint32_t step) {
  return static_cast<int32_t>(published - step) >= 0;  // wrap-safe after 2^32 steps
}

}  // namespace

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Shared (not FUTEX_PRIVATE): the word lives in a segment other processes map too.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const timespec ts = absl::ToTimespec(timeout);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

ShmLayout ShmLayout::For(int world_size, size_t max_bytes) {
  ShmLayout layout;
  layout.world_size = world_size;
  layout.slot_bytes = RoundUp(max_bytes, kShmLine);
  layout.total_bytes = sizeof(ShmSegmentHeader) + world_size * sizeof(ShmRankControl) +
                       world_size * 2 * SlotStride(layout.slot_bytes);
  return layout;
}

void ShmLayout::Bind(void* segment) {
  base = static_cast<uint8_t*>(segment);
  for (int buffer = 0; buffer < 2; ++buffer) {
    slot_data[buffer].clear();
    for (int r = 0; r < world_size; ++r) slot_data[buffer].push_back(data(r, buffer));
  }
}

ShmRankControl* ShmLayout::control(int rank) const {
  return reinterpret_cast<ShmRankControl*>(base + sizeof(ShmSegmentHeader)) + rank;
}

ShmSlotHeader* ShmLayout::slot_header(int rank, int buffer) const {
  return reinterpret_cast<ShmSlotHeader*>(base + sizeof(ShmSegmentHeader) +
                                          world_size * sizeof(ShmRankControl) +
                                          (2 * rank + buffer) * SlotStride(slot_bytes));
}

uint8_t* ShmLayout::data(int rank, int buffer) const {
  return reinterpret_cast<uint8_t*>(slot_header(rank, buffer)) + sizeof(ShmSlotHeader);
}

void InitShmSegment(const ShmLayout& layout) {
  auto* header = new (layout.base) ShmSegmentHeader{};
  header->magic = kShmMagic;
  header->version = kShmLayoutVersion;
  header->world_size = static_cast<uint32_t>(layout.world_size);
  header->slot_bytes = layout.slot_bytes;
  header->total_bytes = layout.total_bytes;
  for (int r = 0; r < layout.world_size; ++r) new (layout.control(r)) ShmRankControl{};
}

void PublishStep(const ShmLayout& layout, int rank, uint32_t step) {
  ShmRankControl* mine = layout.control(rank);
  mine->published_step.store(step);  // seq_cst: pairs with a sleeper's sleepers/step loads
  if (mine->sleepers.load() != 0) FutexWakeAll(&mine->published_step);
}

bool StepReached(const ShmLayout& layout, int rank, uint32_t step) {
  return Reached(layout.control(rank)->published_step.load(), step);
}

ShmWait WaitForStep(const ShmLayout& layout, int rank, uint32_t step, absl::Time deadline,
                    int spin_iterations) {
  std::atomic<uint32_t>& word = layout.control(rank)->published_step;
  std::atomic<uint32_t>& sleepers = layout.control(rank)->sleepers;
  const std::atomic<uint32_t>& broken_by = layout.header()->broken_by;
  auto arrived = [&] { return Reached(word.load(std::memory_order_acquire), step); };
  for (int i = 0; i < spin_iterations; ++i) {
    if (arrived()) return ShmWait::kArrived;
    CpuRelax();
  }
  for (int i = 0; i < kYields; ++i) {
    if (arrived()) return ShmWait::kArrived;
    sched_yield();
  }
  while (!arrived()) {
    // A rank that left after this step was complete is no failure: arrival is checked first,
    // and (seq_cst) a rank that saw `step` published before it broke the group makes us see it.
    if (broken_by.load() != 0) return arrived() ? ShmWait::kArrived : ShmWait::kBroken;
    const absl::Time now = absl::Now();
    if (now >= deadline) return arrived() ? ShmWait::kArrived : ShmWait::kTimedOut;
    // Dekker pairing with PublishStep (all seq_cst): either it sees this sleeper and wakes it,
    // or this load sees its step and FUTEX_WAIT returns at once. BreakShmGroup wakes without
    // changing the word, so sleeps are capped and broken_by re-read.
    sleepers.fetch_add(1);
    const uint32_t seen = word.load();
    if (!Reached(seen, step) && broken_by.load() == 0) {
      FutexWait(&word, seen, std::min(deadline - now, kMaxSleep));
    }
    sleepers.fetch_sub(1);
  }
  return ShmWait::kArrived;
}

void BreakShmGroup(const ShmLayout& layout, int rank, ShmBreak why) {
  uint32_t expected = 0;
  layout.header()->broken_by.compare_exchange_strong(
      expected, static_cast<uint32_t>(rank + 1) | static_cast<uint32_t>(why) << 16);
  for (int r = 0; r < layout.world_size; ++r) FutexWakeAll(&layout.control(r)->published_step);
}

std::string ShmBrokenByText(uint32_t broken_by) {
  const int rank = static_cast<int>(broken_by & 0xffff) - 1;
  return static_cast<ShmBreak>(broken_by >> 16) == ShmBreak::kLeft
             ? absl::StrCat("rank ", rank, " left the group (closed its communicator)")
             : absl::StrCat("rank ", rank, " broke the group after a timeout or an error");
}

int DefaultShmSpinIterations(int world_size) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  // A rank that spins holds a core a peer (or anyone else) may need, so ranks spin only when
  // each can have a core of its own. Then they spin long enough to cover the skew between
  // ranks' compute in a decode step (tens of microseconds): a futex sleep and wake-up cost
  // about 100 us a collective in the TP=2 decode benchmark (2 ranks of one thread on 2 cores).
  // More ranks than cores: a waiter yields at once (comm_bench, 2 ranks as threads on 2 cores
  // shared with a build: p50 of 576 floats 3.7 us without spinning, 26 us with 2000 polls).
  return usable >= world_size ? 20000 : 0;
}

}  // namespace tpserve
