// Collectives between GPU ranks with NCCL. Every pointer passed to a collective is DEVICE
// memory on `device_ordinal` (cudaMalloc'd), not host memory; Broadcast's bytes likewise.
//
//   // rank 0 makes the id, the others read it from the rendezvous store (ShareNcclUniqueId)
//   auto comm = NcclCommunicator::Create({.rank = r, .world_size = 2, .device_ordinal = r,
//                                         .unique_id = id, .stream = backend->stream()});
//   comm->AllReduceSum(x, n, DType::kBF16);   // enqueued on the backend's stream
//   ...                                        // more ops and collectives, same stream
//   TP_RETURN_IF_ERROR(comm->AwaitCollectives());  // the step's one wait, with the deadline
//
// Ordering: collectives are enqueued on `stream` (the rank backend's compute stream, so they
// run in order with its ops) and return without waiting. Their results may be read by later work on the same stream at once, and by the host
// after AwaitCollectives() returns OK. Barrier() waits like AwaitCollectives().
//
// Deadlines: the communicator is non-blocking (ncclConfig_t.blocking = 0). Create polls
// ncclCommGetAsyncError until the peers have joined or `startup_timeout` has passed (a cold
// 8-GPU init takes seconds); the first AwaitCollectives, whose collectives set up NCCL's
// connections lazily, has `startup_timeout` too, every later one `timeout`. Each collective is
// enqueued between two CUDA events, one before (its inputs are ready) and one after (it is
// done), and AwaitCollectives gives each collective `timeout` from the moment the host first
// sees its "before" event complete (collective_clock.h): compute queued ahead of a collective,
// such as a long prefill, never counts against it. The compute itself is bounded by the device
// wait deadline (kernels/cuda/device_wait.h). The waits poll with a sleeping backoff
// (base/poll_wait.h) and hold no core. On a timeout the NCCL communicator is aborted
// (ncclCommAbort, which also stops NCCL kernels stuck on the stream waiting for a peer) and the
// call returns DEADLINE_EXCEEDED; an asynchronous NCCL error (a peer process died, a link
// broke) aborts it too and returns UNAVAILABLE. Both name this rank and the collective. Other
// CUDA/NCCL failures return a Status naming the call, file and line (cuda_status.h). After any
// failure, or RequestAbort(), the communicator is broken: later calls return UNAVAILABLE.
// AllToAll (per-peer counts) is one NCCL group of ncclSend/ncclRecv per peer with a nonzero
// count, and a device copy for this rank's own piece, enqueued and awaited like the other
// collectives. Not ncclAlltoAll even when this rank's counts are all equal: a peer whose
// counts differ would use send/recv, and the two may not be mixed. NCCL requires each send to
// meet a receive of the same count and cannot check it (no counts travel here): counts that do
// not pair up are undefined on the device; at best the collective never completes and
// AwaitCollectives' deadline aborts the communicator. A rank whose own send and recv counts
// differ gets INVALID_ARGUMENT at once.
// CUDA graphs (capturable() is true): a step the backend records (Backend::RunCaptured) runs
// inside RunRecorded, which brackets it with the two events as one collective. A collective
// enqueued while the stream is being captured records no events of its own (it is part of the
// graph: a replay runs it without passing through here), so the watchdog waits on the events
// recorded around each run or replay, never on events a replay would not record again.
// Threading: one thread at a time per communicator; RequestAbort() may be called from any
// thread. Each rank needs its own GPU (NCCL refuses two ranks on one device).
#ifndef TPSERVE_COMM_NCCL_COMMUNICATOR_H_
#define TPSERVE_COMM_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "comm/nccl_unique_id.h"
#include "formats/dtype.h"
#include "kernels/cuda/cuda_device.h"

// Opaque CUDA/NCCL handles, so this header needs no CUDA include.
struct ncclComm;
struct CUstream_st;
struct CUevent_st;

namespace tpserve {

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  int device_ordinal = 0;
  std::string unique_id;  // kNcclUniqueIdBytes bytes from NewNcclUniqueId(), same on all ranks
  // Each collective from when its inputs are ready (see "Deadlines" above).
  absl::Duration timeout = absl::Seconds(30);
  // Init and the first collectives; below `timeout` (0 included): `timeout`.
  absl::Duration startup_timeout = absl::ZeroDuration();
  // The stream collectives are enqueued on (a cudaStream_t on `device_ordinal`, normally the
  // rank backend's stream()); it must outlive the communicator. Null: the communicator makes
  // and owns a stream of its own.
  CUstream_st* stream = nullptr;
};

// INVALID_ARGUMENT naming the field unless rank/world/device/timeout/unique_id are sane.
absl::Status ValidateNcclOptions(const NcclOptions& options);

// The dtypes NCCL collectives here accept: f32, bf16, f16.
bool NcclSupportsDType(DType dtype);

class NcclCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  // Typed forms: `data`, `in`, `out` are device memory of `dtype` (F32, BF16 or F16;
  // INVALID_ARGUMENT naming the dtype otherwise). Enqueued; see the ordering note above.
  absl::Status AllReduceSum(void* data, int64_t count, DType dtype) override;
  absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out) override;
  // The f32 span forms, through the typed ones.
  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  // `in` and `out` are device memory; any dtype of whole elements, moved as bytes. Enqueued;
  // nothing is enqueued when this rank neither sends nor receives anything.
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  // `data` is device memory. Enqueued.
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  // An all-reduce of one float on a scratch device buffer (NCCL has no barrier), then
  // AwaitCollectives().
  absl::Status Barrier() override;
  absl::Status AwaitCollectives() override;
  std::string Describe() const override;
  // NCCL collectives on the backend's stream are recorded by a capture of it.
  bool capturable() const override { return true; }
  // `run` enqueued between a "before" and an "after" event as one pending collective named
  // `what` (see "CUDA graphs" above).
  absl::Status RunRecorded(std::string_view what, absl::FunctionRef<absl::Status()> run) override;

  // Makes the wait in progress (or the next call) abort the NCCL communicator and return
  // UNAVAILABLE; for a supervisor that learned a peer died. Safe from any thread.
  void RequestAbort() override { abort_requested_.store(true); }

  // The stream collectives run on (a cudaStream_t): options.stream, or the communicator's own.
  CUstream_st* stream() const { return stream_; }
  // Collectives enqueued since the last successful wait.
  int64_t num_pending() const { return static_cast<int64_t>(pending_.size()); }

 private:
  explicit NcclCommunicator(const NcclOptions& options);
  absl::Status Init();
  // Checks that the communicator is usable and selects its device.
  absl::Status BeginCall(const char* collective);
  // Enqueues `what` by `call` (an ncclXxx call on stream_, or RunRecorded's step) between its
  // two events; while stream_ is being captured, just `call`, without events. A failure breaks
  // the communicator; ncclInProgress (a non-blocking communicator still connecting) is waited
  // out before the "after" event is recorded.
  absl::Status Enqueue(std::string what, absl::FunctionRef<absl::Status()> call);
  // Whether stream_ is being captured into a CUDA graph now.
  absl::StatusOr<bool> StreamCapturing() const;
  // True once NCCL has no operation in progress (init, an enqueue), false while it has; the
  // asynchronous error (a peer died) as UNAVAILABLE or INTERNAL naming `what` otherwise.
  absl::StatusOr<bool> CommIdle(const std::string& what);
  // Polls CommIdle until true, `timeout` from now, or RequestAbort. `what` names the work.
  absl::Status WaitUntilIdle(const std::string& what);
  // How many of events[from, to) have completed, counted from `from` in order.
  absl::StatusOr<int> CountCompleted(const std::vector<CUevent_st*>& events, int from, int to,
                                     int oldest_pending);
  // "AllGather of 4096 bf16 per rank on nccl rank 0/2 on cuda:0", and for more than one
  // pending, its place among them.
  std::string Outstanding(int index) const;
  absl::Status Fail(absl::Status status);
  absl::Status CheckUsable(const char* collective) const;

  const NcclOptions options_;
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  bool owns_stream_ = false;
  float* barrier_scratch_ = nullptr;  // [1] on the device
  std::string broken_reason_;         // empty while healthy
  // What each collective enqueued since the last wait is, e.g. "AllGather of 4096 bf16".
  std::vector<std::string> pending_;
  // [i]: recorded on stream_ right before / right after pending collective i. Reused every
  // step; grown to the most collectives a step has enqueued.
  std::vector<CUevent_st*> ready_events_;
  std::vector<CUevent_st*> done_events_;
  std::atomic<bool> abort_requested_{false};
  bool warm_ = false;  // a round of collectives has completed: `timeout` from now on
  // The deadline of the wait at hand: the startup timeout until warm_.
  absl::Duration Budget() const {
    return warm_ ? options_.timeout : StartupTimeout(options_.startup_timeout, options_.timeout);
  }
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_NCCL_COMMUNICATOR_H_
