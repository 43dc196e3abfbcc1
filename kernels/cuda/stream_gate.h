// Test support: holds a CUDA stream at a point until the test opens it, by queueing a host
// function that waits; stands in for work that never finishes (a collective stuck on a dead
// peer). Used by the host-wait and NCCL tests.
//
//   StreamGate gate(stream);   // work queued after this waits
//   ...                        // a wait on the stream now times out or is aborted
//   gate.Open();               // (also on destruction)
//
// The state is shared with the callback, which may outlive the gate.
#ifndef TPSERVE_KERNELS_CUDA_STREAM_GATE_H_
#define TPSERVE_KERNELS_CUDA_STREAM_GATE_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tpserve::cuda {

class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream) : open_(std::make_shared<absl::Notification>()) {
    auto* state = new std::shared_ptr<absl::Notification>(open_);
    EXPECT_EQ(cudaLaunchHostFunc(stream, &Wait, state), cudaSuccess);
  }
  ~StreamGate() { Open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  void Open() {
    if (!open_->HasBeenNotified()) open_->Notify();
  }

 private:
  static void Wait(void* arg) {
    auto* state = static_cast<std::shared_ptr<absl::Notification>*>(arg);
    (*state)->WaitForNotification();
    delete state;
  }
  std::shared_ptr<absl::Notification> open_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_STREAM_GATE_H_
