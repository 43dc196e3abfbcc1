// The NCCL unique id that joins the ranks of one GPU group, made by the control plane (the
// coordinator) and sent to every rank in LoadRequest.nccl_unique_id. Plain C++ header, built in
// every configuration: without the CUDA toolkit NewNcclUniqueId() is UNIMPLEMENTED, so code
// above it (coordinator/remote_executor.cc) needs no CUDA conditionals.
//
//   TP_ASSIGN_OR_RETURN(std::string id, NewNcclUniqueId());   // once per group
//   request.set_nccl_unique_id(id);                            // the same bytes to every rank
//
// The id names a TCP address in the calling process, where NCCL's bootstrap root listens (a
// thread NCCL starts here): that process must stay alive until the ranks have initialised, and
// the ranks must reach it (NCCL_SOCKET_IFNAME picks the interface). Thread-safe.
#ifndef TPSERVE_WORKER_COMM_NCCL_UNIQUE_ID_H_
#define TPSERVE_WORKER_COMM_NCCL_UNIQUE_ID_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tpserve {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES

// A fresh id (ncclGetUniqueId) as kNcclUniqueIdBytes bytes. Needs no GPU, only NCCL. The NCCL
// error as a Status (cuda_status.h) on failure; UNIMPLEMENTED in a build without CUDA.
absl::StatusOr<std::string> NewNcclUniqueId();

}  // namespace tpserve

#endif  // TPSERVE_WORKER_COMM_NCCL_UNIQUE_ID_H_
