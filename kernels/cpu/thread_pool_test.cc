#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(ThreadPoolTest, RunsEveryTaskExactlyOnceAcrossManyCalls) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    const int64_t n = 1 + round % 37;
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int> bad_thread{0};
    pool.ParallelFor(n, [&](int64_t task, int thread) {
      hits[task].fetch_add(1);
      if (thread < 0 || thread >= 3) bad_thread.fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "round " << round;
    ASSERT_EQ(bad_thread.load(), 0);
  }
}

// More threads than cores and tiny loops: workers are often descheduled or late, so stale
// wake-ups from earlier loops must never run (or double-run) a task of a later one.
TEST(ThreadPoolTest, ManyTinyLoopsWithMoreThreadsThanCores) {
  ThreadPool pool(4);
  std::vector<std::atomic<int64_t>> sums(7);
  int64_t expected = 0;
  for (int round = 0; round < 20000; ++round) {
    const int64_t n = 2 + round % 6;
    pool.ParallelFor(n, [&](int64_t task, int) { sums[task].fetch_add(round); });
    expected += round;
  }
  // Tasks 0 and 1 run in every round.
  EXPECT_EQ(sums[0].load(), expected);
  EXPECT_EQ(sums[1].load(), expected);
}

TEST(ThreadPoolTest, SingleThreadRunsInlineInOrder) {
  ThreadPool pool(1);
  std::vector<int64_t> order;
  pool.ParallelFor(5, [&](int64_t task, int thread) {
    EXPECT_EQ(thread, 0);
    order.push_back(task);
  });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(ThreadPoolTest, WorkersActuallyParticipate) {
  ThreadPool pool(2);
  std::atomic<int> worker_tasks{0};
  // Tasks that block until both threads are inside prove that two threads ran concurrently.
  std::atomic<int> inside{0};
  pool.ParallelFor(2, [&](int64_t, int thread) {
    inside.fetch_add(1);
    while (inside.load() < 2) {
    }
    if (thread != 0) worker_tasks.fetch_add(1);
  });
  EXPECT_EQ(worker_tasks.load(), 1);
}

TEST(ThreadPoolTest, ZeroTasksIsANoOp) {
  ThreadPool pool(2);
  int calls = 0;
  pool.ParallelFor(0, [&](int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace tpserve
