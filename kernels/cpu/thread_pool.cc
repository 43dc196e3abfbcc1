#include "kernels/cpu/thread_pool.h"

#include "kernels/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpserve {
namespace {

// About 20-50 microseconds of polling: long enough to bridge the gap between two ops of one
// forward pass, short enough not to steal a shared core from other processes for long.
constexpr int kSpinIterations = 4000;

constexpr int kIndexBits = 20;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;

uint64_t Pack(uint64_t serial, uint64_t num_tasks, uint64_t next) {
  return (serial << (2 * kIndexBits)) | (num_tasks << kIndexBits) | next;
}

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(num_threads) {
  TP_CHECK(num_threads >= 1, "ThreadPool needs at least one thread");
  workers_.reserve(num_threads - 1);
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_relaxed);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  for (std::thread& w : workers_) w.join();
}

bool ThreadPool::RunOneTask(int thread) {
  uint64_t w = work_.load(std::memory_order_acquire);
  for (;;) {
    const uint64_t next = w & kIndexMask;
    const uint64_t num_tasks = (w >> kIndexBits) & kIndexMask;
    if (next >= num_tasks) return false;
    if (work_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      // Holding an unfinished task of this loop: fn_ still belongs to it.
      (*fn_)(static_cast<int64_t>(next), thread);
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 ==
          static_cast<int64_t>(num_tasks)) {
        done_.notify_all();
      }
      return true;
    }
  }
}

void ThreadPool::ParallelFor(int64_t num_tasks, absl::FunctionRef<void(int64_t, int)> fn) {
  if (num_tasks <= 0) return;
  if (num_threads_ == 1 || num_tasks == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  TP_CHECK(num_tasks <= kMaxTasks, "too many tasks for one ParallelFor");
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  ++serial_;
  work_.store(Pack(serial_ & ((uint64_t{1} << 24) - 1), num_tasks, 0),
              std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  while (RunOneTask(0)) {
  }
  // Only tasks already claimed by workers can be outstanding now.
  for (int spin = 0;; ++spin) {
    const int64_t done = done_.load(std::memory_order_acquire);
    if (done == num_tasks) break;
    if (spin < kSpinIterations) {
      CpuRelax();
    } else {
      done_.wait(done, std::memory_order_acquire);
    }
  }
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t wake = wake_.load(std::memory_order_acquire);
    for (int spin = 0; wake == seen; ++spin) {
      if (spin < kSpinIterations) {
        CpuRelax();
      } else {
        wake_.wait(seen, std::memory_order_acquire);
      }
      wake = wake_.load(std::memory_order_acquire);
    }
    seen = wake;
    if (stop_.load(std::memory_order_relaxed)) return;
    while (RunOneTask(thread)) {
    }
  }
}

}  // namespace tpserve
