#include "comm/in_process_communicator.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/all_to_all_counts.h"

namespace tpserve {

const char* InProcessOpName(InProcessCall::Op op) {
  switch (op) {
    case InProcessCall::Op::kAllReduceSum:
      return "AllReduceSum";
    case InProcessCall::Op::kAllGather:
      return "AllGather";
    case InProcessCall::Op::kBroadcast:
      return "Broadcast";
    case InProcessCall::Op::kBarrier:
      return "Barrier";
    case InProcessCall::Op::kAllToAll:
      return "AllToAll";
  }
  return "unknown collective";
}

InProcessGroup::InProcessGroup(int world_size)
    : world_size_(world_size), arrived_(world_size, false), calls_(world_size) {}

bool InProcessGroup::broken() const {
  absl::MutexLock lock(&mu_);
  return !broken_reason_.empty();
}

void InProcessGroup::Abort(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (broken_reason_.empty()) broken_reason_ = reason.empty() ? "aborted" : reason;
}

absl::Status InProcessGroup::Run(int rank, const InProcessCall& call, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const char* op_name = InProcessOpName(call.op);
  absl::MutexLock lock(&mu_);
  if (!broken_reason_.empty()) {
    return BrokenStatusLocked(op_name, rank);
  }
  calls_[rank] = call;
  arrived_[rank] = true;
  ++num_arrived_;
  const uint64_t my_generation = generation_;
  if (num_arrived_ == world_size_) {
    // Last to arrive: every other rank is parked below, so its buffers are stable to touch.
    last_status_ = CompleteLocked();
    num_arrived_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++generation_;
    return last_status_;
  }
  auto done_or_broken = [this, my_generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return generation_ != my_generation || !broken_reason_.empty();
  };
  mu_.AwaitWithDeadline(absl::Condition(&done_or_broken), deadline);
  // The next generation cannot complete before this rank returns, so last_status_ is ours.
  if (generation_ != my_generation) return last_status_;
  const std::string missing = MissingRanksLocked();
  // Withdraw: this rank's buffers stop being valid when it returns.
  arrived_[rank] = false;
  --num_arrived_;
  if (!broken_reason_.empty()) {
    return BrokenStatusLocked(op_name, rank);
  }
  broken_reason_ =
      absl::StrCat("rank ", rank, " timed out in ", op_name, " after ",
                   absl::FormatDuration(timeout), " waiting for ranks [", missing, "]");
  return absl::DeadlineExceededError(
      absl::StrCat(op_name, " on rank ", rank, " of ", world_size_, " timed out after ",
                   absl::FormatDuration(timeout), " waiting for ranks [", missing, "]"));
}

absl::Status InProcessGroup::BrokenStatusLocked(const char* op_name, int rank) const {
  return absl::UnavailableError(absl::StrCat(op_name, " on rank ", rank, " of ", world_size_,
                                             ": group is broken: ", broken_reason_));
}

std::string InProcessGroup::MissingRanksLocked() const {
  std::vector<int> missing;
  for (int r = 0; r < world_size_; ++r) {
    if (!arrived_[r]) missing.push_back(r);
  }
  return absl::StrJoin(missing, ", ");
}

absl::Status InProcessGroup::CheckCallsMatchLocked() const {
  const InProcessCall& first = calls_[0];
  const char* op_name = InProcessOpName(first.op);
  for (int r = 1; r < world_size_; ++r) {
    const InProcessCall& call = calls_[r];
    if (call.op != first.op) {
      return absl::InvalidArgumentError(absl::StrCat("collective mismatch: rank 0 called ", op_name,
                                                     ", rank ", r, " called ",
                                                     InProcessOpName(call.op)));
    }
    const size_t count =
        first.op == InProcessCall::Op::kAllGather ? call.in_count : call.data_count;
    const size_t first_count =
        first.op == InProcessCall::Op::kAllGather ? first.in_count : first.data_count;
    if (first.op == InProcessCall::Op::kAllToAll) continue;  // checked pairwise below
    if (count != first_count) {
      return absl::InvalidArgumentError(absl::StrCat(op_name, ": size mismatch: rank 0 passed ",
                                                     first_count, " elements, rank ", r, " passed ",
                                                     count));
    }
    if (first.op == InProcessCall::Op::kBroadcast && call.root != first.root) {
      return absl::InvalidArgumentError(absl::StrCat("Broadcast: root mismatch: rank 0 names root ",
                                                     first.root, ", rank ", r, " names root ",
                                                     call.root));
    }
  }
  if (first.op != InProcessCall::Op::kAllToAll) return absl::OkStatus();
  for (int p = 0; p < world_size_; ++p) {
    if (calls_[p].elem_bytes != first.elem_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("AllToAll: rank 0 moves ", first.elem_bytes,
                                                     "-byte elements, rank ", p, " ",
                                                     calls_[p].elem_bytes, "-byte ones"));
    }
  }
  std::vector<int64_t> table;
  for (const InProcessCall& call : calls_) {
    const std::vector<int64_t> row = AllToAllCountsRow(call.send_counts, call.recv_counts);
    table.insert(table.end(), row.begin(), row.end());
  }
  absl::Status pairs = CheckAllToAllPairs(world_size_, table);
  if (!pairs.ok()) return absl::InvalidArgumentError(absl::StrCat("AllToAll: ", pairs.message()));
  return absl::OkStatus();
}

void InProcessGroup::ReduceSumLocked() {
  const size_t n = calls_[0].data_count;
  sum_scratch_.resize(n);
  float* sum = sum_scratch_.data();
  std::memcpy(sum, calls_[0].data, n * sizeof(float));
  // Rank order, one rank at a time: the association is fixed, so the bits are too.
  for (int r = 1; r < world_size_; ++r) {
    const float* x = static_cast<const float*>(calls_[r].data);
    for (size_t i = 0; i < n; ++i) sum[i] += x[i];
  }
  for (int r = 0; r < world_size_; ++r) std::memcpy(calls_[r].data, sum, n * sizeof(float));
}

void InProcessGroup::AllToAllLocked() {
  const size_t elem = calls_[0].elem_bytes;
  for (int src = 0; src < world_size_; ++src) {
    const std::vector<size_t> from = AllToAllByteOffsets(calls_[src].send_counts, elem);
    for (int dst = 0; dst < world_size_; ++dst) {
      const size_t bytes = from[dst + 1] - from[dst];
      if (bytes == 0) continue;
      const size_t to = AllToAllByteOffsets(calls_[dst].recv_counts, elem)[src];
      std::memcpy(static_cast<uint8_t*>(calls_[dst].data) + to,
                  static_cast<const uint8_t*>(calls_[src].in) + from[dst], bytes);
    }
  }
}

absl::Status InProcessGroup::CompleteLocked() {
  absl::Status status = CheckCallsMatchLocked();
  if (!status.ok()) return status;
  const InProcessCall& first = calls_[0];
  switch (first.op) {
    case InProcessCall::Op::kAllReduceSum:
      if (first.data_count > 0) ReduceSumLocked();
      break;
    case InProcessCall::Op::kAllGather: {
      const size_t bytes = first.in_count * sizeof(float);
      if (bytes == 0) break;
      for (int dst = 0; dst < world_size_; ++dst) {
        auto* out = static_cast<uint8_t*>(calls_[dst].data);
        for (int src = 0; src < world_size_; ++src) {
          std::memcpy(out + src * bytes, calls_[src].in, bytes);
        }
      }
      break;
    }
    case InProcessCall::Op::kBroadcast: {
      const size_t bytes = first.data_count;
      if (bytes == 0) break;
      const void* from = calls_[first.root].data;
      for (int r = 0; r < world_size_; ++r) {
        if (r != first.root) std::memcpy(calls_[r].data, from, bytes);
      }
      break;
    }
    case InProcessCall::Op::kBarrier:
      break;
    case InProcessCall::Op::kAllToAll:
      AllToAllLocked();
      break;
  }
  return absl::OkStatus();
}

InProcessCommunicator::InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank,
                                             absl::Duration timeout)
    : group_(std::move(group)), rank_(rank), timeout_(timeout) {}

absl::Status InProcessCommunicator::AllReduceSum(absl::Span<float> data) {
  InProcessCall call;
  call.op = InProcessCall::Op::kAllReduceSum;
  call.data = data.data();
  call.data_count = data.size();
  return group_->Run(rank_, call, timeout_);
}

absl::Status InProcessCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  absl::Status status = CheckAllGatherSizes(world_size(), in.size(), out.size());
  if (!status.ok()) return status;
  InProcessCall call;
  call.op = InProcessCall::Op::kAllGather;
  call.in = in.data();
  call.in_count = in.size();
  call.data = out.data();
  call.data_count = out.size();
  return group_->Run(rank_, call, timeout_);
}

absl::Status InProcessCommunicator::AllToAll(const void* in,
                                             absl::Span<const int64_t> send_counts, void* out,
                                             absl::Span<const int64_t> recv_counts, DType dtype) {
  absl::Status status = CheckAllToAllCounts(world_size(), send_counts, recv_counts, dtype);
  if (!status.ok()) return status;
  InProcessCall call;
  call.op = InProcessCall::Op::kAllToAll;
  call.in = in;
  call.data = out;
  call.send_counts = send_counts;
  call.recv_counts = recv_counts;
  call.elem_bytes = static_cast<size_t>(BlockBytes(dtype));
  return group_->Run(rank_, call, timeout_);
}

absl::Status InProcessCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  absl::Status status = CheckBroadcastRoot(world_size(), root);
  if (!status.ok()) return status;
  InProcessCall call;
  call.op = InProcessCall::Op::kBroadcast;
  call.data = data.data();
  call.data_count = data.size();
  call.root = root;
  return group_->Run(rank_, call, timeout_);
}

absl::Status InProcessCommunicator::Barrier() {
  return group_->Run(rank_, InProcessCall{}, timeout_);
}

std::string InProcessCommunicator::Describe() const {
  return absl::StrCat("in-process rank ", rank_, "/", world_size());
}

void InProcessCommunicator::Abort(const std::string& reason) {
  group_->Abort(absl::StrCat("rank ", rank_, " aborted: ", reason));
}

}  // namespace tpserve
