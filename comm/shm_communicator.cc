#include "comm/shm_communicator.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "comm/rank_order_sum.h"
#include "comm/rendezvous_store.h"
#include "comm/shm_all_to_all.h"
#include "gloo/rendezvous/store.h"

namespace tpserve {
namespace {

constexpr char kStoreKey[] = "shm_segment";

std::string RankList(const std::vector<int>& ranks, int world_size) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "), " of ",
                      world_size);
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
  ShmLayout bound = layout;
  bound.Bind(segment->data());
  InitShmSegment(bound);
  bound.header()->reduce_scatter_min_bytes = options.reduce_scatter_min_bytes;
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
    store.wait({kStoreKey},
               std::chrono::milliseconds(absl::ToInt64Milliseconds(
                   StartupTimeout(options.startup_timeout, options.timeout))));
    const std::vector<char> value = store.get(kStoreKey);
    name.assign(value.begin(), value.end());
  } catch (const std::exception& e) {
    return StatusFromStoreError(
        absl::StrCat(who, ": rank 0 did not publish the segment name within ",
                     absl::ToInt64Milliseconds(
                         StartupTimeout(options.startup_timeout, options.timeout)),
                     " ms"),
        e);
  }
  absl::StatusOr<ShmSegment> segment = ShmSegment::Open(name);
  if (!segment.ok()) {
    return absl::Status(segment.status().code(),
                        absl::StrCat(who, ": ", segment.status().message(),
                                     " (rank 0 gave up, or the store holds a name from an earlier "
                                     "run with this run_id)"));
  }
  const auto* header = static_cast<const ShmSegmentHeader*>(segment->data());
  if (segment->size() < sizeof(ShmSegmentHeader) || header->magic != kShmMagic ||
      header->version != kShmLayoutVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        who, ": ", name, " is not a tpserve shm segment of layout version ", kShmLayoutVersion));
  }
  // Tell rank 0 at once (in the layout it made, which may not be ours), not at its timeout.
  auto refuse = [&](const std::string& why) {
    if (segment->size() == header->total_bytes) {
      ShmLayout theirs = ShmLayout::For(header->world_size, header->slot_bytes);
      theirs.Bind(segment->data());
      BreakShmGroup(theirs, options.rank, ShmBreak::kFailed);
    }
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", why));
  };
  if (header->world_size != static_cast<uint32_t>(options.world_size) ||
      header->slot_bytes != layout.slot_bytes || header->total_bytes != segment->size() ||
      header->total_bytes != layout.total_bytes) {
    return refuse(absl::StrCat("rank 0 made the segment for world_size ", header->world_size,
                               " and max_bytes ", header->slot_bytes, ", this rank has world_size ",
                               options.world_size, " and max_bytes ", layout.slot_bytes,
                               " (rounded up to 64)"));
  }
  if (header->reduce_scatter_min_bytes != options.reduce_scatter_min_bytes) {
    return refuse(absl::StrCat("rank 0 has reduce_scatter_min_bytes ",
                               header->reduce_scatter_min_bytes, ", this rank ",
                               options.reduce_scatter_min_bytes, "; all ranks must agree"));
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
  const absl::Duration startup = StartupTimeout(options.startup_timeout, options.timeout);
  const absl::Time deadline = absl::Now() + startup;
  const std::string who =
      absl::StrCat("shm connect of rank ", options.rank, " of ", options.world_size);
  auto layout = std::make_unique<ShmLayout>(ShmLayout::For(options.world_size, options.max_bytes));
  absl::StatusOr<ShmSegment> segment = options.rank == 0
                                           ? CreateAndPublish(options, *layout, store, who)
                                           : FindAndOpen(options, *layout, store, who);
  if (!segment.ok()) return segment.status();
  layout->Bind(segment->data());
  ShmSegmentHeader* header = layout->header();
  layout->control(options.rank)->attached.store(1);
  // The last rank to map the segment unlinks its name; rank 0 also does if it gives up.
  if (header->attached_ranks.fetch_add(1) + 1 == static_cast<uint32_t>(options.world_size)) {
    segment->Unlink().IgnoreError();
  }
  while (header->attached_ranks.load() < static_cast<uint32_t>(options.world_size)) {
    absl::Status failed;
    if (const uint32_t broken_by = header->broken_by.load(); broken_by != 0) {
      failed = absl::UnavailableError(absl::StrCat(who, ": ", ShmBrokenByText(broken_by)));
    } else if (absl::Now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < options.world_size; ++r) {
        if (layout->control(r)->attached.load() == 0) missing.push_back(r);
      }
      failed = absl::DeadlineExceededError(
          absl::StrCat(who, ": ", RankList(missing, options.world_size), " did not arrive within ",
                       absl::ToInt64Milliseconds(startup), " ms"));
      BreakShmGroup(*layout, options.rank, ShmBreak::kFailed);
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
  std::unique_ptr<ShmCommunicator> comm;
  TP_RETURN_IF_ERROR(WithFileStore(store_dir, run_id, "shm",
                                   [&](gloo::rendezvous::Store& store) -> absl::Status {
                                     TP_ASSIGN_OR_RETURN(comm, Connect(options, store));
                                     return absl::OkStatus();
                                   }));
  return comm;
}

ShmCommunicator::ShmCommunicator(const ShmOptions& options, ShmSegment segment,
                                 std::unique_ptr<ShmLayout> layout)
    : options_(options),
      segment_(std::move(segment)),
      layout_(std::move(layout)),
      spin_iterations_(options.spin_iterations >= 0
                           ? options.spin_iterations
                           : DefaultShmSpinIterations(options.world_size)) {}

ShmCommunicator::~ShmCommunicator() {
  // Safe after a completed collective: a peer still in it waits for no one (all published).
  if (layout_ != nullptr) BreakShmGroup(*layout_, options_.rank, ShmBreak::kLeft);
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
    case Op::kAllToAll:
      return "AllToAll";
  }
  return "unknown collective";
}

void ShmCommunicator::RequestAbort() {
  if (layout_ != nullptr) BreakShmGroup(*layout_, options_.rank, ShmBreak::kFailed);
}

absl::Status ShmCommunicator::Break(absl::Status status) {
  if (broken_reason_.empty()) broken_reason_ = std::string(status.message());
  if (layout_ != nullptr) BreakShmGroup(*layout_, options_.rank, ShmBreak::kFailed);
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
    return Break(absl::UnavailableError(absl::StrCat(*what, ": ", ShmBrokenByText(broken_by))));
  }
  return absl::OkStatus();
}

void ShmCommunicator::WriteSlotHeader(const Call& call, int buffer) {
  *layout_->slot_header(options_.rank, buffer) = ShmSlotHeader{
      static_cast<uint32_t>(call.op), static_cast<uint32_t>(call.dtype), call.root, call.count};
}

absl::Status ShmCommunicator::Sync(int buffer, absl::Time deadline, const std::string& what) {
  const uint32_t step = ++step_;
  PublishStep(*layout_, options_.rank, step);
  absl::Status status = WaitForAll(step, deadline, what);
  if (!status.ok()) return status;
  return CheckSameCall(buffer, what);
}

absl::Duration ShmCommunicator::NextBudget() {
  const absl::Duration budget =
      started_ ? options_.timeout : StartupTimeout(options_.startup_timeout, options_.timeout);
  started_ = true;
  budget_ms_ = absl::ToInt64Milliseconds(budget);
  return budget;
}

absl::Status ShmCommunicator::Run(const Call& call, size_t message_bytes, size_t piece_bytes,
                                  FillFn fill, ReadFn read) {
  std::string what;
  absl::Status status = Begin(call.op, &what);
  if (!status.ok()) return status;
  const absl::Time deadline = absl::Now() + NextBudget();
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
  const absl::Time deadline = absl::Now() + NextBudget();
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
  for (int r = 0; r < options_.world_size; ++r) {
    if (r == options_.rank) continue;
    switch (WaitForStep(*layout_, r, step, deadline, spin_iterations_)) {
      case ShmWait::kArrived:
        break;
      case ShmWait::kBroken:
        return Break(absl::UnavailableError(
            absl::StrCat(what, ": ", ShmBrokenByText(layout_->header()->broken_by.load()))));
      case ShmWait::kTimedOut: {
        std::vector<int> missing;
        for (int m = 0; m < options_.world_size; ++m) {
          if (!StepReached(*layout_, m, step)) missing.push_back(m);
        }
        return Break(absl::DeadlineExceededError(absl::StrCat(
            what, ": ", RankList(missing, options_.world_size), " did not arrive within ",
            absl::ToInt64Milliseconds(absl::Milliseconds(budget_ms_)), " ms")));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::CheckSameCall(int buffer, const std::string& what) const {
  const ShmSlotHeader& mine = *layout_->slot_header(options_.rank, buffer);
  for (int r = 0; r < options_.world_size; ++r) {
    const ShmSlotHeader& theirs = *layout_->slot_header(r, buffer);
    if (theirs.op == mine.op && theirs.dtype == mine.dtype && theirs.count == mine.count &&
        theirs.root == mine.root) {
      continue;
    }
    auto describe = [](const ShmSlotHeader& h) {
      const Op op = static_cast<Op>(h.op);
      if (op == Op::kBarrier) return std::string("Barrier");
      if (op == Op::kAllToAll) {
        return absl::StrCat("AllToAll of ", std::string(DTypeName(static_cast<DType>(h.dtype))));
      }
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

absl::Status ShmCommunicator::AllToAll(const void* in, absl::Span<const int64_t> send_counts,
                                       void* out, absl::Span<const int64_t> recv_counts,
                                       DType dtype) {
  absl::Status counts = CheckAllToAllCounts(world_size(), send_counts, recv_counts, dtype);
  if (!counts.ok()) return counts;
  if (layout_ == nullptr) {
    return SingleRankCommunicator().AllToAll(in, send_counts, out, recv_counts, dtype);
  }
  const Call call{Op::kAllToAll, dtype};
  std::string what;
  absl::Status status = Begin(call.op, &what);
  if (!status.ok()) return status;
  const absl::Time deadline = absl::Now() + NextBudget();
  const size_t slot_bytes = layout_->slot_bytes;
  ShmAllToAll plan(options_.world_size, options_.rank, send_counts, recv_counts,
                   static_cast<size_t>(BlockBytes(dtype)));
  for (size_t window = 0; !plan.Done(window); window += slot_bytes) {
    const int buffer = ++rounds_ & 1;
    WriteSlotHeader(call, buffer);
    plan.Fill(static_cast<const uint8_t*>(in), window, slot_bytes,
              layout_->data(options_.rank, buffer));
    status = Sync(buffer, deadline, what);
    if (!status.ok()) return status;
    status = plan.Read(layout_->slot_data[buffer].data(), window, slot_bytes,
                       static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out));
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ranks disagree: ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  absl::Status valid_root = CheckBroadcastRoot(world_size(), root);
  if (!valid_root.ok()) return valid_root;
  if (layout_ == nullptr) return absl::OkStatus();
  // Only the root's slot carries data; the others publish their ShmSlotHeader alone.
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
