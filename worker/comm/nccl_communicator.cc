#include "worker/comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "worker/comm/cuda_status.h"

namespace tpserve {

absl::StatusOr<std::string> NewNcclUniqueId() {
  static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes);
  ncclUniqueId id;
  TP_RETURN_IF_ERROR(TP_NCCL_CALL(ncclGetUniqueId(&id)));
  return std::string(id.internal, sizeof(id.internal));
}

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
  cudaStream_t stream = nullptr;
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
  stream_ = stream;
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
  return WaitForCompletion("ncclCommInitRankConfig", /*query_stream=*/false);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr || stream_ != nullptr || barrier_scratch_ != nullptr) {
    cudaSetDevice(options_.device_ordinal);
  }
  if (comm_ != nullptr) {
    bool finalized = false;
    const bool healthy = broken_reason_.empty() && !abort_requested_.load();
    const ncclResult_t finalize = healthy ? ncclCommFinalize(comm_) : ncclInvalidUsage;
    if (finalize == ncclSuccess || finalize == ncclInProgress) {
      // Finalize flushes pending work; non-blocking, so poll it with the same deadline.
      const absl::Time deadline = absl::Now() + options_.timeout;
      ncclResult_t state = ncclInProgress;
      while (ncclCommGetAsyncError(comm_, &state) == ncclSuccess && state == ncclInProgress &&
             absl::Now() < deadline) {
        std::this_thread::yield();
      }
      finalized = state == ncclSuccess;
    }
    if (finalized) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status NcclCommunicator::Fail(absl::Status status) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // frees the communicator; pending kernels are stopped
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

absl::Status NcclCommunicator::WaitForCompletion(const char* collective, bool query_stream) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    if (abort_requested_.load()) {
      return Fail(absl::UnavailableError(
          absl::StrCat(collective, " on ", Describe(), ": aborted on request")));
    }
    ncclResult_t state = ncclSuccess;
    absl::Status polled = TP_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
    if (!polled.ok()) return Fail(polled);
    if (state != ncclInProgress) {
      if (state != ncclSuccess) {
        absl::Status failed = NcclStatus(state, collective, __FILE__, __LINE__);
        return Fail(absl::Status(failed.code(), absl::StrCat(failed.message(), " on ", Describe(),
                                                             ": ", ncclGetLastError(comm_))));
      }
      if (!query_stream) return absl::OkStatus();
      const cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return absl::OkStatus();
      if (done != cudaErrorNotReady) {
        return Fail(CudaStatus(done, "cudaStreamQuery(stream_)", __FILE__, __LINE__));
      }
    }
    if (absl::Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(collective, " on ", Describe(), " did not complete within ",
                       absl::FormatDuration(options_.timeout), "; NCCL communicator aborted")));
    }
    std::this_thread::yield();
  }
}

absl::Status NcclCommunicator::AllReduceSum(absl::Span<float> data) {
  TP_RETURN_IF_ERROR(CheckUsable("AllReduceSum"));
  if (data.empty()) return absl::OkStatus();
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal)));
  absl::Status enqueued = TP_NCCL_CALL(
      ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm_, stream_));
  if (!enqueued.ok()) return Fail(enqueued);
  return WaitForCompletion("ncclAllReduce", /*query_stream=*/true);
}

absl::Status NcclCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  TP_RETURN_IF_ERROR(CheckAllGatherSizes(world_size(), in.size(), out.size()));
  TP_RETURN_IF_ERROR(CheckUsable("AllGather"));
  if (in.empty()) return absl::OkStatus();
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal)));
  absl::Status enqueued =
      TP_NCCL_CALL(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat32, comm_, stream_));
  if (!enqueued.ok()) return Fail(enqueued);
  return WaitForCompletion("ncclAllGather", /*query_stream=*/true);
}

absl::Status NcclCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  TP_RETURN_IF_ERROR(CheckBroadcastRoot(world_size(), root));
  TP_RETURN_IF_ERROR(CheckUsable("Broadcast"));
  if (data.empty()) return absl::OkStatus();
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal)));
  absl::Status enqueued = TP_NCCL_CALL(
      ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_));
  if (!enqueued.ok()) return Fail(enqueued);
  return WaitForCompletion("ncclBroadcast", /*query_stream=*/true);
}

absl::Status NcclCommunicator::Barrier() {
  TP_RETURN_IF_ERROR(CheckUsable("Barrier"));
  TP_RETURN_IF_ERROR(TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal)));
  absl::Status enqueued = TP_NCCL_CALL(
      ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat32, ncclSum, comm_, stream_));
  if (!enqueued.ok()) return Fail(enqueued);
  return WaitForCompletion("Barrier (ncclAllReduce of 1 float)", /*query_stream=*/true);
}

std::string NcclCommunicator::Describe() const {
  return absl::StrCat("nccl rank ", options_.rank, "/", options_.world_size,
                      " on cuda:", options_.device_ordinal);
}

}  // namespace tpserve
