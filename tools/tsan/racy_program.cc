// A real data race next to an absl::Mutex: one thread updates `counter` under the Mutex, the
// other without it. tsan_reports_race_test runs this and expects TSan to name the race, so the
// instrumented Mutex (and the suppressions) are known not to hide races in our code.
#include <cstdio>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

absl::Mutex mu;
long counter = 0;  // meant to be guarded by mu; BumpUnlocked forgets

void BumpLocked() {
  for (int i = 0; i < 10000; ++i) {
    absl::MutexLock lock(&mu);
    ++counter;
  }
}

__attribute__((noinline)) void BumpUnlocked() {
  for (int i = 0; i < 10000; ++i) ++counter;
}

}  // namespace

int main() {
  std::thread a(BumpLocked);
  std::thread b(BumpUnlocked);
  a.join();
  b.join();
  std::printf("counter=%ld\n", counter);
  return 0;
}
