// A persistent pool of worker threads for data-parallel loops inside one op. The calling thread
// takes part, so a pool of N threads starts N - 1 workers; N = 1 runs everything inline.
//
//   ThreadPool pool(2);
//   pool.ParallelFor(num_tiles, [&](int64_t tile, int thread) { RunTile(tile, scratch[thread]); });
//
// Tasks are claimed one at a time from a shared counter, so uneven tasks balance themselves
// and a worker that is descheduled (a busy machine) simply claims fewer: ParallelFor waits only
// for tasks that were claimed, never for a worker to wake up. Workers spin briefly after each
// loop (ops follow each other within microseconds in a forward pass), then sleep on a
// futex-backed atomic wait.
// Threading: ParallelFor must be called by one thread at a time and must not be nested.
#ifndef TPSERVE_KERNELS_CPU_THREAD_POOL_H_
#define TPSERVE_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace tpserve {

class ThreadPool {
 public:
  // Most tasks one ParallelFor may have.
  static constexpr int64_t kMaxTasks = (int64_t{1} << 20) - 1;

  // REQUIRES: num_threads >= 1.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Calls fn(task, thread) for every task in [0, num_tasks), `thread` in [0, num_threads())
  // naming the executing thread (0 = the caller), and returns when all calls have returned.
  // REQUIRES: num_tasks <= kMaxTasks.
  void ParallelFor(int64_t num_tasks, absl::FunctionRef<void(int64_t, int)> fn);

 private:
  // Claims and runs one task of the current loop; false when none is left to claim.
  bool RunOneTask(int thread);
  void WorkerLoop(int thread);

  const int num_threads_;
  std::vector<std::thread> workers_;
  // The current loop in one word, so a claim is a single compare-and-swap that fails for a
  // stale loop: bits 40..63 loop serial, 20..39 number of tasks, 0..19 next unclaimed task.
  std::atomic<uint64_t> work_{0};
  std::atomic<int64_t> done_{0};          // tasks of the current loop finished
  std::atomic<uint32_t> wake_{0};         // bumped per loop; workers sleep on it
  std::atomic<bool> stop_{false};
  uint64_t serial_ = 0;                   // caller-side loop counter
  // The current loop's body; written before `work_` is published (release) and read only
  // after a successful claim, which proves the loop is still unfinished.
  const absl::FunctionRef<void(int64_t, int)>* fn_ = nullptr;
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_THREAD_POOL_H_
