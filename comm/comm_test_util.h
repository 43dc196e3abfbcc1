// Test helpers shared by the communicator tests: one deterministic workload that exercises
// every collective, run on N ranks as threads or as forked processes, with its results
// flattened to bytes so two implementations (or two processes) can be compared bitwise; and
// direct all-to-all cases with their expected bytes laid out here, independently of any
// communicator.
//
//   std::vector<CollectiveResults> r = RunOnThreads(2, [&](int rank) { return MakeComm(rank); });
//   EXPECT_EQ(r[1].Serialize(), RunInProcess(2, sizes)[1].Serialize());
//   EXPECT_EQ(r[0].SerializeCommon(), r[1].SerializeCommon());
//   AllToAllRun run = RunAllToAll(comms, {{1, 0}, {2, 3}}, DType::kBF16);
//   EXPECT_EQ(run.out[1], ExpectedAllToAll({{1, 0}, {2, 3}}, 1, 2));
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
#include "formats/dtype.h"

namespace tpserve {

// Rank-dependent values whose sums round differently under different association orders.
float RankValue(int rank, size_t i);

// Everything one rank observed while running RunWorkload.
struct CollectiveResults {
  absl::Status status;
  std::vector<std::vector<float>> reduced;     // [size index][n]
  std::vector<std::vector<float>> gathered;    // [size index][world * n]
  std::vector<std::vector<uint8_t>> received;  // [root][kBroadcastBytes]
  // [size index][elements]: the all-to-all's output (ExpectedWorkloadAllToAll says what).
  std::vector<std::vector<float>> exchanged;
  // [size index]: the Gather to root n % world: world * n values there, none elsewhere.
  std::vector<std::vector<float>> rooted;
  std::string Serialize() const;  // raw bytes of all of the above, in order
  // Raw bytes of what every rank must have alike: reduced, gathered and received (not
  // exchanged, which holds what the other ranks sent this one).
  std::string SerializeCommon() const;
};

inline constexpr size_t kBroadcastBytes = 37;

// For each n in `sizes`: AllReduceSum, AllGather and Gather (to root n % world) of
// RankValue(rank, 0..n-1), and an f32
// AllToAll of WorkloadAllToAllCount elements per pair; then a Broadcast from every root and a
// Barrier. Stops at the first error (kept in `status`).
CollectiveResults RunWorkload(Communicator& comm, const std::vector<size_t>& sizes);

// Elements rank `from` sends rank `to` in the workload's all-to-all for size n: n * (1 + 4 *
// from + to) / 8, different for every pair of up to 4 ranks (up to 2n: from n = 1025 some pair
// of 3 or 4 ranks, from n = 16384 every nonempty pair, overflows a 4 KiB shm slot), except
// none at all from rank 1 to rank 0.
int64_t WorkloadAllToAllCount(int from, int to, size_t n);
// Element i of the piece rank `from` sends rank `to` in the workload.
float WorkloadAllToAllValue(int from, int to, size_t i);
// What rank `rank` of `world_size` must receive in the workload's all-to-all for size n: the
// piece from rank 0, then from rank 1, ..., built from the two functions above.
std::vector<float> ExpectedWorkloadAllToAll(int rank, int world_size, size_t n);

// A direct all-to-all case: counts[p][q] elements go from rank p to rank q.
using AllToAllCounts = std::vector<std::vector<int64_t>>;
// Bytes after each rank's all-to-all output, and what they and the output start as.
inline constexpr size_t kAllToAllGuardBytes = 16;
inline constexpr uint8_t kAllToAllPoison = 0xEE;
// Byte b of the piece rank `from` sends rank `to` (every byte value occurs, NaN patterns too).
uint8_t AllToAllByte(int from, int to, size_t b);
// Rank `rank`'s input: its piece for rank 0, then for rank 1, ...
std::vector<uint8_t> AllToAllInput(const AllToAllCounts& counts, int rank, size_t elem_bytes);
// Rank `rank`'s output, piece from rank 0 first, then kAllToAllGuardBytes of kAllToAllPoison.
std::vector<uint8_t> ExpectedAllToAll(const AllToAllCounts& counts, int rank, size_t elem_bytes);

struct AllToAllRun {
  std::vector<absl::Status> status;       // [rank]
  std::vector<std::vector<uint8_t>> out;  // [rank]: output then guard bytes, poisoned at start
};
// Runs one AllToAll on every rank of `comms`, one thread each: rank p sends `sends[p]` from
// AllToAllInput and expects expects[p][q] elements from rank q (nullptr: sends[q][p], counts
// that pair up). Checks nothing itself.
AllToAllRun RunAllToAll(const std::vector<std::unique_ptr<Communicator>>& comms,
                        const AllToAllCounts& sends, DType dtype,
                        const AllToAllCounts* expects = nullptr);

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
