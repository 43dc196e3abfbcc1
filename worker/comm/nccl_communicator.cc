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
  return WaitForCompletion("ncclCommInitRankConfig", /*query_stream=*/false);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr || owns_stream_ || barrier_scratch_ != nullptr) {
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
  return TP_CUDA_CALL(cudaSetDevice(options_.device_ordinal));
}

absl::Status NcclCommunicator::Enqueued(absl::Status call, std::string what) {
  if (!call.ok()) {
    return Fail(
        absl::Status(call.code(), absl::StrCat(what, " on ", Describe(), ": ", call.message())));
  }
  ++num_pending_;
  last_enqueued_ = std::move(what);
  // A non-blocking communicator may still be enqueueing in the background (the first
  // collective connects to the peers); the stream holds the work only once that is done.
  ncclResult_t state = ncclSuccess;
  absl::Status polled = TP_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
  if (!polled.ok()) return Fail(polled);
  if (state == ncclSuccess) return absl::OkStatus();
  return WaitForCompletion(last_enqueued_, /*query_stream=*/false);
}

absl::Status NcclCommunicator::WaitForCompletion(const std::string& what, bool query_stream) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    if (abort_requested_.load()) {
      return Fail(
          absl::UnavailableError(absl::StrCat(what, " on ", Describe(), ": aborted on request")));
    }
    ncclResult_t state = ncclSuccess;
    absl::Status polled = TP_NCCL_CALL(ncclCommGetAsyncError(comm_, &state));
    if (!polled.ok()) return Fail(polled);
    if (state != ncclInProgress) {
      if (state != ncclSuccess) {
        // ncclRemoteError / ncclSystemError (a peer died, a link broke) map to UNAVAILABLE.
        absl::Status failed = NcclStatus(state, "ncclCommGetAsyncError", __FILE__, __LINE__);
        return Fail(absl::Status(
            failed.code(), absl::StrCat(what, " on ", Describe(), ": ", failed.message(), ": ",
                                        ncclGetLastError(comm_), "; NCCL communicator aborted")));
      }
      if (!query_stream) return absl::OkStatus();
      const cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return absl::OkStatus();
      if (done != cudaErrorNotReady) {
        absl::Status failed = CudaStatus(done, "cudaStreamQuery", __FILE__, __LINE__);
        return Fail(absl::Status(failed.code(),
                                 absl::StrCat(what, " on ", Describe(), ": ", failed.message())));
      }
    }
    if (absl::Now() >= deadline) {
      return Fail(absl::DeadlineExceededError(
          absl::StrCat(what, " on ", Describe(), " did not complete within ",
                       absl::FormatDuration(options_.timeout), "; NCCL communicator aborted")));
    }
    std::this_thread::yield();
  }
}

absl::Status NcclCommunicator::AllReduceSum(void* data, int64_t count, DType dtype) {
  TP_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype, "AllReduceSum"));
  TP_RETURN_IF_ERROR(BeginCall("AllReduceSum"));
  if (count == 0) return absl::OkStatus();
  return Enqueued(TP_NCCL_CALL(ncclAllReduce(data, data, count, type, ncclSum, comm_, stream_)),
                  absl::StrCat("AllReduceSum of ", count, " ", std::string(DTypeName(dtype))));
}

absl::Status NcclCommunicator::AllGather(const void* in, int64_t in_count, DType dtype, void* out) {
  TP_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(dtype, "AllGather"));
  TP_RETURN_IF_ERROR(BeginCall("AllGather"));
  if (in_count == 0) return absl::OkStatus();
  return Enqueued(
      TP_NCCL_CALL(ncclAllGather(in, out, in_count, type, comm_, stream_)),
      absl::StrCat("AllGather of ", in_count, " ", std::string(DTypeName(dtype)), " per rank"));
}

absl::Status NcclCommunicator::AllReduceSum(absl::Span<float> data) {
  return AllReduceSum(data.data(), static_cast<int64_t>(data.size()), DType::kF32);
}

absl::Status NcclCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  TP_RETURN_IF_ERROR(CheckAllGatherSizes(world_size(), in.size(), out.size()));
  return AllGather(in.data(), static_cast<int64_t>(in.size()), DType::kF32, out.data());
}

absl::Status NcclCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  TP_RETURN_IF_ERROR(CheckBroadcastRoot(world_size(), root));
  TP_RETURN_IF_ERROR(BeginCall("Broadcast"));
  if (data.empty()) return absl::OkStatus();
  return Enqueued(TP_NCCL_CALL(ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root,
                                             comm_, stream_)),
                  absl::StrCat("Broadcast of ", data.size(), " bytes from rank ", root));
}

absl::Status NcclCommunicator::Barrier() {
  TP_RETURN_IF_ERROR(BeginCall("Barrier"));
  TP_RETURN_IF_ERROR(Enqueued(TP_NCCL_CALL(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1,
                                                         ncclFloat32, ncclSum, comm_, stream_)),
                              "Barrier (AllReduceSum of 1 f32)"));
  return AwaitCollectives();
}

absl::Status NcclCommunicator::AwaitCollectives() {
  TP_RETURN_IF_ERROR(CheckUsable("AwaitCollectives"));
  if (num_pending_ == 0 && !abort_requested_.load()) return absl::OkStatus();
  const std::string what = num_pending_ == 0 ? std::string("AwaitCollectives")
                           : num_pending_ == 1
                               ? last_enqueued_
                               : absl::StrCat(last_enqueued_, " (the last of ", num_pending_,
                                              " collectives enqueued since the previous wait)");
  TP_RETURN_IF_ERROR(WaitForCompletion(what, /*query_stream=*/true));
  num_pending_ = 0;
  return absl::OkStatus();
}

std::string NcclCommunicator::Describe() const {
  return absl::StrCat("nccl rank ", options_.rank, "/", options_.world_size,
                      " on cuda:", options_.device_ordinal);
}

}  // namespace tpserve
