#include "worker/comm/shm_communicator.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <new>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/rank_order_sum.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tpserve {
namespace {

constexpr uint64_t kMagic = 0x314d485356525054;  // "TPRVSHM1", little-endian
constexpr uint32_t kLayoutVersion = 1;
constexpr size_t kLine = 64;
constexpr char kStoreKey[] = "shm_segment";
constexpr uint32_t kWhyFailed = 1;  // SegmentHeader::broken_by >> 16
constexpr uint32_t kWhyLeft = 2;
constexpr int kYields = 8;
constexpr absl::Duration kMaxSleep = absl::Milliseconds(50);  // then re-check broken_by

static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

size_t RoundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

// Byte layout of the segment; all offsets are multiples of 64 (one cache line):
//   [SegmentHeader][RankControl x world_size][rank 0: slot 0, slot 1][rank 1: ...]...
// where a slot is a SlotHeader line followed by slot_bytes of data.
struct alignas(kLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t world_size;
  uint64_t slot_bytes;
  uint64_t total_bytes;
  std::atomic<uint32_t> attached_ranks;  // ranks that have mapped the segment
  std::atomic<uint32_t> broken_by;       // 0, or (rank + 1) | why << 16 of who broke the group
};

// Each rank's own line, so peers polling it do not share a line with anyone's data.
struct alignas(kLine) RankControl {
  std::atomic<uint32_t> published_step;  // the futex word: last step this rank has published
  std::atomic<uint32_t> sleepers;        // peers in FUTEX_WAIT on published_step
  std::atomic<uint32_t> attached;        // 1 once this rank has mapped the segment
};

// The call a piece belongs to: every rank compares all ranks' before reading their data.
struct alignas(kLine) SlotHeader {
  uint32_t op;
  uint32_t dtype;
  uint32_t root;
  uint64_t count;
};

}  // namespace

struct ShmLayout {
  int world_size = 0;
  size_t slot_bytes = 0;  // data capacity of one slot
  size_t total_bytes = 0;
  uint8_t* base = nullptr;
  // [buffer][rank]: the slot data pointers, in rank order, for ReadFn.
  std::vector<const uint8_t*> slot_data[2];

  // The one place segment sizes are computed: Create and the size check on Open both use it.
  static ShmLayout For(int world_size, size_t max_bytes) {
    ShmLayout layout;
    layout.world_size = world_size;
    layout.slot_bytes = RoundUp(max_bytes, kLine);
    layout.total_bytes = sizeof(SegmentHeader) + world_size * sizeof(RankControl) +
                         world_size * 2 * SlotStride(layout.slot_bytes);
    return layout;
  }
  static size_t SlotStride(size_t slot_bytes) { return sizeof(SlotHeader) + slot_bytes; }

  void Bind(void* segment) {
    base = static_cast<uint8_t*>(segment);
    for (int buffer = 0; buffer < 2; ++buffer) {
      slot_data[buffer].clear();
      for (int r = 0; r < world_size; ++r) slot_data[buffer].push_back(data(r, buffer));
    }
  }
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base); }
  RankControl* control(int rank) const {
    return reinterpret_cast<RankControl*>(base + sizeof(SegmentHeader)) + rank;
  }
  uint8_t* slot(int rank, int buffer) const {
    return base + sizeof(SegmentHeader) + world_size * sizeof(RankControl) +
           (2 * rank + buffer) * SlotStride(slot_bytes);
  }
  SlotHeader* slot_header(int rank, int buffer) const {
    return reinterpret_cast<SlotHeader*>(slot(rank, buffer));
  }
  uint8_t* data(int rank, int buffer) const { return slot(rank, buffer) + sizeof(SlotHeader); }
};

namespace {

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

bool Reached(uint32_t published, uint32_t step) {
  return static_cast<int32_t>(published - step) >= 0;  // wrap-safe after 2^32 steps
}

int DefaultSpinIterations(int world_size) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  // A rank that spins holds a core a peer (or anyone else) may need: with only as many cores as
  // ranks, yielding at once was faster (comm_bench, 2 ranks on 2 shared cores: p50 of 576
  // floats 3.7 us without spinning, 26 us with 2000 polls).
  return usable > world_size ? 100 : 0;
}

std::string RankList(const std::vector<int>& ranks, int world_size) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "), " of ",
                      world_size);
}

std::string BrokenByText(uint32_t broken_by) {
  const int rank = static_cast<int>(broken_by & 0xffff) - 1;
  return (broken_by >> 16) == kWhyLeft
             ? absl::StrCat("rank ", rank, " left the group (closed its communicator)")
             : absl::StrCat("rank ", rank, " broke the group after a timeout or an error");
}

// Marks the group broken (the first rank to do so wins) and wakes every sleeper.
void BreakGroup(const ShmLayout& layout, int rank, uint32_t why) {
  uint32_t expected = 0;
  layout.header()->broken_by.compare_exchange_strong(expected,
                                                     static_cast<uint32_t>(rank + 1) | why << 16);
  for (int r = 0; r < layout.world_size; ++r) FutexWakeAll(&layout.control(r)->published_step);
}

absl::Status StatusFromStoreError(const std::string& what, const std::exception& e) {
  const std::string lower = absl::AsciiStrToLower(e.what());
  const std::string text = absl::StrCat(what, ": ", e.what());
  if (absl::StrContains(lower, "timeout") || absl::StrContains(lower, "timed out")) {
    return absl::DeadlineExceededError(text);
  }
  return absl::UnavailableError(text);
}

// Rank 0: a new segment with its header written, its name published in `store`.
absl::StatusOr<ShmSegment> CreateAndPublish(const ShmOptions& options, const ShmLayout& layout,
                                            gloo::rendezvous::Store& store,
                                            const std::string& who) {
  absl::StatusOr<ShmSegment> segment =
      ShmSegment::Create("tpserve-shm-" + ShmNameSafe(options.run_id, 64), layout.total_bytes);
  if (!segment.ok()) {
    return absl::Status(segment.status().code(),
                        absl::StrCat(who, ": ", segment.status().message()));
  }
  auto* header = new (segment->data()) SegmentHeader{};
  header->magic = kMagic;
  header->version = kLayoutVersion;
  header->world_size = options.world_size;
  header->slot_bytes = layout.slot_bytes;
  header->total_bytes = layout.total_bytes;
  ShmLayout bound = layout;
  bound.Bind(segment->data());
  for (int r = 0; r < options.world_size; ++r) new (bound.control(r)) RankControl{};
  try {
    const std::string& name = segment->name();
    store.set(kStoreKey, std::vector<char>(name.begin(), name.end()));
  } catch (const std::exception& e) {
    segment->Unlink().IgnoreError();
    return StatusFromStoreError(absl::StrCat(who, ": publishing the segment name"), e);
  }
  return segment;
}

// Other ranks: the segment rank 0 published, checked against this rank's options.
absl::StatusOr<ShmSegment> FindAndOpen(const ShmOptions& options, const ShmLayout& layout,
                                       gloo::rendezvous::Store& store, const std::string& who) {
  std::string name;
  try {
    store.wait({kStoreKey}, std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout)));
    const std::vector<char> value = store.get(kStoreKey);
    name.assign(value.begin(), value.end());
  } catch (const std::exception& e) {
    return StatusFromStoreError(
        absl::StrCat(who, ": rank 0 did not publish the segment name within ",
                     absl::ToInt64Milliseconds(options.timeout), " ms"),
        e);
  }
  absl::StatusOr<ShmSegment> segment = ShmSegment::Open(name);
  if (!segment.ok()) {
    return absl::Status(segment.status().code(),
                        absl::StrCat(who, ": ", segment.status().message(),
                                     " (rank 0 gave up, or the store holds a name from an earlier "
                                     "run with this run_id)"));
  }
  const auto* header = static_cast<const SegmentHeader*>(segment->data());
  if (segment->size() < sizeof(SegmentHeader) || header->magic != kMagic ||
      header->version != kLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": ", name, " is not a tpserve shm segment of layout version ", kLayoutVersion));
  }
  if (header->world_size != static_cast<uint32_t>(options.world_size) ||
      header->slot_bytes != layout.slot_bytes || header->total_bytes != segment->size() ||
      header->total_bytes != layout.total_bytes) {
    // Tell rank 0 at once (in the layout it made, which may not be ours), not at its timeout.
    if (segment->size() == header->total_bytes) {
      ShmLayout theirs = ShmLayout::For(header->world_size, header->slot_bytes);
      theirs.Bind(segment->data());
      BreakGroup(theirs, options.rank, kWhyFailed);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": rank 0 made the segment for world_size ", header->world_size, " and max_bytes ",
        header->slot_bytes, ", this rank has world_size ", options.world_size, " and max_bytes ",
        layout.slot_bytes, " (rounded up to 64)"));
  }
  return segment;
}

}  // namespace

absl::Status ValidateShmOptions(const ShmOptions& options) {
  if (options.world_size < 1 || options.world_size > 0xfffe) {
    return absl::InvalidArgumentError(
        absl::StrCat("ShmOptions.world_size is ", options.world_size, ", must be in [1, 65534]"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("ShmOptions.rank is ", options.rank,
                                                   ", must be in [0, ", options.world_size, ")"));
  }
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShmOptions.timeout is ", absl::FormatDuration(options.timeout), ", must be >= 1ms"));
  }
  if (options.max_bytes < 64 || options.max_bytes > (size_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("ShmOptions.max_bytes is ", options.max_bytes,
                                                   ", must be in [64, 1073741824]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShmCommunicator>> ShmCommunicator::Connect(
    const ShmOptions& options, gloo::rendezvous::Store& store) {
  absl::Status valid = ValidateShmOptions(options);
  if (!valid.ok()) return valid;
  if (options.world_size == 1) {
    return std::unique_ptr<ShmCommunicator>(new ShmCommunicator(options, ShmSegment(), nullptr));
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  const std::string who =
      absl::StrCat("shm connect of rank ", options.rank, " of ", options.world_size);
  auto layout = std::make_unique<ShmLayout>(ShmLayout::For(options.world_size, options.max_bytes));
  absl::StatusOr<ShmSegment> segment = options.rank == 0
                                           ? CreateAndPublish(options, *layout, store, who)
                                           : FindAndOpen(options, *layout, store, who);
  if (!segment.ok()) return segment.status();
  layout->Bind(segment->data());
  SegmentHeader* header = layout->header();
  layout->control(options.rank)->attached.store(1);
  // The last rank to map the segment unlinks its name; rank 0 also does if it gives up.
  if (header->attached_ranks.fetch_add(1) + 1 == static_cast<uint32_t>(options.world_size)) {
    segment->Unlink().IgnoreError();
  }
  while (header->attached_ranks.load() < static_cast<uint32_t>(options.world_size)) {
    absl::Status failed;
    if (const uint32_t broken_by = header->broken_by.load(); broken_by != 0) {
      failed = absl::UnavailableError(absl::StrCat(who, ": ", BrokenByText(broken_by)));
    } else if (absl::Now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < options.world_size; ++r) {
        if (layout->control(r)->attached.load() == 0) missing.push_back(r);
      }
      failed = absl::DeadlineExceededError(
          absl::StrCat(who, ": ", RankList(missing, options.world_size), " did not arrive within ",
                       absl::ToInt64Milliseconds(options.timeout), " ms"));
      BreakGroup(*layout, options.rank, kWhyFailed);
    }
    if (!failed.ok()) {
      if (options.rank == 0) segment->Unlink().IgnoreError();
      return failed;
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  return std::unique_ptr<ShmCommunicator>(
      new ShmCommunicator(options, *std::move(segment), std::move(layout)));
}

absl::StatusOr<std::unique_ptr<ShmCommunicator>> ShmCommunicator::ConnectWithFileStore(
    const ShmOptions& options, const std::string& store_dir, const std::string& run_id) {
  if (run_id.empty()) return absl::InvalidArgumentError("shm run_id is empty");
  std::error_code error;
  std::filesystem::create_directories(store_dir, error);
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create shm store directory '", store_dir, "': ", error.message()));
  }
  try {
    gloo::rendezvous::FileStore file_store(store_dir);
    gloo::rendezvous::PrefixStore store(run_id, file_store);
    return Connect(options, store);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm FileStore in '", store_dir, "': ", e.what()));
  }
}

ShmCommunicator::ShmCommunicator(const ShmOptions& options, ShmSegment segment,
                                 std::unique_ptr<ShmLayout> layout)
    : options_(options),
      segment_(std::move(segment)),
      layout_(std::move(layout)),
      spin_iterations_(options.spin_iterations >= 0 ? options.spin_iterations
                                                    : DefaultSpinIterations(options.world_size)) {}

ShmCommunicator::~ShmCommunicator() {
  // Safe after a completed collective: a peer still in it waits for no one (all published).
  if (layout_ != nullptr) BreakGroup(*layout_, options_.rank, kWhyLeft);
}

const char* ShmCommunicator::OpName(Op op) {
  switch (op) {
    case Op::kAllReduceSum:
      return "AllReduceSum";
    case Op::kAllGather:
      return "AllGather";
    case Op::kBroadcast:
      return "Broadcast";
    case Op::kBarrier:
      return "Barrier";
  }
  return "unknown collective";
}

absl::Status ShmCommunicator::Break(absl::Status status) {
  if (broken_reason_.empty()) broken_reason_ = std::string(status.message());
  if (layout_ != nullptr) BreakGroup(*layout_, options_.rank, kWhyFailed);
  return status;
}

absl::Status ShmCommunicator::Begin(Op op, std::string* what) {
  ++collectives_;
  *what = absl::StrCat("shm ", OpName(op), " #", collectives_, " on rank ", options_.rank);
  if (!broken_reason_.empty()) {
    return absl::UnavailableError(
        absl::StrCat(*what, ": communicator is broken by an earlier failure: ", broken_reason_));
  }
  if (const uint32_t broken_by = layout_->header()->broken_by.load(); broken_by != 0) {
    return Break(absl::UnavailableError(absl::StrCat(*what, ": ", BrokenByText(broken_by))));
  }
  return absl::OkStatus();
}

void ShmCommunicator::WriteSlotHeader(const Call& call, int buffer) {
  *layout_->slot_header(options_.rank, buffer) = SlotHeader{
      static_cast<uint32_t>(call.op), static_cast<uint32_t>(call.dtype), call.root, call.count};
}

absl::Status ShmCommunicator::Sync(int buffer, absl::Time deadline, const std::string& what) {
  const uint32_t step = ++step_;
  RankControl* mine = layout_->control(options_.rank);
  mine->published_step.store(step);  // seq_cst: pairs with a sleeper's sleepers/step loads
  if (mine->sleepers.load() != 0) FutexWakeAll(&mine->published_step);
  absl::Status status = WaitForAll(step, deadline, what);
  if (!status.ok()) return status;
  return CheckSameCall(buffer, what);
}

absl::Status ShmCommunicator::Run(const Call& call, size_t message_bytes, size_t piece_bytes,
                                  FillFn fill, ReadFn read) {
  std::string what;
  absl::Status status = Begin(call.op, &what);
  if (!status.ok()) return status;
  const absl::Time deadline = absl::Now() + options_.timeout;
  size_t offset = 0;
  do {
    const size_t bytes = std::min(piece_bytes, message_bytes - offset);
    const int buffer = ++rounds_ & 1;
    WriteSlotHeader(call, buffer);
    if (bytes > 0) fill(layout_->data(options_.rank, buffer), offset, bytes);
    status = Sync(buffer, deadline, what);
    if (!status.ok()) return status;
    if (bytes > 0) read(layout_->slot_data[buffer].data(), offset, bytes);
    offset += bytes;
  } while (offset < message_bytes);
  return absl::OkStatus();
}

namespace {

// Rank `rank`'s share of `n` elements: the first n % world_size ranks get one more.
std::pair<size_t, size_t> Slice(size_t n, int world_size, int rank) {
  const size_t base = n / world_size;
  const size_t extra = n % world_size;
  const size_t r = static_cast<size_t>(rank);
  return {r * base + std::min(r, extra), base + (r < extra ? 1 : 0)};
}

}  // namespace

absl::Status ShmCommunicator::AllReduceSumSliced(absl::Span<float> data) {
  const Call call{Op::kAllReduceSum, DType::kF32, data.size()};
  std::string what;
  absl::Status status = Begin(call.op, &what);
  if (!status.ok()) return status;
  const absl::Time deadline = absl::Now() + options_.timeout;
  const int world = options_.world_size;
  const size_t piece = layout_->slot_bytes / sizeof(float);
  std::vector<const uint8_t*> inputs(world);
  for (size_t offset = 0; offset < data.size(); offset += piece) {
    const size_t n = std::min(piece, data.size() - offset);
    float* out = data.data() + offset;
    const int buffer = ++rounds_ & 1;
    uint8_t* mine = layout_->data(options_.rank, buffer);
    WriteSlotHeader(call, buffer);
    std::memcpy(mine, out, n * sizeof(float));
    status = Sync(buffer, deadline, what);
    if (!status.ok()) return status;
    // This rank sums its slice over all ranks (in rank order) and puts it back in its own slot
    // where the slice lay: only this rank reads that part of its slot, the others read theirs.
    const auto [lo, len] = Slice(n, world, options_.rank);
    for (int r = 0; r < world; ++r) inputs[r] = layout_->slot_data[buffer][r] + lo * sizeof(float);
    SumF32InRankOrder(inputs.data(), world, len, out + lo);
    std::memcpy(mine + lo * sizeof(float), out + lo, len * sizeof(float));
    status = Sync(buffer, deadline, what);
    if (!status.ok()) return status;
    for (int r = 0; r < world; ++r) {
      if (r == options_.rank) continue;
      const auto [their_lo, their_len] = Slice(n, world, r);
      std::memcpy(out + their_lo, layout_->slot_data[buffer][r] + their_lo * sizeof(float),
                  their_len * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::WaitForAll(uint32_t step, absl::Time deadline,
                                         const std::string& what) {
  const SegmentHeader* header = layout_->header();
  for (int r = 0; r < options_.world_size; ++r) {
    std::atomic<uint32_t>& word = layout_->control(r)->published_step;
    std::atomic<uint32_t>& sleepers = layout_->control(r)->sleepers;
    auto arrived = [&] { return Reached(word.load(std::memory_order_acquire), step); };
    if (arrived()) continue;
    for (int i = 0; i < spin_iterations_ && !arrived(); ++i) CpuRelax();
    for (int i = 0; i < kYields && !arrived(); ++i) sched_yield();
    while (!arrived()) {
      // A rank that left after this step was complete is not a failure: arrival wins.
      if (const uint32_t broken_by = header->broken_by.load(); broken_by != 0) {
        if (arrived()) break;
        return Break(absl::UnavailableError(absl::StrCat(what, ": ", BrokenByText(broken_by))));
      }
      const absl::Time now = absl::Now();
      if (now >= deadline) {
        std::vector<int> missing;
        for (int m = 0; m < options_.world_size; ++m) {
          if (!Reached(layout_->control(m)->published_step.load(), step)) missing.push_back(m);
        }
        if (missing.empty()) break;
        return Break(absl::DeadlineExceededError(absl::StrCat(
            what, ": ", RankList(missing, options_.world_size), " did not arrive within ",
            absl::ToInt64Milliseconds(options_.timeout), " ms")));
      }
      // Dekker pairing with the publisher (all seq_cst): either it sees this sleeper and wakes
      // it, or this load sees its step and FUTEX_WAIT returns at once.
      sleepers.fetch_add(1);
      const uint32_t seen = word.load();
      if (!Reached(seen, step) && header->broken_by.load() == 0) {
        FutexWait(&word, seen, std::min(deadline - now, kMaxSleep));
      }
      sleepers.fetch_sub(1);
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::CheckSameCall(int buffer, const std::string& what) const {
  const SlotHeader& mine = *layout_->slot_header(options_.rank, buffer);
  for (int r = 0; r < options_.world_size; ++r) {
    const SlotHeader& theirs = *layout_->slot_header(r, buffer);
    if (theirs.op == mine.op && theirs.dtype == mine.dtype && theirs.count == mine.count &&
        theirs.root == mine.root) {
      continue;
    }
    auto describe = [](const SlotHeader& h) {
      const Op op = static_cast<Op>(h.op);
      if (op == Op::kBarrier) return std::string("Barrier");
      if (op == Op::kBroadcast) {
        return absl::StrCat("Broadcast of ", h.count, " bytes from root ", h.root);
      }
      return absl::StrCat(OpName(op), " of ", h.count, " ",
                          std::string(DTypeName(static_cast<DType>(h.dtype))));
    };
    return absl::InvalidArgumentError(absl::StrCat(what, ": ranks disagree: rank ", options_.rank,
                                                   " called ", describe(mine), ", rank ", r,
                                                   " called ", describe(theirs)));
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::AllReduceSum(absl::Span<float> data) {
  if (layout_ == nullptr) return absl::OkStatus();
  if (data.size() * sizeof(float) >= options_.reduce_scatter_min_bytes) {
    return AllReduceSumSliced(data);
  }
  const Call call{Op::kAllReduceSum, DType::kF32, data.size()};
  auto* bytes = reinterpret_cast<uint8_t*>(data.data());
  return Run(
      call, data.size() * sizeof(float), layout_->slot_bytes,
      [&](uint8_t* slot, size_t offset, size_t n) { std::memcpy(slot, bytes + offset, n); },
      [&](const uint8_t* const* slots, size_t offset, size_t n) {
        SumF32InRankOrder(slots, options_.world_size, n / sizeof(float),
                          reinterpret_cast<float*>(bytes + offset));
      });
}

absl::Status ShmCommunicator::AllReduceSum(void* data, int64_t count, DType dtype) {
  if (dtype != DType::kF16 && dtype != DType::kBF16) {
    return Communicator::AllReduceSum(data, count, dtype);  // f32 span form, or UNIMPLEMENTED
  }
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("AllReduceSum: count ", count));
  if (layout_ == nullptr) return absl::OkStatus();
  const Call call{Op::kAllReduceSum, dtype, static_cast<uint64_t>(count)};
  auto* bytes = static_cast<uint8_t*>(data);
  return Run(
      call, count * sizeof(uint16_t), layout_->slot_bytes,
      [&](uint8_t* slot, size_t offset, size_t n) { std::memcpy(slot, bytes + offset, n); },
      [&](const uint8_t* const* slots, size_t offset, size_t n) {
        SumHalfInRankOrder(dtype, slots, options_.world_size, n / sizeof(uint16_t),
                           reinterpret_cast<uint16_t*>(bytes + offset));
      });
}

absl::Status ShmCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  absl::Status sizes = CheckAllGatherSizes(world_size(), in.size(), out.size());
  if (!sizes.ok()) return sizes;
  return BytesAllGather(in.data(), in.size() * sizeof(float), DType::kF32, in.size(), out.data());
}

absl::Status ShmCommunicator::AllGather(const void* in, int64_t in_count, DType dtype, void* out) {
  if (dtype == DType::kF32 || (dtype != DType::kF16 && dtype != DType::kBF16)) {
    return Communicator::AllGather(in, in_count, dtype, out);  // f32 span form, or UNIMPLEMENTED
  }
  if (in_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("AllGather: in_count ", in_count));
  }
  return BytesAllGather(in, in_count * sizeof(uint16_t), dtype, in_count, out);
}

absl::Status ShmCommunicator::BytesAllGather(const void* in, size_t in_bytes, DType dtype,
                                             int64_t count, void* out) {
  if (layout_ == nullptr) {
    if (in_bytes > 0) std::memcpy(out, in, in_bytes);
    return absl::OkStatus();
  }
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  const Call call{Op::kAllGather, dtype, static_cast<uint64_t>(count)};
  return Run(
      call, in_bytes, layout_->slot_bytes,
      [&](uint8_t* slot, size_t offset, size_t n) { std::memcpy(slot, src + offset, n); },
      [&](const uint8_t* const* slots, size_t offset, size_t n) {
        for (int r = 0; r < options_.world_size; ++r) {
          std::memcpy(dst + r * in_bytes + offset, slots[r], n);
        }
      });
}

absl::Status ShmCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  absl::Status valid_root = CheckBroadcastRoot(world_size(), root);
  if (!valid_root.ok()) return valid_root;
  if (layout_ == nullptr) return absl::OkStatus();
  // Only the root's slot carries data; the others publish their SlotHeader alone.
  const bool is_root = root == options_.rank;
  const Call call{Op::kBroadcast, DType::kF32, data.size(), static_cast<uint32_t>(root)};
  return Run(
      call, data.size(), layout_->slot_bytes,
      [&](uint8_t* slot, size_t offset, size_t n) {
        if (is_root) std::memcpy(slot, data.data() + offset, n);
      },
      [&](const uint8_t* const* slots, size_t offset, size_t n) {
        if (!is_root) std::memcpy(data.data() + offset, slots[root], n);
      });
}

absl::Status ShmCommunicator::Barrier() {
  if (layout_ == nullptr) return absl::OkStatus();
  return Run(
      Call{Op::kBarrier}, 0, layout_->slot_bytes, [](uint8_t*, size_t, size_t) {},
      [](const uint8_t* const*, size_t, size_t) {});
}

std::string ShmCommunicator::Describe() const {
  return absl::StrCat("shm rank ", options_.rank, "/", options_.world_size, " (same host)");
}

}  // namespace tpserve
