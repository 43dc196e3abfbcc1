// CollectiveClock as a table of polls: time, collectives ready, collectives done, verdict.
// The first two cases are the review's: compute before a collective longer than the timeout
// (a long prefill) must not time out, as it did when the deadline ran from the start of the
// wait; a collective that itself stalls must.
#include "comm/collective_clock.h"

#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

struct Poll {
  double t_s;  // seconds since the wait began
  int ready;
  int done;
  CollectiveClock::State want;
};

void RunPolls(CollectiveClock& clock, const std::vector<Poll>& polls) {
  const absl::Time start = absl::UnixEpoch();
  for (const Poll& p : polls) {
    SCOPED_TRACE(testing::Message() << "t=" << p.t_s << "s ready=" << p.ready
                                    << " done=" << p.done);
    EXPECT_EQ(clock.Update(start + absl::Seconds(p.t_s), p.ready, p.done), p.want);
  }
}

TEST(CollectiveClock, ComputeBeforeTheCollectiveLongerThanTheTimeoutIsNotOverdue) {
  CollectiveClock clock(/*num_collectives=*/1, absl::Seconds(1));
  RunPolls(clock, {{0.0, 0, 0, CollectiveClock::kRunning},
                   {0.9, 0, 0, CollectiveClock::kRunning},
                   {5.0, 0, 0, CollectiveClock::kRunning},   // prefill: 10 timeouts of compute
                   {10.0, 1, 0, CollectiveClock::kRunning},  // inputs ready: its clock starts
                   {10.9, 1, 0, CollectiveClock::kRunning},
                   {10.95, 1, 1, CollectiveClock::kDone}});
}

TEST(CollectiveClock, ACollectiveThatStallsIsOverdueOneTimeoutAfterItsInputsWereReady) {
  CollectiveClock clock(/*num_collectives=*/1, absl::Seconds(1));
  RunPolls(clock, {{0.0, 0, 0, CollectiveClock::kRunning},
                   {2.0, 1, 0, CollectiveClock::kRunning},
                   {2.999, 1, 0, CollectiveClock::kRunning},
                   {3.0, 1, 0, CollectiveClock::kOverdue}});
  EXPECT_EQ(clock.overdue(), 0);
  EXPECT_EQ(clock.ready_since(), absl::UnixEpoch() + absl::Seconds(2));
}

// Two per layer with compute between them: each collective has a clock of its own, so long
// compute between collectives never adds up against one of them.
TEST(CollectiveClock, EachCollectiveHasItsOwnClock) {
  CollectiveClock clock(/*num_collectives=*/3, absl::Seconds(1));
  RunPolls(clock, {{0.5, 1, 0, CollectiveClock::kRunning},
                   {1.0, 1, 1, CollectiveClock::kRunning},
                   {4.0, 1, 1, CollectiveClock::kRunning},  // compute of the next layer
                   {4.2, 2, 1, CollectiveClock::kRunning},
                   {5.0, 2, 2, CollectiveClock::kRunning},
                   {5.1, 3, 2, CollectiveClock::kRunning},
                   {6.0, 3, 2, CollectiveClock::kRunning},
                   {6.1, 3, 2, CollectiveClock::kOverdue}});
  EXPECT_EQ(clock.overdue(), 2);  // the third, ready since 5.1 s
}

// One poll may see several collectives become ready and finish at once: the oldest still
// running is the one judged.
TEST(CollectiveClock, SeveralCollectivesSeenReadyInOnePoll) {
  CollectiveClock clock(/*num_collectives=*/4, absl::Seconds(1));
  RunPolls(clock, {{3.0, 3, 1, CollectiveClock::kRunning},
                   {3.9, 3, 2, CollectiveClock::kRunning},
                   {4.0, 3, 2, CollectiveClock::kOverdue}});
  EXPECT_EQ(clock.overdue(), 2);
}

TEST(CollectiveClock, NoCollectivesIsDoneAtOnce) {
  CollectiveClock clock(/*num_collectives=*/0, absl::Seconds(1));
  RunPolls(clock, {{0.0, 0, 0, CollectiveClock::kDone}});
}

}  // namespace
}  // namespace tpserve
