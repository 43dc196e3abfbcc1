// A device buffer that grows on demand, for the CUDA backend's scratch (converted activations,
// decoded weights, attention partials). Plain C++.
//
//   DeviceScratch x8("fp8 activations");
//   TP_RETURN_IF_ERROR(x8.Reserve(m * k, stream));
//   Launch...(x8.data(), ...);
//
// Growing waits for `stream` first (queued work may still read the old buffer), so it must not
// happen inside a stream capture; the wait has the device deadline and ends early when the
// owner's abort flag is set (device_wait.h). Only then cudaFree and cudaMalloc: the free's
// implicit device synchronisation finds nothing left to wait for (the backend queues all its
// work on this one stream), so it adds no wait without a deadline. Once the attention is
// reserved at load (Backend::ReserveAttention), this growth is the one cudaFree / cudaMalloc a
// CUDA step can reach, and only a step that needs more of some buffer than any step before. Threading: one thread at a
// time, like the backend owning it; the abort flag may be set from any thread.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_SCRATCH_H_
#define TPSERVE_KERNELS_CUDA_DEVICE_SCRATCH_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace tpserve::cuda {

class DeviceScratch {
 public:
  // `generation`, when given, is incremented whenever the buffer moves (captured work that
  // baked the old address must then be recorded again). `abort`, when given, ends a growth's
  // wait for the stream (the backend's RequestAbort).
  explicit DeviceScratch(std::string what, int64_t* generation = nullptr,
                         const std::atomic<bool>* abort = nullptr)
      : what_(std::move(what)), generation_(generation), abort_(abort) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // Makes data() hold at least `bytes`; contents are not kept when it grows.
  // RESOURCE_EXHAUSTED naming the buffer and size when the device is out of memory; the
  // wait's DEADLINE_EXCEEDED or UNAVAILABLE (device_wait.h) when queued work does not finish.
  absl::Status Reserve(int64_t bytes, void* stream);
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  int64_t capacity() const { return capacity_; }

 private:
  std::string what_;
  int64_t* generation_;
  const std::atomic<bool>* abort_;
  void* data_ = nullptr;
  int64_t capacity_ = 0;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_DEVICE_SCRATCH_H_
