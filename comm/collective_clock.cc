#include "comm/collective_clock.h"

namespace tpserve {

CollectiveClock::State CollectiveClock::Update(absl::Time now, int ready, int done) {
  while (static_cast<int>(ready_at_.size()) < ready) ready_at_.push_back(now);
  if (done >= num_collectives_) return kDone;
  // Collectives finish in stream order, so the oldest unfinished one (index `done`) has been
  // ready the longest; the ones behind it cannot be overdue before it is.
  if (done < ready && now - ready_at_[done] >= timeout_) {
    overdue_ = done;
    return kOverdue;
  }
  return kRunning;
}

}  // namespace tpserve
