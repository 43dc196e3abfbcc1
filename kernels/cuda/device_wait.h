// Every host wait on the CUDA device (Synchronize, a copy to the host, scratch growth, the
// staging buffer's reuse) goes through these: a deadline, an abort flag another thread may set,
// and polls of cudaStreamQuery / cudaEventQuery with a sleeping backoff (base/poll_wait.h)
// instead of cudaStreamSynchronize, which waits forever behind a collective stuck on a dead peer
// and may spin a core for the whole step.
//
//   TP_RETURN_IF_ERROR(cuda::WaitForStream(stream, "cuda:0 CopyToHost", &abort_requested_));
//
// Plain C++ header (no CUDA includes). Threading: the wait runs on the caller's thread; *abort
// may be set from any thread.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_WAIT_H_
#define TPSERVE_KERNELS_CUDA_DEVICE_WAIT_H_

#include <atomic>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tpserve::cuda {

// How long the host waits for queued device work before it calls the device hung. It must
// outlast the longest legitimate step: a 32K-token prefill in one step on a 405B rank at TP=8.
// Per rank, the linears are 2 FLOP x 50.6e9 parameters x 32768 tokens = 3.3e15 FLOP, and
// causal attention over its 16 of 128 heads (head_dim 128, 126 layers) is QK^T and PV, 2 FLOP
// each per multiply-add, over 32768^2 / 2 pairs: 126 x 2 x 2 x 32768^2 / 2 x 128 x 16 =
// 0.55e15 FLOP. That is 3.9e15 FLOP: 4 s at an H100's dense BF16 peak (989e12 FLOP/s), 39 s at
// a pessimistic tenth of it (the kernels are not yet measured on a GPU). Five minutes is 7x
// that, and still ends a wait on a hung device or behind a dead peer in bounded time.
inline constexpr absl::Duration kDeviceWaitTimeout = absl::Minutes(5);

// Waits until every op queued on `stream` (a cudaStream_t) has finished. OK; the queued work's
// CUDA error (a fault) as a Status naming cudaStreamQuery; DEADLINE_EXCEEDED "<what> did not
// complete within 5m"; UNAVAILABLE "<what>: aborted on request" once *abort is true.
absl::Status WaitForStream(void* stream, std::string_view what,
                           const std::atomic<bool>* abort = nullptr,
                           absl::Duration timeout = kDeviceWaitTimeout);

// The same for `event` (a cudaEvent_t): until the work before its last cudaEventRecord is done.
absl::Status WaitForEvent(void* event, std::string_view what,
                          const std::atomic<bool>* abort = nullptr,
                          absl::Duration timeout = kDeviceWaitTimeout);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_DEVICE_WAIT_H_
