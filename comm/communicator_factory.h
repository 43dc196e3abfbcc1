// Builds the communicator a rank process was configured for, so code above it (the step
// runner, the parallel layers) never names an implementation.
//
//   CommunicatorOptions options{.kind = CommunicatorKind::kGloo, .rank = 1, .world_size = 2,
//                               .store_dir = "/tmp/tp_store", .run_id = "run-42"};
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, MakeCommunicator(options));
//
// MakeCommunicator blocks until all ranks have connected (gloo, shm, auto, nccl) or `timeout`
// passes. They meet through a rendezvous store (gloo_store or a FileStore in store_dir, keys
// prefixed by run_id): Gloo's addresses, shm's segment name, auto's host identities, and for
// nccl the group's unique id, which rank 0 makes and publishes there (nccl_unique_id.h).
// kAuto: every rank publishes its host identity (hostname and kernel boot id) in the rendezvous
// store Gloo uses and reads everyone's; all ranks see the same identities, so all choose the
// same: shm when every rank is on one host, gloo otherwise. Describe() then says which ran,
// e.g. "shm rank 1/3 (same host)" or "gloo rank 1/3 via 10.0.0.2".
// Threading: MakeCommunicator may be called from several threads at once (one per rank).
#ifndef TPSERVE_COMM_COMMUNICATOR_FACTORY_H_
#define TPSERVE_COMM_COMMUNICATOR_FACTORY_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/host_identity.h"  // IWYU pragma: export (LocalHostIdentity)
#include "comm/communicator.h"
#include "comm/in_process_communicator.h"

namespace gloo::rendezvous {
class Store;
}  // namespace gloo::rendezvous

namespace tpserve {

enum class CommunicatorKind { kSingleRank, kInProcess, kGloo, kShm, kAuto, kNccl };

// "single", "in_process", "gloo", "shm", "auto", "nccl" (the names used in flags and configs).
absl::StatusOr<CommunicatorKind> ParseCommunicatorKind(absl::string_view name);
const char* CommunicatorKindName(CommunicatorKind kind);
// True for the kinds whose collectives read and write host memory (all but kNccl): they serve
// CPU backends only.
bool CommunicatorUsesHostMemory(CommunicatorKind kind);

struct CommunicatorOptions {
  CommunicatorKind kind = CommunicatorKind::kSingleRank;
  int rank = 0;
  int world_size = 1;
  // Each collective once the group has run one (a dead or stuck peer surfaces this fast).
  absl::Duration timeout = absl::Seconds(30);
  // The connect, the rendezvous and the first collective (a cold group: ranks still arriving,
  // NCCL setting up its connections); below `timeout` (0 included): `timeout`.
  absl::Duration startup_timeout = absl::ZeroDuration();

  // kInProcess: the group every rank's communicator joins (same world_size).
  std::shared_ptr<InProcessGroup> in_process_group;

  // kGloo, kShm, kAuto, kNccl: how to meet. Either `gloo_store` (e.g. a KvGlooStore; must
  // outlive the call) or a FileStore directory `store_dir`; `run_id` prefixes the keys. kGloo:
  // where to listen.
  std::string gloo_hostname = "127.0.0.1";
  std::string gloo_iface;
  gloo::rendezvous::Store* gloo_store = nullptr;
  std::string store_dir;
  std::string run_id;
  bool verify_collectives = false;  // see GlooOptions::verify_collectives

  // kShm (and kAuto choosing it): capacity of each rank's slot, see ShmOptions::max_bytes.
  size_t shm_max_bytes = size_t{1} << 20;
  // kAuto: this rank's host identity; empty: LocalHostIdentity(). Set it to tell apart
  // containers that share a kernel but not /dev/shm.
  std::string host_identity;

  // kNccl: this rank's GPU. The group's id comes through the store (rank 0 makes it).
  int device_ordinal = 0;
  // kNccl: the cudaStream_t collectives are enqueued on, in order with the compute ops: the
  // rank backend's stream() (RankRuntime passes it). Null: NCCL makes a stream of its own.
  void* cuda_stream = nullptr;
};

// INVALID_ARGUMENT naming the field for options that cannot work; errors of the chosen
// implementation (connect timeouts, CUDA/NCCL failures) otherwise.
absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(const CommunicatorOptions& options);

}  // namespace tpserve

#endif  // TPSERVE_COMM_COMMUNICATOR_FACTORY_H_
