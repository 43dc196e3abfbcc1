// The launcher's end of the worker plane: a private run directory, the cluster secret, and
// the ClusterControl server (cluster/control_service.h) that every rank joins, whether the
// launcher spawned it on this host or someone started it elsewhere.
//
//   TP_ASSIGN_OR_RETURN(auto plane, StartWorkerPlane({.ranks = 3, .spawn_ranks = true}));
//   ... spawn `worker --coordinator=<plane->local_address> --rank=r
//              --cluster_secret_file=<plane->secret_file>` ...
//   TP_ASSIGN_OR_RETURN(auto joined, plane->control->WaitForRanks(absl::Minutes(5)));
//
// Threading: one thread builds and destroys it; the server answers on gRPC threads.
#ifndef TPSERVE_DEPLOY_WORKER_PLANE_H_
#define TPSERVE_DEPLOY_WORKER_PLANE_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "cluster/control_service.h"

namespace tpserve {

struct WorkerPlaneOptions {
  int ranks = 1;
  // True: the launcher starts the ranks on this host; false: they join from anywhere.
  bool spawn_ranks = true;
  // HOST:PORT the control plane binds; "" = 127.0.0.1:0 (only with spawn_ranks).
  std::string worker_listen;
  // The secret's file; "" = make a fresh secret (only with spawn_ranks).
  std::string cluster_secret_file;
};

struct WorkerPlane {
  // Removes run_dir and everything in it; stops the server.
  ~WorkerPlane();

  std::string run_dir;      // mkdtemp(3): mode 0700, this launch only
  std::string secret;       // 64 hex characters, or the file's
  std::string secret_file;  // what ranks read: the given file, or run_dir/cluster_secret (0600)
  std::unique_ptr<ClusterControlService> control;
  std::unique_ptr<grpc::Server> server;
  std::string listen_address;  // the bound HOST:PORT
  std::string local_address;   // what a rank on this host dials (0.0.0.0 -> 127.0.0.1)
};

// INVALID_ARGUMENT naming the flag for options that cannot work (no --worker_listen or no
// --cluster_secret_file without spawn_ranks; a short secret); UNAVAILABLE when the address
// cannot be bound.
absl::StatusOr<std::unique_ptr<WorkerPlane>> StartWorkerPlane(const WorkerPlaneOptions& options);

// True when every rank reported this host's name and boot id: they share its /dev/shm, so
// steps can go through the shared-memory step channel.
bool AllOnThisHost(const std::vector<JoinedRank>& ranks);

// The GPU each rank takes on its host (ranks[r] is rank r): ranks that report one host name and
// boot id are numbered 0, 1, ... in rank order there. A pod given one GPU sees it as device 0;
// a host of 8 GPUs running a pipeline stage's 8 ranks (ranks 8-15 of TP 8 x PP 2) gives them
// 0-7, not 8-15.
std::vector<int32_t> DeviceOrdinalsByHost(const std::vector<JoinedRank>& ranks);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_WORKER_PLANE_H_
