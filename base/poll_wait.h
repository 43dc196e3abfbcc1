// Host waits on work someone else finishes (a GPU stream, an NCCL communicator) that have a
// deadline, can be ended from another thread, and do not hold a core: between polls the waiting
// thread sleeps, 20 us after the first poll, doubling to 100 us (a poll of cudaEventQuery or
// cudaStreamQuery costs about a microsecond). A step-long wait thus wakes ~10,000 times a
// second, about 1-2% of a core, instead of spinning one for the whole step, and notices
// completion within 100 us: under 5% of a 2 ms decode step, where a 1 ms cap would cost 25%.
//
//   std::atomic<bool> abort{false};  // set from a supervisor thread
//   TP_RETURN_IF_ERROR(PollUntil("cuda:0 Synchronize", {.timeout = absl::Minutes(5),
//                                                       .abort = &abort},
//                                [&]() -> absl::StatusOr<bool> { return StreamIdle(); }));
//
// Threading: PollUntil runs on the caller's thread; only *options.abort is shared (set it from
// any thread). PollBackoff is a value owned by one waiting thread.
#ifndef TPSERVE_BASE_POLL_WAIT_H_
#define TPSERVE_BASE_POLL_WAIT_H_

#include <atomic>
#include <functional>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tpserve {

// The sleeps between polls: 20 us, 40 us, 80 us, then 100 us for good.
class PollBackoff {
 public:
  static constexpr absl::Duration kFirst = absl::Microseconds(20);
  static constexpr absl::Duration kMax = absl::Microseconds(100);

  // The next sleep.
  absl::Duration Next();

 private:
  absl::Duration next_ = kFirst;
};

struct PollWaitOptions {
  absl::Duration timeout = absl::InfiniteDuration();  // from the call to PollUntil
  // When it becomes true (from any thread), the wait ends with UNAVAILABLE at the next poll.
  const std::atomic<bool>* abort = nullptr;
  // For tests: the clock and the sleep; null means absl::Now and absl::SleepFor.
  std::function<absl::Time()> now;
  std::function<void(absl::Duration)> sleep;
};

// Calls `poll` until it returns true, sleeping PollBackoff's steps in between. Returns OK once
// it does; poll's own error as it is; UNAVAILABLE "<what>: aborted on request" when *abort is
// set (checked before every poll, so a wait that was aborted before it began does not poll);
// DEADLINE_EXCEEDED "<what> did not complete within <timeout>" when `timeout` has passed and the
// last poll still said false.
absl::Status PollUntil(std::string_view what, const PollWaitOptions& options,
                       absl::FunctionRef<absl::StatusOr<bool>()> poll);

}  // namespace tpserve

#endif  // TPSERVE_BASE_POLL_WAIT_H_
