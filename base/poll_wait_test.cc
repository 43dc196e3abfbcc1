// PollUntil on a fake clock whose sleep advances it: the backoff's steps, the deadline, the
// abort flag set from another thread, and poll errors passed through.
#include "base/poll_wait.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

// A clock that only moves when the waiter sleeps; it records every sleep.
struct FakeClock {
  absl::Time now = absl::UnixEpoch();
  std::vector<absl::Duration> sleeps;

  PollWaitOptions Options(absl::Duration timeout) {
    PollWaitOptions options;
    options.timeout = timeout;
    options.now = [this] { return now; };
    options.sleep = [this](absl::Duration d) {
      sleeps.push_back(d);
      now += d;
    };
    return options;
  }
};

TEST(PollBackoff, DoublesFrom20MicrosecondsTo100) {
  PollBackoff backoff;
  std::vector<absl::Duration> steps;
  for (int i = 0; i < 6; ++i) steps.push_back(backoff.Next());
  const std::vector<absl::Duration> want = {
      absl::Microseconds(20),  absl::Microseconds(40),  absl::Microseconds(80),
      absl::Microseconds(100), absl::Microseconds(100), absl::Microseconds(100)};
  EXPECT_EQ(steps, want);
}

TEST(PollUntil, ReturnsOnceThePollSaysDoneAndSleepsBetweenPolls) {
  FakeClock clock;
  int polls = 0;
  const absl::Status s = PollUntil("step", clock.Options(absl::Seconds(1)),
                                   [&]() -> absl::StatusOr<bool> { return ++polls == 4; });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(polls, 4);
  const std::vector<absl::Duration> want = {absl::Microseconds(20), absl::Microseconds(40),
                                            absl::Microseconds(80)};
  EXPECT_EQ(clock.sleeps, want);
}

// A whole second of waiting is about ten thousand polls, not millions: the waiter sleeps.
TEST(PollUntil, TimesOutNamingTheWaitAndTheTimeout) {
  FakeClock clock;
  int polls = 0;
  const absl::Status s = PollUntil("cuda:0 Synchronize", clock.Options(absl::Seconds(1)),
                                   [&]() -> absl::StatusOr<bool> {
                                     ++polls;
                                     return false;
                                   });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_EQ(s.message(), "cuda:0 Synchronize did not complete within 1s");
  EXPECT_GE(clock.now - absl::UnixEpoch(), absl::Seconds(1));
  EXPECT_LT(clock.now - absl::UnixEpoch(), absl::Seconds(1) + absl::Microseconds(200));
  EXPECT_GT(polls, 9990);
  EXPECT_LT(polls, 10010);
}

TEST(PollUntil, PassesThePollsErrorThrough) {
  FakeClock clock;
  const absl::Status s =
      PollUntil("wait", clock.Options(absl::Seconds(1)), []() -> absl::StatusOr<bool> {
        return absl::InternalError("cudaStreamQuery: an illegal memory access");
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "cudaStreamQuery: an illegal memory access");
}

TEST(PollUntil, AnAbortSetBeforeTheWaitEndsItWithoutPolling) {
  FakeClock clock;
  std::atomic<bool> abort{true};
  PollWaitOptions options = clock.Options(absl::Seconds(1));
  options.abort = &abort;
  int polls = 0;
  const absl::Status s = PollUntil("CopyToHost", options, [&]() -> absl::StatusOr<bool> {
    ++polls;
    return true;
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(s.message(), "CopyToHost: aborted on request");
  EXPECT_EQ(polls, 0);
}

// The real clock and sleep: another thread's abort ends a wait that has no deadline.
TEST(PollUntil, AnAbortFromAnotherThreadEndsAWaitWithoutDeadline) {
  std::atomic<bool> abort{false};
  PollWaitOptions options;
  options.abort = &abort;
  std::thread supervisor([&abort] {
    absl::SleepFor(absl::Milliseconds(50));
    abort.store(true);
  });
  const absl::Time start = absl::Now();
  const absl::Status s =
      PollUntil("Synchronize", options, []() -> absl::StatusOr<bool> { return false; });
  supervisor.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace tpserve
