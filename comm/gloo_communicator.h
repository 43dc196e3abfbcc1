// Collectives between CPU ranks over TCP with Gloo (Debian libgloo, GLOO_VERSION 0.5.0).
// Ranks meet through a gloo::rendezvous::Store: a FileStore directory for processes on one host,
// a HashStore for threads, or KvGlooStore (rendezvous_store.h) for a service such as the
// coordinator. Different runs sharing a store are kept apart by a PrefixStore per run id.
//
//   GlooOptions options{.rank = 1, .world_size = 2, .timeout = absl::Seconds(5)};
//   TP_ASSIGN_OR_RETURN(auto comm, GlooCommunicator::ConnectWithFileStore(options, dir, "run7"));
//
// Deadlines: the connect and the first collective are bounded by `startup_timeout` (a cold
// group: peers still arriving, connections set up lazily), every later collective by `timeout`
// (Gloo's context timeout).
// A peer that never arrives, stops answering or dies yields DEADLINE_EXCEEDED (Gloo saw a
// timeout) or UNAVAILABLE (anything else, e.g. the peer closed its socket), naming the
// collective, this rank and Gloo's own message (which gives the peer's address when known).
// Gloo reports errors with C++ exceptions; all are caught here. After a failure the TCP streams
// are in an unknown state, so the communicator is broken: later calls return UNAVAILABLE.
// Side effect: Connect() sets SIGPIPE to SIG_IGN if it is SIG_DFL (process-wide), so a write to
// a dead peer fails with EPIPE instead of killing the process.
// AllToAll goes through gloo::alltoallv (each rank posts one send and one receive per peer) and
// moves any dtype as bytes. Gloo cannot tell counts that do not pair up: with
// verify_collectives every rank's counts ride along in the verification all-gather and such a
// call is INVALID_ARGUMENT on every rank (nothing sent, the group stays usable). Without it,
// a receiver that expects more than its peer sends silently gets a short piece (the rest of
// its `out` unchanged) and one that expects less makes Gloo's I/O thread terminate the
// process; a rank whose own send and recv counts differ gets INVALID_ARGUMENT at once and its
// peers time out.
// Results: all-reduce uses Gloo's ring, so every rank gets the same bits, run after run. With
// two ranks they equal the in-process communicator's (a + b is commutative); with three or more
// Gloo adds in a different order per chunk, so they may differ from it by rounding (a few ulp).
// Threading: one thread at a time per communicator, as for every Communicator.
#ifndef TPSERVE_COMM_GLOO_COMMUNICATOR_H_
#define TPSERVE_COMM_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "comm/communicator.h"
#include "formats/dtype.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace tpserve {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // Address this rank listens on and advertises to its peers. Ignored when `iface` is set.
  std::string hostname = "127.0.0.1";
  // Network interface to listen on (e.g. "eth0"); empty: use `hostname`.
  std::string iface;
  // Bound on each collective after the first.
  absl::Duration timeout = absl::Seconds(30);
  // Bound on the connect and the first collective; below `timeout` (0 included): `timeout`.
  absl::Duration startup_timeout = absl::ZeroDuration();
  // Debug aid: before each collective, all-gather (collective, size, root, and for AllToAll
  // every rank's counts) and return INVALID_ARGUMENT on every rank if they differ (or the
  // counts do not pair up). Costs one small extra collective per call (2 * world_size + 3
  // int64 per rank). Without it, ranks that disagree on sizes are a caller bug that Gloo
  // answers with a timeout, a short all-to-all piece, or by terminating the process from its
  // I/O thread (an enforce that no caller can catch).
  bool verify_collectives = false;
};

// INVALID_ARGUMENT naming the field unless 0 <= rank < world_size, timeout > 0 and an address
// is given.
absl::Status ValidateGlooOptions(const GlooOptions& options);

class GlooCommunicator final : public Communicator {
 public:
  // Connects to every other rank through `store` (used only during this call). Fails with
  // DEADLINE_EXCEEDED when a peer does not arrive within the startup timeout.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Connect(const GlooOptions& options,
                                                                   gloo::rendezvous::Store& store);

  // Connect() through a FileStore in `store_dir` (created if missing) under prefix `run_id`.
  // Keys stay in the directory: use a fresh run_id per launch, or ranks read stale addresses.
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> ConnectWithFileStore(
      const GlooOptions& options, const std::string& store_dir, const std::string& run_id);

  ~GlooCommunicator() override;

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  // Any dtype of whole elements, moved as bytes; see the file comment for mismatched counts.
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  absl::Status Barrier() override;
  std::string Describe() const override;

 private:
  GlooCommunicator(const GlooOptions& options, std::shared_ptr<gloo::Context> context);

  // Runs one Gloo call, turning any exception into a Status and breaking the communicator.
  template <typename Fn>
  absl::Status Guarded(const char* collective, Fn&& fn);
  // With options_.verify_collectives: INVALID_ARGUMENT unless every rank makes the same call.
  // For AllToAll, `count` is the element size in bytes and `all_to_all_row` this rank's
  // AllToAllCountsRow, checked to pair up with the others'; empty for other collectives.
  absl::Status VerifySameCall(int collective_id, const char* collective, int64_t count,
                              int64_t root, absl::Span<const int64_t> all_to_all_row = {});

  const GlooOptions options_;
  std::shared_ptr<gloo::Context> context_;  // null when world_size == 1
  std::string broken_reason_;               // empty while healthy
  bool started_ = false;  // a collective has run: later ones get `timeout`, not the startup's
};

}  // namespace tpserve

#endif  // TPSERVE_COMM_GLOO_COMMUNICATOR_H_
