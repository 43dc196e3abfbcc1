#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/poll_wait.h"
#include "base/status_macros.h"
#include "comm/all_to_all_counts.h"
#include "comm/collective_clock.h"
#include "comm/cuda_status.h"
#include "kernels/cuda/device_wait.h"

namespace tpserve {
namespace {

absl::StatusOr<ncclDataType_t> NcclType(DType dtype, const char* collective) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    default:
      return absl::InvalidArgumentError(absl::StrCat(collective, " of ",
                                                     std::string(DTypeName(dtype)),
                                                     ": NCCL collectives here take F32, BF16 or F16"));
  }
}

}  // namespace

bool NcclSupportsDType(DType dtype) { return NcclType(dtype, "").ok(); }

absl::Status ValidateNcclOptions(const NcclOptions& options) {
  if (options.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("NcclOptions.world_size is ", options.world_size, ", must be >= 1"));
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("NcclOptions.rank is ", options.rank,
                                                   ", must be in [0, ", options.world_size, ")"));
  }
  if (options.device_ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("NcclOptions.device_ordinal is ", options.device_ordinal, ", must be >= 0"));
  }
  if (options.unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("NcclOptions.unique_id has ",
                                                   options.unique_id.size(), " bytes, expected ",
                                                   kNcclUniqueIdBytes));
  }
  if (options.timeout < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NcclOptions.timeout is ", absl::FormatDuration(options.timeout), ", must be >= 1ms"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<NcclCommunicator>> NcclCommunicator::Create(
    const NcclOptions& options) {
  TP_RETURN_IF_ERROR(ValidateNcclOptions(options));
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(options));
  TP_RETURN_IF_ERROR(comm->Init());
  return comm;
}

NcclCommunicator::NcclCommunicator(const NcclOptions& options) : options_(options) {}

absl::Status NcclCommunicator::Init() {
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal)));
  if (options_.stream != nullptr) {
    stream_ = options_.stream;
  } else {
    cudaStream_t stream = nullptr;
    TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
    stream_ = stream;
    owns_stream_ = true;
  }
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaMalloc(&barrier_scratch_, sizeof(float))));
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaMemset(barrier_scratch_, 0, sizeof(float))));
  ncclUniqueId id;
  std::memcpy(id.internal, options_.unique_id.data(), sizeof(id.internal));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // calls return at once; we poll with our own deadline
  ncclComm_t comm = nullptr;
  absl::Status started =
      TP_NCCL_CALL(ncclCommInitRankConfig(&comm, options_.world_size, id, options_.rank, &config));
  comm_ = comm;
  if (!started.ok()) return Fail(started);
  return WaitUntilIdle("ncclCommInitRankConfig");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr || owns_stream_ || barrier_scratch_ != nullptr || !ready_events_.empty()) {
    cudaSetDevice(options_.device_ordinal);
  }
  if (comm_ != nullptr) {
    bool finalized = false;
    const bool healthy = broken_reason_.empty() && !abort_requested_.load();
    const ncclResult_t finalize = healthy ? ncclCommFinalize(comm_) : ncclInvalidUsage;
    if (finalize == ncclSuccess || finalize == ncclInProgress) {
      // Finalize flushes pending work; non-blocking, so poll it with the same deadline.
      ncclResult_t state = ncclInProgress;
      const absl::Status flushed = PollUntil(
          "ncclCommFinalize", {.timeout = options_.timeout, .abort = &abort_requested_},
          [&]() -> absl::StatusOr<bool> {
            if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
            return state != ncclInProgress;
          });
      finalized = flushed.ok() && state == ncclSuccess;
    }
    if (finalized) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  for (cudaEvent_t event : ready_events_) cudaEventDestroy(event);
  for (cudaEvent_t event : done_events_) cudaEventDestroy(event);
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (owns_stream_) cudaStreamDestroy(stream_);
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // frees the communicator; NCCL kernels waiting on peers exit
    comm_ = nullptr;
  }
  if (broken_reason_.empty()) broken_reason_ = std::string(status.message());
  return status;
}

absl::Status NcclCommunicator::CheckUsable(const char* collective) const {
  if (!broken_reason_.empty()) {
    return absl::UnavailableError(
        absl::StrCat(collective, " on ", Describe(),
                     ": communicator is broken by an earlier failure: ", broken_reason_));
  }
  return absl::OkStatus();
}

absl::Status NcclCommunicator::BeginCall(const char* collective) {
  TP_RETURN_IF_ERROR(CheckUsable(collective));
  if (abort_requested_.load()) {
    return Fail(absl::UnavailableError(
        absl::StrCat(collective, " on ", Describe(), ": aborted on request")));
  }
  // Only when another device is current: a collective inside a recorded step runs while the
  // stream is captured, where the device is already this one (as the backend's Enter does).
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == options_.device_ordinal) {
    return absl::OkStatus();
  }
  return TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal));
}

absl::StatusOr<bool> NcclCommunicator::CommIdle(const std::string& what) {
  ncclResult_t state = ncclSuccess;
  absl::Status polled = TP_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
  if (!polled.ok()) return polled;
  if (state == ncclSuccess) return true;
  if (state == ncclInProgress) return false;
  // ncclRemoteError / ncclSystemError (a peer died, a link broke) map to UNAVAILABLE.
  absl::Status failed = NcclStatus(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
  return absl::Status(failed.code(),
                      absl::StrCat(what, " on ", Describe(), ": ", failed.message(), ": ",
                                   ncclGetLastError(comm_), "; NCCL communicator aborted"));
}

absl::Status NcclCommunicator::WaitUntilIdle(const std::string& what) {
  absl::Status waited = PollUntil(absl::StrCat(what, " on ", Describe()),
                                  {.timeout = Budget(), .abort = &abort_requested_},
                                  [&] { return CommIdle(what); });
  if (absl::IsDeadlineExceeded(waited)) {
    waited = absl::DeadlineExceededError(absl::StrCat(waited.message(),
                                                      "; NCCL communicator aborted"));
  }
  return waited.ok() ? waited : Fail(waited);
}

absl::StatusOr<bool> NcclCommunicator::StreamCapturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaStreamIsCapturing(stream_, &status)));
  return status == cudaStreamCaptureStatusActive;
}

absl::Status NcclCommunicator::Enqueue(std::string what, absl::FunctionRef<absl::Status()> call) {
  const auto check = [this](absl::Status s) { return s.ok() ? s : Fail(std::move(s)); };
  absl::StatusOr<bool> capturing = StreamCapturing();
  if (!capturing.ok()) return Fail(capturing.status());
  if (*capturing) {
    // Recorded into the step being captured (inside RunRecorded): it runs at each replay, which
    // RunRecorded's events bracket. Events recorded here would only be capture dependencies
    // (and querying one later is an error), so none are.
    absl::Status called = call();
    if (!called.ok()) {
      return Fail(absl::Status(called.code(),
                               absl::StrCat(what, " on ", Describe(), ": ", called.message())));
    }
    return WaitUntilIdle(what);
  }
  const size_t index = pending_.size();
  while (ready_events_.size() <= index) {
    cudaEvent_t ready = nullptr;
    cudaEvent_t done = nullptr;
    TP_RETURN_IF_ERROR(
        check(TP_CUDA_CALL(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming))));
    ready_events_.push_back(ready);
    TP_RETURN_IF_ERROR(
        check(TP_CUDA_CALL(cudaEventCreateWithFlags(&done, cudaEventDisableTiming))));
    done_events_.push_back(done);
  }
  TP_RETURN_IF_ERROR(check(TP_CUDA_CALL(cudaEventRecord(ready_events_[index], stream_))));
  // Its place is taken before the call: a RunRecorded's body enqueues collectives of its own
  // (an eager run), which take the places after it and complete before it does.
  pending_.push_back(std::move(what));
  absl::Status called = call();
  if (!called.ok()) {
    return Fail(absl::Status(
        called.code(), absl::StrCat(pending_[index], " on ", Describe(), ": ", called.message())));
  }
  // A non-blocking communicator may still be enqueueing in the background (the first
  // collective connects to the peers); the stream holds the work only once that is done.
  TP_RETURN_IF_ERROR(WaitUntilIdle(pending_[index]));
  return check(TP_CUDA_CALL(cudaEventRecord(done_events_[index], stream_)));
}

absl::Status NcclCommunicator::RunRecorded(std::string_view what,
                                           absl::FunctionRef<absl::Status()> run) {
  TP_RETURN_IF_ERROR(BeginCall("RunRecorded"));
  return Enqueue(std::string(what), run);
}

absl::StatusOr<int> NcclCommunicator::CountCompleted(const std::vector<CUevent_st*>& events,
                                                     int from, int to, int oldest_pending) {
  int count = from;
  for (; count < to; ++count) {
    const cudaError_t query = cudaEventQuery(events[count]);
    if (query == cudaErrorNotReady) break;
    if (query != cudaSuccess) {  // a fault in the work before it, most likely
      absl::Status failed = CudaStatus(query, "cudaEventQuery", __FILE__, __LINE__);
      return absl::Status(failed.code(),
                          absl::StrCat(Outstanding(oldest_pending), ": ", failed.message()));
    }
  }
  return count;
}

std::string NcclCommunicator::Outstanding(int index) const {
  if (pending_.empty()) return absl::StrCat("AwaitCollectives on ", Describe());
  const int n = static_cast<int>(pending_.size());
  index = std::min(index, n - 1);
  if (n == 1) return absl::StrCat(pending_[index], " on ", Describe());
  return absl::StrCat(pending_[index], " (collective ", index + 1, " of ", n,
                      " since the last wait) on ", Describe());
}

absl::Status NcclCommunicator::AllReduceSum(void* data, int64_t count, DType dtype) {
  TP_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype, "AllReduceSum"));
  TP_RETURN_IF_ERROR(BeginCall("AllReduceSum"));
  if (count == 0) return absl::OkStatus();
  return Enqueue(absl::StrCat("AllReduceSum of ", count, " ", std::string(DTypeName(dtype))),
                 [&] {
                   return TP_NCCL_CALL(
                       ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_));
                 });
}

absl::Status NcclCommunicator::AllGather(const void* in, int64_t in_count, DType dtype, void* out) {
  TP_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype, "AllGather"));
  TP_RETURN_IF_ERROR(BeginCall("AllGather"));
  if (in_count == 0) return absl::OkStatus();
  return Enqueue(
      absl::StrCat("AllGather of ", in_count, " ", std::string(DTypeName(dtype)), " per rank"),
      [&] { return TP_NCCL_CALL(ncclAllGather(in, out, in_count, type, comm_, stream_)); });
}

absl::Status NcclCommunicator::AllReduceSum(absl::Span<float> data) {
  return AllReduceSum(data.data(), static_cast<int64_t>(data.size()), DType::kF32);
}

absl::Status NcclCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  TP_RETURN_IF_ERROR(CheckAllGatherSizes(world_size(), in.size(), out.size()));
  return AllGather(in.data(), static_cast<int64_t>(in.size()), DType::kF32, out.data());
}

absl::Status NcclCommunicator::AllToAll(const void* in, absl::Span<const int64_t> send_counts,
                                        void* out, absl::Span<const int64_t> recv_counts,
                                        DType dtype) {
  TP_RETURN_IF_ERROR(CheckAllToAllCounts(world_size(), send_counts, recv_counts, dtype));
  const int me = options_.rank;
  if (send_counts[me] != recv_counts[me]) {
    return absl::InvalidArgumentError(absl::StrCat("AllToAll on ", Describe(),
                                                   ": this rank sends itself ", send_counts[me],
                                                   " elements but expects ", recv_counts[me]));
  }
  TP_RETURN_IF_ERROR(BeginCall("AllToAll"));
  const size_t elem_bytes = static_cast<size_t>(BlockBytes(dtype));
  const std::vector<size_t> in_offsets = AllToAllByteOffsets(send_counts, elem_bytes);
  const std::vector<size_t> out_offsets = AllToAllByteOffsets(recv_counts, elem_bytes);
  // Peers pair their counts with this rank's, so none of them sends to or expects from it.
  if (in_offsets.back() == 0 && out_offsets.back() == 0) return absl::OkStatus();
  const auto* send = static_cast<const uint8_t*>(in);
  auto* recv = static_cast<uint8_t*>(out);
  // One group: NCCL progresses all of its sends and receives together.
  const auto post = [&]() -> absl::Status {
    if (const size_t own = out_offsets[me + 1] - out_offsets[me]; own > 0) {
      TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaMemcpyAsync(recv + out_offsets[me], send + in_offsets[me],
                                                      own, cudaMemcpyDeviceToDevice, stream_)));
    }
    TP_RETURN_IF_ERROR(TP_NCCL_CALL(ncclGroupStart()));
    absl::Status posted;
    for (int peer = 0; peer < world_size() && posted.ok(); ++peer) {
      const size_t to_peer = in_offsets[peer + 1] - in_offsets[peer];
      const size_t from_peer = out_offsets[peer + 1] - out_offsets[peer];
      if (peer == me) continue;
      if (to_peer > 0) {
        posted = TP_NCCL_CALL(
            ncclSend(send + in_offsets[peer], to_peer, ncclUint8, peer, comm_, stream_));
      }
      if (posted.ok() && from_peer > 0) {
        posted = TP_NCCL_CALL(
            ncclRecv(recv + out_offsets[peer], from_peer, ncclUint8, peer, comm_, stream_));
      }
    }
    // Ends the group even after a failed post, so NCCL's group state is left clean.
    const absl::Status ended = TP_NCCL_CALL(ncclGroupEnd());
    return posted.ok() ? ended : posted;
  };
  return Enqueue(absl::StrCat("AllToAll of ", in_offsets.back() / elem_bytes, " ",
                              std::string(DTypeName(dtype)), " sent, ",
                              out_offsets.back() / elem_bytes, " received"),
                 post);
}

absl::Status NcclCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  TP_RETURN_IF_ERROR(CheckBroadcastRoot(world_size(), root));
  TP_RETURN_IF_ERROR(BeginCall("Broadcast"));
  if (data.empty()) return absl::OkStatus();
  return Enqueue(absl::StrCat("Broadcast of ", data.size(), " bytes from rank ", root), [&] {
    return TP_NCCL_CALL(ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root,
                                      comm_, stream_));
  });
}

absl::Status NcclCommunicator::Barrier() {
  TP_RETURN_IF_ERROR(BeginCall("Barrier"));
  TP_RETURN_IF_ERROR(Enqueue("Barrier (AllReduceSum of 1 f32)", [&] {
    return TP_NCCL_CALL(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum,
                                      comm_, stream_));
  }));
  return AwaitCollectives();
}

absl::Status NcclCommunicator::AwaitCollectives() {
  TP_RETURN_IF_ERROR(CheckUsable("AwaitCollectives"));
  if (pending_.empty() && !abort_requested_.load()) return absl::OkStatus();
  const int n = static_cast<int>(pending_.size());
  const absl::Duration budget = Budget();
  CollectiveClock clock(n, budget);
  int ready = 0;  // collectives whose "before" event has completed: their inputs are ready
  int done = 0;   // collectives whose "after" event has completed
  PollBackoff backoff;
  // The compute queued before the collectives is bounded too, by the device wait deadline.
  const absl::Time compute_deadline = absl::Now() + cuda::kDeviceWaitTimeout;
  while (true) {
    if (abort_requested_.load()) {
      return Fail(absl::UnavailableError(absl::StrCat(Outstanding(done), ": aborted on request")));
    }
    absl::StatusOr<bool> idle = CommIdle(Outstanding(done));
    if (!idle.ok()) return Fail(idle.status());
    absl::StatusOr<int> counted = CountCompleted(ready_events_, ready, n, done);
    if (!counted.ok()) return Fail(counted.status());
    ready = *counted;
    counted = CountCompleted(done_events_, done, ready, done);
    if (!counted.ok()) return Fail(counted.status());
    done = *counted;
    const absl::Time now = absl::Now();
    switch (clock.Update(now, ready, done)) {
      case CollectiveClock::kDone:
        pending_.clear();
        warm_ = true;
        return absl::OkStatus();
      case CollectiveClock::kOverdue:
        return Fail(absl::DeadlineExceededError(absl::StrCat(
            Outstanding(clock.overdue()), " did not complete within ",
            absl::FormatDuration(budget),
            " of its inputs being ready; NCCL communicator aborted")));
      case CollectiveClock::kRunning:
        break;
    }
    if (now >= compute_deadline) {
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "the device work queued before ", Outstanding(done), " did not finish within ",
          absl::FormatDuration(cuda::kDeviceWaitTimeout), "; NCCL communicator aborted")));
    }
    absl::SleepFor(backoff.Next());
  }
}

std::string NcclCommunicator::Describe() const {
  return absl::StrCat("nccl rank ", options_.rank, "/", options_.world_size,
                      " on cuda:", options_.device_ordinal);
}

}  // namespace tpserve
