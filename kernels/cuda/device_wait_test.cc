// Host waits on the device end: at their deadline behind work that never finishes, at once
// when another thread aborts them, and with OK when the work finishes; and the CUDA backend's
// Synchronize ends when RequestAbort is called from another thread (it used to wait in
// cudaStreamSynchronize with no deadline: a collective stuck on a dead peer hung the rank).
// So do its copies (issue 38): CopyToHost into pageable memory behind stuck work ends on
// RequestAbort (it was one cudaMemcpyAsync into pageable memory, which returns only when the
// copy is done: this test hung on that code), CopyToDevice from pageable memory does not wait
// for the queued work at all (it waited for the whole stream), and the backend leaves its
// device in blocking sync (it set no flag: the driver's default spins), so that a wait behind
// a step-long gate, ours or the driver's, takes a few percent of a core (the driver's took all
// of it on the old code).
// A host function that waits for the test stands in for stuck work. Tests skip with
// "no CUDA device: ..." without a GPU; the logic is checked everywhere by
// //base:poll_wait_test, //kernels/cuda:staged_copy_test and //kernels/cuda:cuda_device_test.
#include "kernels/cuda/device_wait.h"

#include <cuda_runtime_api.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kernels/backend_factory.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/stream_gate.h"

namespace tpserve::cuda {
namespace {

#define SKIP_WITHOUT_DEVICE()                                                              \
  do {                                                                                     \
    absl::StatusOr<int> count = CudaDeviceCount();                                         \
    if (!count.ok()) GTEST_SKIP() << "no CUDA device: " << count.status().message();       \
    if (*count < 1) GTEST_SKIP() << "no CUDA device: 0 visible";                           \
  } while (0)

class DeviceWaitTest : public testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(DeviceWaitTest, WaitForStreamEndsAtItsDeadlineThenSucceedsOnceTheWorkIsDone) {
  StreamGate gate(stream_);
  const absl::Status late = WaitForStream(stream_, "the test's stream", nullptr,
                                          absl::Milliseconds(300));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_EQ(late.message(), "the test's stream did not complete within 300ms");
  gate.Open();
  EXPECT_TRUE(WaitForStream(stream_, "the test's stream").ok());
}

TEST_F(DeviceWaitTest, WaitForEventEndsAtItsDeadlineThenSucceeds) {
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  StreamGate gate(stream_);
  ASSERT_EQ(cudaEventRecord(event, stream_), cudaSuccess);
  const absl::Status late = WaitForEvent(event, "the event", nullptr, absl::Milliseconds(300));
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  gate.Open();
  EXPECT_TRUE(WaitForEvent(event, "the event").ok());
  cudaEventDestroy(event);
}

TEST_F(DeviceWaitTest, AnAbortFromAnotherThreadEndsTheWait) {
  StreamGate gate(stream_);
  std::atomic<bool> abort{false};
  std::thread supervisor([&abort] {
    absl::SleepFor(absl::Milliseconds(200));
    abort.store(true);
  });
  const absl::Time start = absl::Now();
  const absl::Status waited = WaitForStream(stream_, "CopyToHost", &abort);
  supervisor.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  EXPECT_EQ(waited.message(), "CopyToHost: aborted on request");
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST(CudaBackendWait, RequestAbortFromAnotherThreadEndsSynchronize) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateBackend({.kind = BackendKind::kCuda});
  ASSERT_TRUE(be.ok()) << be.status();
  StreamGate gate(static_cast<cudaStream_t>((*be)->stream()));  // a collective stuck on a peer
  std::thread supervisor([&be] {
    absl::SleepFor(absl::Milliseconds(200));
    (*be)->RequestAbort();  // e.g. the rank is told to shut down
  });
  const absl::Status waited = (*be)->Synchronize();
  supervisor.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kUnavailable) << waited;
  EXPECT_NE(waited.message().find("Synchronize: queued device work: aborted on request"),
            std::string::npos)
      << waited;
  gate.Open();
}

TEST(CudaBackendWait, RequestAbortFromAnotherThreadEndsACopyToPageableHostMemory) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateBackend({.kind = BackendKind::kCuda});
  ASSERT_TRUE(be.ok()) << be.status();
  absl::StatusOr<DeviceBuffer> logits = (*be)->Allocate(3 << 20, "logits");  // 3 MiB
  ASSERT_TRUE(logits.ok()) << logits.status();
  std::vector<char> host(3 << 20);  // pageable, as the model's logits are
  StreamGate gate(static_cast<cudaStream_t>((*be)->stream()));
  std::thread supervisor([&be] {
    absl::SleepFor(absl::Milliseconds(200));
    (*be)->RequestAbort();
  });
  const absl::Time start = absl::Now();
  const absl::Status copied = (*be)->CopyToHost(host.data(), logits->data(), host.size());
  supervisor.join();
  EXPECT_EQ(copied.code(), absl::StatusCode::kUnavailable) << copied;
  EXPECT_NE(copied.message().find("CopyToHost: queued device work: aborted on request"),
            std::string::npos)
      << copied;
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  gate.Open();
}

// Pageable bytes are staged in pinned slots and the call returns: it neither waits for the
// stuck work nor lets the caller's reuse of `src` change what arrives.
TEST(CudaBackendWait, CopyToDeviceReturnsBehindStuckWorkAndTheBytesArrive) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateBackend({.kind = BackendKind::kCuda});
  ASSERT_TRUE(be.ok()) << be.status();
  const int64_t bytes = (20 << 20) + 12345;  // three slots' worth, not a whole number of them
  absl::StatusOr<DeviceBuffer> dst = (*be)->Allocate(bytes, "dst");
  ASSERT_TRUE(dst.ok()) << dst.status();
  std::vector<char> src(bytes), want(bytes), back(bytes, 0);
  for (int64_t i = 0; i < bytes; ++i) want[i] = static_cast<char>(i * 31 + i / 4093);
  src = want;
  {
    StreamGate gate(static_cast<cudaStream_t>((*be)->stream()));
    const absl::Time start = absl::Now();
    (*be)->CopyToDevice(dst->data(), src.data(), bytes);
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // it waited 5 minutes behind the gate
    std::fill(src.begin(), src.end(), 0);
    gate.Open();
  }
  ASSERT_TRUE((*be)->CopyToHost(back.data(), dst->data(), bytes).ok());
  EXPECT_TRUE(back == want);
}

// CPU time of the calling thread.
absl::Duration ThreadCpuTime() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return absl::DurationFromTimespec(t);
}

// Runs `wait` (which must return once the gate opens) behind a gate held for `held` on the
// backend's stream; the waiting thread's CPU time over the wall time it waited.
template <typename Wait>
double CpuShareOfAWait(Backend& be, absl::Duration held, Wait wait) {
  StreamGate gate(static_cast<cudaStream_t>(be.stream()));
  std::thread opener([&gate, held] {
    absl::SleepFor(held);
    gate.Open();
  });
  const absl::Time start = absl::Now();
  const absl::Duration cpu_start = ThreadCpuTime();
  wait();
  const double share = absl::FDivDuration(ThreadCpuTime() - cpu_start, absl::Now() - start);
  opener.join();
  return share;
}

// "Yields the core": a step-long wait costs the waiting thread a few percent of a core, not
// all of it. Ours poll with a sleeping back-off (about 2%); the driver's own waits, in blocking
// sync, sleep (about 0%; the driver's default, auto, spins: about 100%, as on the old code).
TEST(CudaBackendWait, WaitsBehindAStepLongGateLeaveTheCoreFree) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(0);
  ASSERT_TRUE(be.ok()) << be.status();
  const double polled = CpuShareOfAWait(**be, absl::Milliseconds(500), [&be] {
    EXPECT_TRUE((*be)->Synchronize().ok());
  });
  EXPECT_LT(polled, 0.25) << "Synchronize's polls took " << polled << " of a core";
  const double in_driver = CpuShareOfAWait(**be, absl::Milliseconds(500), [&be] {
    EXPECT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>((*be)->stream())), cudaSuccess);
  });
  EXPECT_LT(in_driver, 0.25) << "a wait inside the driver took " << in_driver << " of a core";
  const absl::StatusOr<HostSyncMode> mode = HostSyncModeOf(0);
  std::printf("CPU share of a 500 ms wait: polled %.3f, in the driver (%s) %.3f\n", polled,
              mode.ok() ? std::string(HostSyncModeName(*mode)).c_str() : "?", in_driver);
}

TEST(CudaBackendWait, CudaBackendChoosesBlockingSync) {
  SKIP_WITHOUT_DEVICE();
  {
    absl::StatusOr<std::unique_ptr<Backend>> yield =
        CreateCudaBackend(0, {.host_sync = HostSyncMode::kYield});
    ASSERT_TRUE(yield.ok()) << yield.status();
    absl::StatusOr<HostSyncMode> mode = HostSyncModeOf(0);
    ASSERT_TRUE(mode.ok()) << mode.status();
    EXPECT_EQ(*mode, HostSyncMode::kYield);
  }
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateCudaBackend(0);
  ASSERT_TRUE(be.ok()) << be.status();
  absl::StatusOr<HostSyncMode> mode = HostSyncModeOf(0);
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_EQ(*mode, HostSyncMode::kBlockingSync)
      << "TPSERVE_CUDA_HOST_SYNC set in the environment overrides the default";
}

// A rank whose group is re-formed around a replaced peer (RankRuntime::Regroup): after
// RequestAbort, RecoverFromAbort waits for the stuck work (here a gate, opened as destroying
// an aborted NCCL communicator ends its kernels), then the backend serves again: a copy there
// and back gives the bytes it was given.
TEST(CudaBackendWait, RecoverFromAbortMakesTheBackendServeAgain) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> be = CreateBackend({.kind = BackendKind::kCuda});
  ASSERT_TRUE(be.ok()) << be.status();
  absl::StatusOr<DeviceBuffer> buf = (*be)->Allocate(4096, "buffer");
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto gate = std::make_unique<StreamGate>(static_cast<cudaStream_t>((*be)->stream()));
  (*be)->RequestAbort();
  EXPECT_EQ((*be)->Synchronize().code(), absl::StatusCode::kUnavailable);
  std::thread communicator_destroyed([&gate] {
    absl::SleepFor(absl::Milliseconds(200));
    gate->Open();
  });
  const absl::Status recovered = (*be)->RecoverFromAbort();
  communicator_destroyed.join();
  ASSERT_TRUE(recovered.ok()) << recovered;
  EXPECT_TRUE((*be)->Synchronize().ok());
  std::vector<char> in(4096), out(4096, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7);
  (*be)->CopyToDevice(buf->data(), in.data(), in.size());
  ASSERT_TRUE((*be)->CopyToHost(out.data(), buf->data(), out.size()).ok());
  EXPECT_EQ(out, in);
}

}  // namespace
}  // namespace tpserve::cuda
