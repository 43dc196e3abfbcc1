// A Communicator decorator that measures the time spent inside collectives, so a step can
// report how much of it was all-reduce, all-gather and all-to-all (docs/PERFORMANCE.md).
//
//   TimedCommunicator comm(std::move(gloo));
//   model->Forward(...);  double collective_s = comm.TakeSeconds();
//
// With an asynchronous communicator (NCCL) the collectives only enqueue, so this measures the
// host time to enqueue them; AwaitCollectives() is forwarded untimed, as its wait covers the
// compute still queued before the collectives too.
// Threading: as the wrapped communicator (one thread at a time).
#ifndef TPSERVE_WORKER_TIMED_COMMUNICATOR_H_
#define TPSERVE_WORKER_TIMED_COMMUNICATOR_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "comm/communicator.h"

namespace tpserve {

class TimedCommunicator final : public Communicator {
 public:
  explicit TimedCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string Describe() const override { return inner_->Describe(); }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    return Timed([&] { return inner_->AllReduceSum(data); });
  }
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override {
    return Timed([&] { return inner_->AllGather(in, out); });
  }
  absl::Status AllReduceSum(void* data, int64_t count, DType dtype) override {
    return Timed([&] { return inner_->AllReduceSum(data, count, dtype); });
  }
  absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out) override {
    return Timed([&] { return inner_->AllGather(in, in_count, dtype, out); });
  }
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override {
    return Timed([&] { return inner_->AllToAll(in, send_counts, out, recv_counts, dtype); });
  }
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override {
    return Timed([&] { return inner_->Broadcast(data, root); });
  }
  absl::Status Barrier() override {
    return Timed([&] { return inner_->Barrier(); });
  }
  absl::Status AwaitCollectives() override { return inner_->AwaitCollectives(); }
  // A recorded step's collectives are inner's to watch; those its body enqueues come back
  // through this decorator (the model holds it) and are timed there.
  bool capturable() const override { return inner_->capturable(); }
  absl::Status RunRecorded(std::string_view what, absl::FunctionRef<absl::Status()> run) override {
    return inner_->RunRecorded(what, run);
  }
  void RequestAbort() override {
    absl::MutexLock lock(&abort_mu_);
    if (inner_ != nullptr) inner_->RequestAbort();
  }
  // The group re-formed (a rank replaced): `inner` from now on. Called between steps, from the
  // thread that runs them. Null destroys the old one first (NCCL: its kernels waiting on a
  // dead peer end), until the next Replace; no collective may be called meanwhile.
  void Replace(std::unique_ptr<Communicator> inner) {
    absl::MutexLock lock(&abort_mu_);
    inner_ = std::move(inner);
  }

  // Seconds spent in collectives since the last call.
  double TakeSeconds() {
    const double s = seconds_;
    seconds_ = 0.0;
    return s;
  }

 private:
  template <typename F>
  absl::Status Timed(F&& f) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = f();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return s;
  }

  absl::Mutex abort_mu_;  // RequestAbort (any thread) against Replace
  std::unique_ptr<Communicator> inner_;
  double seconds_ = 0.0;
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_TIMED_COMMUNICATOR_H_
