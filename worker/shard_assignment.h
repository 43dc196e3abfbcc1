// What slices of the model a rank loads, as the worker protocol carries it: the coordinator
// sends each rank the assignment of its sharding plan (LoadRequest.assignment), and the rank
// checks it against its own plan. Apart from the worker service so that the coordinator can
// make assignments without linking a rank.
//
//   load.mutable_assignment()->CopyFrom(ToAssignment(*ShardingPlan::Create(config, f, {r, n})));
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
