// The NCCL unique id that joins the ranks of one GPU group. Rank 0, a worker process with
// libnccl and its GPU, makes it (ncclGetUniqueId) and publishes it in the rendezvous store the
// ranks already meet through (the coordinator's, cluster/kv_store.h, under the launch's key
// prefix); every other rank reads it from there. The coordinator needs no NCCL and no GPU.
//
//   TP_ASSIGN_OR_RETURN(std::string id, ShareNcclUniqueId(store, rank, options));
//   // then NcclCommunicator::Create({..., .unique_id = id})
//
// The id names a TCP address in the process that made it, where NCCL's bootstrap root listens
// (a thread NCCL starts there): rank 0, which reaches the other ranks over NCCL's own interface
// (NCCL_SOCKET_IFNAME picks it) and stays alive while they initialise. Plain C++ header, built
// in every configuration: without the CUDA toolkit NewNcclUniqueId() is UNIMPLEMENTED.
// Thread-safe.
#ifndef TPSERVE_COMM_NCCL_UNIQUE_ID_H_
#define TPSERVE_COMM_NCCL_UNIQUE_ID_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"

namespace tpserve {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
// The store key rank 0 publishes the id under (inside the launch's prefix).
inline constexpr char kNcclUniqueIdKey[] = "nccl_unique_id";

// A fresh id (ncclGetUniqueId) as kNcclUniqueIdBytes bytes. Needs no GPU, only NCCL. The NCCL
// error as a Status (cuda_status.h) on failure; UNIMPLEMENTED in a build without CUDA.
absl::StatusOr<std::string> NewNcclUniqueId();

struct ShareNcclUniqueIdOptions {
  int world_size = 1;
  // How long ranks other than 0 wait for rank 0's id (the group's rendezvous timeout).
  absl::Duration timeout = absl::Seconds(30);
  // Names the store's key prefix in errors (the launch's run id); the store adds it itself.
  std::string key_prefix;
  // Rank 0 only: makes the id. Null: NewNcclUniqueId (tests inject one that needs no NCCL).
  std::function<absl::StatusOr<std::string>()> make_id;
};

// Rank 0 makes the group's id and publishes it under kNcclUniqueIdKey in `store`; every other
// rank waits for it there. All ranks return the same kNcclUniqueIdBytes bytes. Errors: rank 0's
// from make_id; UNAVAILABLE when the store fails; on the other ranks DEADLINE_EXCEEDED naming
// the key and the timeout when rank 0 never published it, and INTERNAL when the value is not
// kNcclUniqueIdBytes bytes.
absl::StatusOr<std::string> ShareNcclUniqueId(gloo::rendezvous::Store& store, int rank,
                                              const ShareNcclUniqueIdOptions& options);

}  // namespace tpserve

#endif  // TPSERVE_COMM_NCCL_UNIQUE_ID_H_
