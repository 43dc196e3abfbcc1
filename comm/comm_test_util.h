// Test helpers shared by the communicator tests: one deterministic workload that exercises
// every collective, run on N ranks as threads or as forked processes, with its results
// flattened to bytes so two implementations (or two processes) can be compared bitwise.
//
//   std::vector<CollectiveResults> r = RunOnThreads(2, [&](int rank) { return MakeComm(rank); });
//   EXPECT_EQ(r[0].Serialize(), r[1].Serialize());
//
// Threading: RunOnThreads starts one thread per rank and joins them all before returning.
#ifndef TPSERVE_COMM_COMM_TEST_UTIL_H_
#define TPSERVE_COMM_COMM_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "comm/communicator.h"

namespace tpserve {

// Rank-dependent values whose sums round differently under different association orders.
float RankValue(int rank, size_t i);

// Everything one rank observed while running RunWorkload.
struct CollectiveResults {
  absl::Status status;
  std::vector<std::vector<float>> reduced;     // [size index][n]
  std::vector<std::vector<float>> gathered;    // [size index][world * n]
  std::vector<std::vector<uint8_t>> received;  // [root][kBroadcastBytes]
  std::string Serialize() const;               // raw bytes of all of the above, in order
};

inline constexpr size_t kBroadcastBytes = 37;

// For each n in `sizes`: AllReduceSum and AllGather of RankValue(rank, 0..n-1); then a
// Broadcast from every root and a Barrier. Stops at the first error (kept in `status`).
CollectiveResults RunWorkload(Communicator& comm, const std::vector<size_t>& sizes);

// Runs RunWorkload on `world_size` threads; `connect(rank)` makes each rank's communicator
// (on that rank's thread, since connecting may block until all ranks arrive).
std::vector<CollectiveResults> RunOnThreads(
    int world_size, const std::vector<size_t>& sizes,
    const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& connect);

// A connected implementation as the Communicator the helpers below take.
template <typename T>
absl::StatusOr<std::unique_ptr<Communicator>> AsCommunicator(
    absl::StatusOr<std::unique_ptr<T>> comm) {
  if (!comm.ok()) return comm.status();
  return std::unique_ptr<Communicator>(*std::move(comm));
}

// RunWorkload on `world_size` ranks of an InProcessCommunicator group: the reference the other
// communicators must match bit for bit.
std::vector<CollectiveResults> RunInProcess(int world_size, const std::vector<size_t>& sizes);

// RunWorkload in `world_size` forked processes (as real ranks run); `connect(rank)` is called
// in the child. Returns each rank's Serialize()d results, passed back through files in `dir`;
// a rank that could not connect or run leaves its error text instead. Aborts via Watchdog if
// the children do not all exit within `limit`.
std::vector<std::string> RunWorkloadInProcesses(
    int world_size, const std::vector<size_t>& sizes, const std::string& dir,
    const std::function<absl::StatusOr<std::unique_ptr<Communicator>>(int rank)>& connect,
    absl::Duration limit = absl::Seconds(60));

// A directory for this test process under $TEST_TMPDIR (or /tmp): `name` and the pid.
std::string TestDir(const std::string& name);

// Aborts the process if not destroyed within `limit`: a hang fails the test loudly instead of
// being killed by the test runner's much longer timeout.
class Watchdog {
 public:
  Watchdog(absl::Duration limit, std::string what);
  ~Watchdog();

 private:
  absl::Notification done_;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_COMM_TEST_UTIL_H_
