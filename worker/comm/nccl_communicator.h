// Collectives between GPU ranks with NCCL. For this implementation every span passed to a
// collective is DEVICE memory on `device_ordinal` (cudaMalloc'd), not host memory; Broadcast's
// bytes likewise. Collectives are enqueued on the communicator's own stream and each call
// returns once its work is complete, like every Communicator.
//
//   std::string id = *NewNcclUniqueId();  // on rank 0; the control plane sends it to all ranks
//   auto comm = NcclCommunicator::Create({.rank = r, .world_size = 2, .device_ordinal = r,
//                                         .unique_id = id});
//
// Deadlines: the communicator is non-blocking (ncclConfig_t.blocking = 0). Create and every
// collective poll ncclCommGetAsyncError / the stream until done or `timeout`; on timeout the
// NCCL communicator is aborted (ncclCommAbort) and the call returns DEADLINE_EXCEEDED. Other
// CUDA/NCCL failures return a Status naming the call, file and line (cuda_status.h). After any
// failure, or RequestAbort(), the communicator is broken: later calls return UNAVAILABLE.
// Threading: one thread at a time per communicator; RequestAbort() may be called from any
// thread. Each rank needs its own GPU (NCCL refuses two ranks on one device).
#ifndef TPSERVE_WORKER_COMM_NCCL_COMMUNICATOR_H_
#define TPSERVE_WORKER_COMM_NCCL_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/cuda/cuda_device.h"
#include "worker/comm/communicator.h"

// Opaque CUDA/NCCL handles, so this header needs no CUDA include.
struct ncclComm;
struct CUstream_st;

namespace tpserve {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  int device_ordinal = 0;
  std::string unique_id;  // kNcclUniqueIdBytes bytes from NewNcclUniqueId(), same on all ranks
  absl::Duration timeout = absl::Seconds(30);
};


// A fresh NCCL unique id (ncclGetUniqueId) as kNcclUniqueIdBytes bytes.
absl::StatusOr<std::string> NewNcclUniqueId();

// INVALID_ARGUMENT naming the field unless rank/world/device/timeout/unique_id are sane.
absl::Status ValidateNcclOptions(const NcclOptions& options);

class NcclCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<NcclCommunicator>> Create(const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  // `data` is device memory.
  absl::Status AllReduceSum(absl::Span<float> data) override;
  // `in` and `out` are device memory.
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  // `data` is device memory.
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  // An all-reduce of one float on a scratch device buffer (NCCL has no barrier).
  absl::Status Barrier() override;
  std::string Describe() const override;

  // Makes the collective in flight (or the next one) abort the NCCL communicator and return
  // UNAVAILABLE; for a supervisor that learned a peer died. Safe from any thread.
  void RequestAbort() { abort_requested_.store(true); }

  // The stream collectives run on (a cudaStream_t).
  CUstream_st* stream() const { return stream_; }

 private:
  explicit NcclCommunicator(const NcclOptions& options);
  absl::Status Init();
  // Polls until the enqueued work is done, a failure shows, or the deadline passes.
  absl::Status WaitForCompletion(const char* collective, bool query_stream);
  absl::Status Fail(absl::Status status);
  absl::Status CheckUsable(const char* collective) const;

  const NcclOptions options_;
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  float* barrier_scratch_ = nullptr;  // [1] on the device
  std::string broken_reason_;         // empty while healthy
  std::atomic<bool> abort_requested_{false};
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_COMM_NCCL_COMMUNICATOR_H_
