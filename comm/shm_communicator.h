// Collectives between CPU ranks on one host through one POSIX shared-memory segment: no
// sockets, no copies through the kernel, one memcpy in and a rank-ordered sum out.
//
//   ShmOptions options{.rank = 1, .world_size = 3, .timeout = absl::Seconds(5)};
//   TP_ASSIGN_OR_RETURN(auto comm, ShmCommunicator::ConnectWithFileStore(options, dir, "run7"));
//
// Rendezvous: rank 0 creates the segment (shm_segment.h: random name, O_EXCL) and publishes its
// name in a gloo::rendezvous::Store (the store Gloo would use: FileStore, HashStore, KvGlooStore);
// the others open it. The last rank to map it unlinks the name, and Connect returns once every
// rank has mapped it: once all ranks' Connect calls have returned nothing is left in /dev/shm,
// whatever happens to the processes later (rank 0 unlinks too if it gives up). A rank that
// does not arrive within `timeout` fails every connected rank with DEADLINE_EXCEEDED naming it.
//
// Protocol: each rank owns two slots of `max_bytes` (double buffering) and a sequence counter
// (a std::atomic<uint32_t> in the segment: lock-free, so address-free across processes). A
// step: write this rank's piece into its slot, publish the step number, wait until every rank
// has published it, read. Successive pieces alternate between the two slots, and a rank starts
// a piece only after every rank has published the previous one, which each does only after it
// has finished reading the piece before: so a slot is never overwritten while a peer may still
// read it. Messages larger than a slot go in pieces of `max_bytes`; none is refused.
// Results: AllReduceSum adds all slots in rank order, ((x0 + x1) + x2) + ..., so every rank
// gets bitwise the same floats, and the same as InProcessCommunicator's. From
// `reduce_scatter_min_bytes` on, each rank sums only its slice of a piece (same order, same
// bits) and copies the other slices from their owners' slots: one more step per piece, but
// world_size times less summing per rank. In alternating comm_bench runs on 2 shared cores
// that was faster at 3-4 ranks from 64 KiB on, even at 36 KiB, slower below at 4 ranks.
// f16 and bf16 are summed in f32 in rank order and rounded once (NCCL rounds per addition).
// AllToAll (per-peer counts) sends each rank's stream through its slot: its send and recv
// counts first (16 bytes per rank), then its pieces for the other ranks in rank order, in as
// many steps as the longest stream needs (shm_all_to_all.h). A rank reads only its pieces out
// of the peers' slots and copies its own piece directly. Every rank has all counts after the
// same step: there each checks that they pair up (rank p's send_counts[q] == rank q's
// recv_counts[p]), so a mismatch is INVALID_ARGUMENT on every rank with `out` untouched.
// Waiting: spin briefly (pause), yield, then sleep on the counter with FUTEX_WAIT (shared, not
// FUTEX_PRIVATE: the word is in another process too); a publisher calls FUTEX_WAKE only when a
// peer sleeps. Without a core to spare spinning is skipped, so waiters never starve peers.
// Deadlines: every collective must complete within `timeout`; otherwise DEADLINE_EXCEEDED, e.g.
// "shm AllReduceSum #1234 on rank 0: rank 2 of 3 did not arrive within 5000 ms". That breaks
// the group: this communicator fails every later call at once with UNAVAILABLE, and peers that
// wait (now or later) get UNAVAILABLE naming the rank that broke it instead of their own
// timeout. Ranks that pass different collectives, sizes, roots or all-to-all counts that do not
// pair up all get INVALID_ARGUMENT and the group stays usable.
//
// Why not Open MPI's shared-memory transport (btl/vader, libopenmpi-dev 4.1.4 in Debian 12):
// - Process model: MPI ranks are launched by mpirun/PMIx and meet in MPI_Init; ours are started
//   by the coordinator (threads in tests) and meet through our own store.
// - Failures: the default MPI error handler aborts the job and a peer that never arrives hangs
//   MPI_Allreduce (MPI has no per-call timeout); we need a deadline that names the rank.
// - Results: Open MPI picks its all-reduce algorithm by size and rank count, so the order of the
//   additions, hence the bits, is not ours to fix; here it is rank order, as in-process.
// - Weight: libopenmpi-dev pulls in about 35 Debian packages (gfortran, hwloc, pmix, ucx).
// - Latency: vader also copies through shared memory and polls; not measured here, and there is
//   no reason to expect one step through shared slots to lose to it for 2-64 KiB messages.
//
// Threading: one thread at a time per communicator, as for every Communicator. Ranks may be
// threads of one process or separate processes of one host (same /dev/shm).
#ifndef TPSERVE_COMM_SHM_COMMUNICATOR_H_
#define TPSERVE_COMM_SHM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/shm_layout.h"
#include "comm/shm_segment.h"
#include "formats/dtype.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace tpserve {

struct ShmOptions {
  int rank = 0;
  int world_size = 1;
  // Bound on each collective after the first.
  absl::Duration timeout = absl::Seconds(30);
  // Bound on the connect and the first collective; below `timeout` (0 included): `timeout`.
  absl::Duration startup_timeout = absl::ZeroDuration();
  // Capacity of each rank's slot; larger messages go in pieces. Segment size is about
  // 2 * world_size * max_bytes. In [64 B, 1 GiB]; every rank must pass the same value.
  size_t max_bytes = size_t{1} << 20;
  // Put into the segment's name (sanitised), to tell whose it is while it exists.
  std::string run_id;
  // Busy-wait polls before yielding and sleeping. -1: 20000 (a few hundred us) when this
  // process may run on at least as many CPUs as there are ranks, else 0 (a spinning rank
  // would take the core its peer needs).
  int spin_iterations = -1;
  // All-reduces of at least this many bytes are split reduce-scatter style: each rank sums one
  // slice and copies the others' (same bits, less work per rank, one more step per piece).
  size_t reduce_scatter_min_bytes = size_t{32} << 10;
};

// INVALID_ARGUMENT naming the field unless 0 <= rank < world_size, timeout >= 1ms and max_bytes
// is in range.
absl::Status ValidateShmOptions(const ShmOptions& options);

class ShmCommunicator final : public Communicator {
 public:
  // Creates (rank 0) or opens (others) the segment through `store`, used only during this call
  // under the key "shm_segment" (prefix the store per run). Returns once every rank has mapped
  // it; DEADLINE_EXCEEDED naming the missing ranks after options.timeout.
  static absl::StatusOr<std::unique_ptr<ShmCommunicator>> Connect(const ShmOptions& options,
                                                                  gloo::rendezvous::Store& store);
  // Connect() through a FileStore in `store_dir` (created if missing) under prefix `run_id`.
  // Keys stay in the directory: use a fresh run_id per launch, or ranks read a stale name.
  static absl::StatusOr<std::unique_ptr<ShmCommunicator>> ConnectWithFileStore(
      const ShmOptions& options, const std::string& store_dir, const std::string& run_id);

  // Tells waiting peers this rank has left (they fail at once instead of timing out); unmaps.
  ~ShmCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  // kF32, kF16 and kBF16 (summed in f32); other types: UNIMPLEMENTED from the base class.
  absl::Status AllReduceSum(void* data, int64_t count, DType dtype) override;
  absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out) override;
  // Any dtype of whole elements, moved as bytes; see the file comment.
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  absl::Status Barrier() override;
  // Breaks the group (as a failure does): every rank's wait in progress, this one's included,
  // ends at once with UNAVAILABLE, and so does every later collective. Any thread.
  void RequestAbort() override;
  // "shm rank 1/3 (same host)".
  std::string Describe() const override;

  // The segment's shm_open name (unlinked once every rank's Connect has returned); empty for
  // one rank.
  const std::string& segment_name() const { return segment_.name(); }

 private:
  enum class Op : uint32_t { kAllReduceSum = 1, kAllGather, kBroadcast, kBarrier, kAllToAll };
  struct Call {
    Op op;
    DType dtype = DType::kF32;
    uint64_t count = 0;  // elements of the whole message (per rank for AllGather; 0 AllToAll)
    uint32_t root = 0;
  };
  // Copies this rank's part of the piece [offset, offset + bytes) into `slot`.
  using FillFn = absl::FunctionRef<void(uint8_t* slot, size_t offset, size_t bytes)>;
  // Reads the piece from every rank's slot (slots[r], r in rank order).
  using ReadFn = absl::FunctionRef<void(const uint8_t* const* slots, size_t offset, size_t bytes)>;

  ShmCommunicator(const ShmOptions& options, ShmSegment segment, std::unique_ptr<ShmLayout> layout);

  static const char* OpName(Op op);
  // Moves `message_bytes` through the slots in pieces of at most `piece_bytes` (a multiple of the
  // element size), one step each; an empty message is one step with no data (a barrier).
  absl::Status Run(const Call& call, size_t message_bytes, size_t piece_bytes, FillFn fill,
                   ReadFn read);
  // Reduce-scatter then all-gather through the slots: each rank sums one slice of each piece
  // (in rank order, so the same bits as Run's sum), two steps per piece.
  absl::Status AllReduceSumSliced(absl::Span<float> data);
  // Counts the collective and names it in `what` ("shm Barrier #3 on rank 1"); UNAVAILABLE at
  // once if this communicator or the group is broken.
  absl::Status Begin(Op op, std::string* what);
  // This collective's time: the startup timeout for the first, `timeout` after.
  absl::Duration NextBudget();
  void WriteSlotHeader(const Call& call, int buffer);
  // Publishes this rank's next step, waits until every rank has, and checks that all ranks'
  // slot headers in `buffer` name the same call.
  absl::Status Sync(int buffer, absl::Time deadline, const std::string& what);
  absl::Status WaitForAll(uint32_t step, absl::Time deadline, const std::string& what);
  absl::Status CheckSameCall(int buffer, const std::string& what) const;
  // Breaks the group on error, so peers fail fast; records why for later calls.
  absl::Status Break(absl::Status status);
  // AllGather of `count` elements of `dtype` (in_bytes in all) from every rank.
  absl::Status BytesAllGather(const void* in, size_t in_bytes, DType dtype, int64_t count,
                              void* out);

  const ShmOptions options_;
  ShmSegment segment_;
  std::unique_ptr<ShmLayout> layout_;  // null when world_size == 1
  int spin_iterations_ = 0;
  uint32_t step_ = 0;    // steps this rank has published
  uint64_t rounds_ = 0;  // pieces moved; a piece uses slot buffer rounds_ % 2 for all its steps
  bool started_ = false;   // a collective has begun (NextBudget)
  int64_t budget_ms_ = 0;  // the current collective's, for messages
  uint64_t collectives_ = 0;  // collectives called, for messages ("#12")
  std::string broken_reason_;
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_SHM_COMMUNICATOR_H_
