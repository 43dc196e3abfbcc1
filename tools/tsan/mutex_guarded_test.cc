// Under --config=tsan: data handed between threads only through absl::Mutex, absl::CondVar and
// absl::Notification must draw no report. With Debian's uninstrumented libabsl_synchronization
// this test fails (TSan sees none of the ordering and halts on the first "race"); with
// //tools/tsan:runtime linked in it passes. Meaningless without TSan, hence tagged manual.
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace {

TEST(TsanRuntime, DataGuardedByAbslMutexDrawsNoReport) {
  absl::Mutex mu;
  std::vector<int> items;  // guarded by mu
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        absl::MutexLock lock(&mu);
        items.push_back(t);
        if (items.size() > 64) items.clear();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  absl::MutexLock lock(&mu);
  EXPECT_LE(items.size(), 64u);
}

TEST(TsanRuntime, HandOffThroughCondVarAndNotificationDrawsNoReport) {
  absl::Mutex mu;
  absl::CondVar ready;
  int* payload = nullptr;  // written by the producer, read by the consumer
  bool published = false;  // guarded by mu
  absl::Notification done;
  int seen = 0;
  std::thread consumer([&] {
    absl::MutexLock lock(&mu);
    while (!published) ready.Wait(&mu);
    seen = *payload;
    delete payload;
    done.Notify();
  });
  std::thread producer([&] {
    int* made = new int(42);
    absl::MutexLock lock(&mu);
    payload = made;
    published = true;
    ready.Signal();
  });
  done.WaitForNotification();
  EXPECT_EQ(seen, 42);  // read after the Notification, written by the consumer
  producer.join();
  consumer.join();
}

struct Turns {
  absl::Mutex mu;
  int stage = 0;         // guarded by mu
  std::vector<int> log;  // guarded by mu
  bool Odd() const { return stage % 2 == 1; }
  bool Even() const { return stage % 2 == 0; }
};

TEST(TsanRuntime, LockWhenAndAwaitConditionsDrawNoReport) {
  Turns turns;
  std::thread odd([&] {
    for (int i = 0; i < 50; ++i) {
      turns.mu.LockWhen(absl::Condition(&turns, &Turns::Odd));
      turns.log.push_back(turns.stage++);
      turns.mu.Unlock();
    }
  });
  for (int i = 0; i < 50; ++i) {
    absl::MutexLock lock(&turns.mu);
    turns.mu.Await(absl::Condition(&turns, &Turns::Even));
    turns.log.push_back(turns.stage++);
  }
  odd.join();
  absl::MutexLock lock(&turns.mu);
  ASSERT_EQ(turns.log.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(turns.log[i], i);
}

// Debian's libabsl_time (not instrumented) guards its clock calibration with a SpinLock whose
// inline Lock() carries no TSan annotation. If the slow path it falls into under contention were
// the instrumented SpinLock::SlowLock, that would tell TSan it diverts from a lock it never saw
// taken, and TSan stops the process ("CHECK failed: ... ignore_sync > 0"; http_server_test did so
// in CI from ChatTemplate's clock). Threads reading the clock at once reach that slow path.
TEST(TsanRuntime, ContendedClockOfUninstrumentedAbseilIsHarmless) {
  constexpr int kThreads = 6;
  std::vector<std::thread> threads;
  std::vector<int64_t> last(kThreads, 0);
  absl::Notification go;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      go.WaitForNotification();
      const absl::Time stop = absl::Now() + absl::Seconds(2);
      absl::Time now = absl::InfinitePast();
      while ((now = absl::Now()) < stop) last[t] = absl::ToUnixNanos(now);
    });
  }
  go.Notify();
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_GT(last[t], 0) << "thread " << t;
}

}  // namespace
