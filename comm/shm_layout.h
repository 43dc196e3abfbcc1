// The byte layout of the segment that ShmCommunicator's ranks share, and the lock-free step
// protocol on it. All offsets are multiples of 64 bytes (one cache line):
//
//   [ShmSegmentHeader][ShmRankControl x world_size][rank 0: slot 0][rank 0: slot 1][rank 1: ...]
//   slot = [ShmSlotHeader][slot_bytes of data]
//
//   ShmLayout layout = ShmLayout::For(/*world_size=*/3, /*max_bytes=*/1 << 20);
//   layout.Bind(segment.data());                   // then, rank 1: write its slot, and
//   PublishStep(layout, 1, step);                  // WaitForStep(layout, peer, step, ...)
//
// A rank's progress is one counter, ShmRankControl::published_step: the last step whose data it
// has written. Peers wait for it by polling, then sleeping on it with a shared futex.
// Threading: every shared word is a lock-free (hence address-free) std::atomic<uint32_t>, so
// these functions may run in any thread of any process that maps the segment.
#ifndef TPSERVE_COMM_SHM_LAYOUT_H_
#define TPSERVE_COMM_SHM_LAYOUT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tpserve {

inline constexpr uint64_t kShmMagic = 0x314d485356525054;  // "TPRVSHM1", little-endian
inline constexpr uint32_t kShmLayoutVersion = 1;
inline constexpr size_t kShmLine = 64;

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");

struct alignas(kShmLine) ShmSegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t world_size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  uint64_t reduce_scatter_min_bytes;     // ranks must agree: it decides the steps per piece
  std::atomic<uint32_t> attached_ranks;  // ranks that have mapped the segment
  std::atomic<uint32_t> broken_by;       // 0, or (rank + 1) | ShmBreak << 16
};

// Each rank's own line, so peers polling it share it with no one's data.
struct alignas(kShmLine) ShmRankControl {
  std::atomic<uint32_t> published_step;  // the futex word
  std::atomic<uint32_t> sleepers;        // peers in FUTEX_WAIT on published_step
  std::atomic<uint32_t> attached;        // 1 once this rank has mapped the segment
};

// The call a piece of data belongs to; ranks compare all ranks' before they read the data.
struct alignas(kShmLine) ShmSlotHeader {
  uint32_t op;
  uint32_t dtype;
  uint32_t root;
  uint64_t count;
};

// Why a group broke, as recorded in ShmSegmentHeader::broken_by.
enum class ShmBreak : uint32_t { kFailed = 1, kLeft = 2 };

struct ShmLayout {
  int world_size = 0;
  size_t slot_bytes = 0;  // data capacity of one slot: max_bytes rounded up to 64
  size_t total_bytes = 0;
  uint8_t* base = nullptr;                   // set by Bind
  std::vector<const uint8_t*> slot_data[2];  // [buffer][rank], set by Bind

  // The one place segment sizes are computed: the creator and every rank's check use it.
  static ShmLayout For(int world_size, size_t max_bytes);
  void Bind(void* segment);

  ShmSegmentHeader* header() const { return reinterpret_cast<ShmSegmentHeader*>(base); }
  ShmRankControl* control(int rank) const;
  ShmSlotHeader* slot_header(int rank, int buffer) const;
  uint8_t* data(int rank, int buffer) const;
};

// The creator, before anyone else can know the name: writes the header, constructs the atomics.
void InitShmSegment(const ShmLayout& layout);

// Publishes `step` as `rank`'s latest and wakes peers sleeping on it.
void PublishStep(const ShmLayout& layout, int rank, uint32_t step);
bool StepReached(const ShmLayout& layout, int rank, uint32_t step);

enum class ShmWait { kArrived, kBroken, kTimedOut };
// Waits until `rank` has published `step`: `spin_iterations` polls, a few yields, then sleeps on
// its counter. kBroken once the group is broken (unless the rank had arrived), kTimedOut at
// `deadline`.
ShmWait WaitForStep(const ShmLayout& layout, int rank, uint32_t step, absl::Time deadline,
                    int spin_iterations);

// Marks the group broken by `rank` (the first to do so wins) and wakes every sleeper.
void BreakShmGroup(const ShmLayout& layout, int rank, ShmBreak why);
// "rank 2 broke the group after a timeout or an error" for a nonzero broken_by.
std::string ShmBrokenByText(uint32_t broken_by);

// Polls before sleeping: only where this process may use more CPUs than there are ranks.
int DefaultShmSpinIterations(int world_size);

// Waiting on a word in shared memory (other processes map it too, so not FUTEX_PRIVATE):
// a pause for spin loops, a sleep while *word == expected (at most `timeout`; spurious wake-ups
// happen), and a wake of every sleeper.
void CpuRelax();
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout);
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace tpserve

#endif  // TPSERVE_COMM_SHM_LAYOUT_H_
