#include "coordinator/http/elastic_task_queue.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace tpserve {
namespace {

TEST(ElasticTaskQueueTest, StartsNoThreadUntilWorkArrivesAndNeverMoreThanTheCap) {
  ElasticTaskQueue q(3, absl::Milliseconds(100));
  EXPECT_EQ(q.threads(), 0u);
  absl::Notification release;
  std::atomic<int> started{0}, done{0};
  for (int i = 0; i < 5; ++i) {
    q.enqueue([&] {
      ++started;
      release.WaitForNotification();
      ++done;
    });
  }
  for (int i = 0; i < 500 && started < 3; ++i) absl::SleepFor(absl::Milliseconds(2));
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(started.load(), 3);  // the other two wait in order
  EXPECT_EQ(q.threads(), 3u);
  release.Notify();
  for (int i = 0; i < 500 && done < 5; ++i) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(done.load(), 5);
}

TEST(ElasticTaskQueueTest, IdleThreadsExitAndAnIdleOneIsReusedRatherThanAdded) {
  ElasticTaskQueue q(8, absl::Milliseconds(200));
  std::atomic<int> done{0};
  q.enqueue([&] { ++done; });
  for (int i = 0; i < 500 && done < 1; ++i) absl::SleepFor(absl::Milliseconds(2));
  absl::SleepFor(absl::Milliseconds(20));
  q.enqueue([&] { ++done; });  // the idle thread takes it
  for (int i = 0; i < 500 && done < 2; ++i) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(q.threads(), 1u);
  for (int i = 0; i < 200 && q.threads() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(q.threads(), 0u);
  q.enqueue([&] { ++done; });  // and a new one starts after that
  for (int i = 0; i < 500 && done < 3; ++i) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(done.load(), 3);
}

TEST(ElasticTaskQueueTest, ShutdownRunsWhatIsQueued) {
  std::atomic<int> done{0};
  {
    ElasticTaskQueue q(1);
    for (int i = 0; i < 10; ++i) q.enqueue([&] { ++done; });
    q.shutdown();
  }
  EXPECT_EQ(done.load(), 10);
}

}  // namespace
}  // namespace tpserve
