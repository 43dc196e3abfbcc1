// Tensor-parallel ranks as threads of one process: the fake communicator for tests and for
// single-host runs without a network. Ranks meet in a shared InProcessGroup; the last rank to
// arrive does the whole collective, so sums are added in rank order (((x0 + x1) + x2) + ...) and
// every rank gets bitwise the same result, run after run.
//
//   auto group = std::make_shared<InProcessGroup>(/*world_size=*/2);
//   InProcessCommunicator comm(group, /*rank=*/1);  // then, on rank 1's thread: comm.Barrier()
//
// Failure model: a collective that the other ranks do not join within `timeout` returns
// DEADLINE_EXCEEDED naming the collective and the missing ranks, and breaks the group (like a
// real transport, it cannot tell a slow rank from a dead one). Abort() breaks it on purpose.
// Once broken, every waiting and later collective on every rank returns UNAVAILABLE with the
// reason. Ranks that pass different sizes, roots or collectives (or all-to-all counts
// that do not pair up) get INVALID_ARGUMENT; that leaves the group usable.
// Threading: InProcessGroup is thread-safe. Each InProcessCommunicator is used by one thread at
// a time (its rank's); Abort() may be called from any thread.
#ifndef TPSERVE_COMM_IN_PROCESS_COMMUNICATOR_H_
#define TPSERVE_COMM_IN_PROCESS_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"

namespace tpserve {

// What one rank brings to a collective. Buffers stay valid while the rank waits in Run().
struct InProcessCall {
  enum class Op { kAllReduceSum, kAllGather, kBroadcast, kBarrier, kAllToAll };
  Op op = Op::kBarrier;
  const void* in = nullptr;  // AllGather input
  void* data = nullptr;      // AllReduceSum/Broadcast in-out, AllGather output
  size_t in_count = 0;       // elements of `in`
  size_t data_count = 0;     // elements (floats or bytes) of `data`
  int root = 0;              // Broadcast only
  // AllToAll only: elements per peer, and the bytes of one element.
  absl::Span<const int64_t> send_counts;
  absl::Span<const int64_t> recv_counts;
  size_t elem_bytes = 0;
};

const char* InProcessOpName(InProcessCall::Op op);

class InProcessGroup {
 public:
  // REQUIRES: world_size >= 1.
  explicit InProcessGroup(int world_size);
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int world_size() const { return world_size_; }

  // Joins the collective of the current generation as `rank` and returns once all ranks have
  // joined and it is done (OK or INVALID_ARGUMENT), the group breaks (UNAVAILABLE), or `timeout`
  // passes (DEADLINE_EXCEEDED; breaks the group).
  // REQUIRES: 0 <= rank < world_size, and at most one call per rank at a time.
  absl::Status Run(int rank, const InProcessCall& call, absl::Duration timeout);

  // Breaks the group: every waiting and later Run() returns UNAVAILABLE mentioning `reason`.
  // The first reason wins.
  void Abort(const std::string& reason);

  bool broken() const;

 private:
  absl::Status CompleteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckCallsMatchLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReduceSumLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AllToAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingRanksLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status BrokenStatusLocked(const char* op_name, int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int world_size_;
  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int num_arrived_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<bool> arrived_ ABSL_GUARDED_BY(mu_);         // [world_size]
  std::vector<InProcessCall> calls_ ABSL_GUARDED_BY(mu_);  // [world_size]
  // Outcome of the generation that just completed, read by the ranks it wakes.
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  std::string broken_reason_ ABSL_GUARDED_BY(mu_);  // empty while healthy
  std::vector<float> sum_scratch_ ABSL_GUARDED_BY(mu_);
};

class InProcessCommunicator final : public Communicator {
 public:
  static constexpr absl::Duration kDefaultTimeout = absl::Seconds(30);

  // REQUIRES: group != nullptr and 0 <= rank < group->world_size().
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank,
                        absl::Duration timeout = kDefaultTimeout);

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  absl::Status Barrier() override;
  std::string Describe() const override;

  // Breaks the whole group (see the file comment); safe from any thread.
  void Abort(const std::string& reason);

 private:
  std::shared_ptr<InProcessGroup> group_;
  const int rank_;
  const absl::Duration timeout_;
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_IN_PROCESS_COMMUNICATOR_H_
