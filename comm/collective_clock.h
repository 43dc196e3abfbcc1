// When the collectives a step enqueued on its stream have overrun the collective timeout. Each
// collective's clock starts when the work queued before it has finished (its inputs are ready),
// not when the host starts waiting: a 32K-token prefill ahead of the first all-reduce is
// compute, and only the time spent inside a collective (a peer dead, stalled, or still far
// behind in its own compute) counts against the timeout.
//
//   CollectiveClock clock(/*num_collectives=*/pending, options.timeout);
//   // each poll: count the collectives whose "before" event has completed (ready) and whose
//   // "after" event has (done), then:
//   switch (clock.Update(absl::Now(), ready, done)) { case CollectiveClock::kDone: ... }
//
// The host sees a collective become ready at its first poll after the fact, so the clock
// starts at most one poll interval late. Plain C++ (NcclCommunicator feeds it CUDA events).
// Threading: owned by the one waiting thread.
#ifndef TPSERVE_COMM_COLLECTIVE_CLOCK_H_
#define TPSERVE_COMM_COLLECTIVE_CLOCK_H_

#include <vector>

#include "absl/time/time.h"

namespace tpserve {

class CollectiveClock {
 public:
  enum State { kRunning, kDone, kOverdue };

  CollectiveClock(int num_collectives, absl::Duration timeout)
      : num_collectives_(num_collectives), timeout_(timeout) {}

  // `ready`: how many collectives have their inputs ready; `done`: how many have finished.
  // Both count from the first in stream order, where they complete in order.
  // REQUIRES: 0 <= done <= ready <= num_collectives, neither smaller than at the last call.
  // kOverdue once a collective has been ready but unfinished for `timeout` or longer.
  State Update(absl::Time now, int ready, int done);

  // After kOverdue: the collective that overran (0-based, in enqueue order) and when it
  // became ready.
  int overdue() const { return overdue_; }
  absl::Time ready_since() const { return ready_at_[overdue_]; }

 private:
  const int num_collectives_;
  const absl::Duration timeout_;
  std::vector<absl::Time> ready_at_;  // [i]: the poll that first saw collective i ready
  int overdue_ = -1;
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_COLLECTIVE_CLOCK_H_
