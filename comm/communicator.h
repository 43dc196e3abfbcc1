// Collectives that join the tensor-parallel ranks of one model replica. The model calls them
// after row-parallel layers (all-reduce) and for the vocab-parallel LM head (all-gather).
//
//   TP_RETURN_IF_ERROR(comm.AllReduceSum(absl::MakeSpan(partial_out)));
//   TP_RETURN_IF_ERROR(comm.AllGather(my_logits, absl::MakeSpan(all_logits)));
//
// Implementations: in-process (threads; tests), Gloo over TCP (CPU ranks), NCCL (GPU ranks).
// Every collective has a deadline: a peer that stops answering yields DEADLINE_EXCEEDED or
// UNAVAILABLE naming the collective and the rank, never a hang.
// Completion: the host implementations (in-process, Gloo) finish each collective inside the
// call. NCCL only enqueues it on the backend's stream, in order with the compute ops around it
// (no wait per collective), and its deadline runs in AwaitCollectives(), which a step calls
// once, before it first reads a result on the host:
//
//   comm.AllGather(partials, n, DType::kF32, gathered);   // enqueued, returns at once
//   backend.SumChunks(gathered, ...);                     // same stream: runs after it
//   TP_RETURN_IF_ERROR(comm.AwaitCollectives());          // the watchdog: done, or an error
//   backend.CopyToHost(...);
// Threading: one Communicator belongs to one rank and is called from one thread at a time; all
// ranks must call the same collectives in the same order with the same sizes.
// Argument errors one rank can see alone (AllGather `out` size, Broadcast root out of range)
// return INVALID_ARGUMENT at once without joining the collective; its peers then time out.
#ifndef TPSERVE_COMM_COMMUNICATOR_H_
#define TPSERVE_COMM_COMMUNICATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "formats/dtype.h"

namespace tpserve {

// A group's deadline while it starts (the connect, the rendezvous, and its first collective,
// which may set up connections lazily or wait for slower peers): `startup`, or `timeout` where
// that is longer (a startup timeout of 0 means none of its own). Every collective after the
// first is bounded by `timeout` alone.
inline absl::Duration StartupTimeout(absl::Duration startup, absl::Duration timeout) {
  return startup > timeout ? startup : timeout;
}

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place: every rank's `data` becomes the element-wise sum over ranks.
  virtual absl::Status AllReduceSum(absl::Span<float> data) = 0;
  // `out` has world_size * in.size() elements; rank r's `in` lands at out[r * in.size()].
  virtual absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) = 0;
  // Typed forms, for activations in a backend's dtype (bf16 on GPUs). `data`/`in`/`out` are in
  // the memory this implementation works on (host for Gloo and in-process, device for NCCL).
  // The defaults serve kF32 through the span forms above and return UNIMPLEMENTED naming the
  // dtype otherwise.
  virtual absl::Status AllReduceSum(void* data, int64_t count, DType dtype);
  virtual absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out);
  // All-to-all with per-peer counts (MPI_Alltoallv), of `dtype` elements: `in` holds
  // send_counts[0] elements for rank 0, then send_counts[1] for rank 1, ...; `out` receives
  // recv_counts[0] elements from rank 0, then recv_counts[1] from rank 1, ... (this rank's own
  // piece is copied). Rank p's send_counts[q] must equal rank q's recv_counts[p]: expert
  // parallelism computes both from the routing every rank holds, so no counts travel. Both
  // spans have world_size() entries, each >= 0 (INVALID_ARGUMENT otherwise, at once, as
  // CheckAllToAllCounts says). Memory as for the typed forms above; every dtype is moved as
  // bytes (nothing is summed).
  virtual absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts,
                                void* out, absl::Span<const int64_t> recv_counts,
                                DType dtype) = 0;
  // Root's `out` receives world_size * in_count elements of `dtype`, rank r's `in` at
  // out[r * in_count]; the other ranks only send (their `out` is not touched and may be null).
  // Memory as for the typed forms above. The default is an AllToAll in which every rank sends
  // only to root (errors name that AllToAll); it moves 1/world_size of an AllGather's bytes.
  virtual absl::Status Gather(const void* in, int64_t in_count, DType dtype, void* out,
                              int root);
  // `data` on every rank becomes root's `data` (used for token ids as floats-free bytes too).
  virtual absl::Status Broadcast(absl::Span<uint8_t> data, int root) = 0;
  // Returns once every rank has called it, with every collective before it complete.
  virtual absl::Status Barrier() = 0;

  // Blocks until every collective this communicator has enqueued is complete (for NCCL: the
  // stream has run past them), or fails with DEADLINE_EXCEEDED / UNAVAILABLE naming the rank
  // and the collective, after which the communicator is broken. NCCL's deadline counts only
  // the time each collective runs after the work queued before it has finished, not that
  // work. Host implementations have nothing in flight between calls: the default returns OK.
  virtual absl::Status AwaitCollectives() { return absl::OkStatus(); }

  // ---- Recorded steps (Backend::RunCaptured: CUDA graphs) ----

  // Whether this communicator's collectives may sit inside a step the backend records and
  // replays: NCCL's can (they are enqueued on the backend's stream, so a capture of that
  // stream records them and a replay runs them). A host implementation (in-process, Gloo, shm)
  // runs each collective inside the call, which a replay would skip: false, and a step with
  // collectives is then never recorded.
  virtual bool capturable() const { return false; }

  // Runs `run`, which queues a step's work on the backend's stream, collectives included, in
  // a way this communicator may not see call by call: Backend::RunCaptured, which runs its body
  // (an eager run, or one being recorded, whose collectives are enqueued here as usual) or
  // replays a recording (whose collectives never pass through here). The next
  // AwaitCollectives waits for everything `run` queued as one collective named `what`, its
  // deadline counted from when the work queued before it has finished, so a replay is watched
  // like the collectives it holds. Errors of `run` are returned (and break NCCL's
  // communicator, as a failed enqueue does). The default, for host implementations whose
  // collectives finish inside their calls: run().
  virtual absl::Status RunRecorded(std::string_view what, absl::FunctionRef<absl::Status()> run) {
    (void)what;
    return run();
  }

  // Makes the wait in progress and every later call fail with UNAVAILABLE, aborting what is
  // in flight (NCCL: ncclCommAbort, which also frees kernels stuck waiting on a peer): for a
  // rank being torn down or known to be broken. The one member any thread may call, at any
  // time. Host implementations finish every collective inside the call and their own
  // deadline ends it: the default does nothing.
  virtual void RequestAbort() {}

  // One line for logs and error messages, e.g. "gloo rank 1/2 via 127.0.0.1".
  virtual std::string Describe() const;
};

// Broadcast of int32 values (token ids, lengths) through the byte Broadcast. Every rank's
// `values` must have the same size; the bytes travel in host order (ranks share one ABI).
absl::Status BroadcastInt32s(Communicator& comm, absl::Span<int32_t> values, int root);

// Argument checks shared by the implementations (local; they need no peer).
// INVALID_ARGUMENT unless out_count == world_size * in_count.
absl::Status CheckAllGatherSizes(int world_size, size_t in_count, size_t out_count);
// INVALID_ARGUMENT unless 0 <= root < world_size (the message names `collective`).
absl::Status CheckBroadcastRoot(int world_size, int root, std::string_view collective = "Broadcast");
// INVALID_ARGUMENT unless both count lists have world_size entries, none negative, and dtype
// is one of whole elements (not a block-quantized type).
absl::Status CheckAllToAllCounts(int world_size, absl::Span<const int64_t> send_counts,
                                 absl::Span<const int64_t> recv_counts, DType dtype);

// The trivial communicator of a single rank: every collective is the identity.
class SingleRankCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(absl::Span<float>) override { return absl::OkStatus(); }
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  // A copy of `in` to `out`; INVALID_ARGUMENT when the counts differ.
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  absl::Status Broadcast(absl::Span<uint8_t>, int root) override;
  absl::Status Barrier() override { return absl::OkStatus(); }
  std::string Describe() const override { return "single rank"; }
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_COMMUNICATOR_H_
