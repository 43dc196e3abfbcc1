// RankLoad to and from the worker protocol's LoadRequest: the one place the description of a
// rank's load changes shape, at the boundary between the coordinator process and a rank process.
// Every rank gets the same description (all ranks' slices included); the request's other fields
// (rank, comm_kind, backend, device_ordinal, rendezvous, step_channel) say where the rank runs
// and how it meets its peers, and are the RemoteExecutor's.
#ifndef TPSERVE_STEP_RANK_LOAD_PROTO_H_
#define TPSERVE_STEP_RANK_LOAD_PROTO_H_

#include "absl/status/statusor.h"
#include "proto/worker.pb.h"
#include "step/rank_load.h"

namespace tpserve {

// Writes `load` into `request`'s load fields (and clears those of a draft when it has none).
void ToLoadRequest(const RankLoad& load, tpserve::worker::v1::LoadRequest* request);
// INVALID_ARGUMENT naming the field for a request no RankLoad could have made: world_size < 1,
// an unknown kv_dtype, assignments that are neither empty nor one per rank. A collective
// timeout of 0 is 10 s.
absl::StatusOr<RankLoad> RankLoadFromRequest(const tpserve::worker::v1::LoadRequest& request);

}  // namespace tpserve

#endif  // TPSERVE_STEP_RANK_LOAD_PROTO_H_
