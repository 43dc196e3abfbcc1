#include "base/poll_wait.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

namespace tpserve {

absl::Duration PollBackoff::Next() {
  const absl::Duration sleep = next_;
  next_ = std::min(next_ * 2, kMax);
  return sleep;
}

absl::Status PollUntil(std::string_view what, const PollWaitOptions& options,
                       absl::FunctionRef<absl::StatusOr<bool>()> poll) {
  const absl::string_view name(what.data(), what.size());
  const auto now = [&options] { return options.now ? options.now() : absl::Now(); };
  const absl::Time deadline = now() + options.timeout;
  PollBackoff backoff;
  while (true) {
    if (options.abort != nullptr && options.abort->load()) {
      return absl::UnavailableError(absl::StrCat(name, ": aborted on request"));
    }
    absl::StatusOr<bool> done = poll();
    if (!done.ok()) return done.status();
    if (*done) return absl::OkStatus();
    if (now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          name, " did not complete within ", absl::FormatDuration(options.timeout)));
    }
    const absl::Duration sleep = backoff.Next();
    if (options.sleep) {
      options.sleep(sleep);
    } else {
      absl::SleepFor(sleep);
    }
  }
}

}  // namespace tpserve
