// What slices of the model a rank loads, as the worker protocol carries it: the launcher puts
// every rank's assignment of its sharding plan in the RankLoad (RankLoad.model.assignments,
// sent as LoadRequest.assignments), and each rank checks its own against its own plan
// (worker/rank_load_options.h). Apart from the worker service so that the launcher can make
// assignments without linking a rank.
//
//   load.model.assignments.push_back(ToAssignment(*ShardingPlan::Create(config, f, {r, n})));
//
// Thread-safe: a pure function.
#ifndef TPSERVE_WORKER_SHARD_ASSIGNMENT_H_
#define TPSERVE_WORKER_SHARD_ASSIGNMENT_H_

#include "model/sharding.h"
#include "proto/worker.pb.h"

namespace tpserve {

// The assignment a rank with `plan` holds; the coordinator sends it, the rank checks it.
tpserve::worker::v1::ShardAssignment ToAssignment(const ShardingPlan& plan);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_SHARD_ASSIGNMENT_H_
