// The coordinator's side of the worker plane (tpserve.worker.v1.ClusterControl): ranks join
// it, saying where their Worker service listens, and meet each other through its key-value
// store. The coordinator waits for all ranks here, then drives them over the Worker service.
//
//   ClusterControlService control(/*world_size=*/3, secret);
//   builder.RegisterService(&control);  ... BuildAndStart ...
//   TP_ASSIGN_OR_RETURN(std::vector<JoinedRank> ranks, control.WaitForRanks(absl::Minutes(2)));
//
// Every call must carry the cluster secret (secret.h); one without it gets UNAUTHENTICATED
// and changes nothing.
// Threading: handlers run on gRPC threads; WaitForRanks from one other thread.
#ifndef TPSERVE_CLUSTER_CONTROL_SERVICE_H_
#define TPSERVE_CLUSTER_CONTROL_SERVICE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cluster/kv_store.h"
#include "proto/worker.grpc.pb.h"

namespace tpserve {

struct JoinedRank {
  int rank = -1;
  std::string worker_address;  // host:port of its Worker service
  std::string hostname;
  std::string boot_id;
};

class ClusterControlService final : public tpserve::worker::v1::ClusterControl::Service {
 public:
  // REQUIRES: world_size >= 1. An empty secret refuses every call.
  ClusterControlService(int world_size, std::string cluster_secret);

  grpc::Status Join(grpc::ServerContext* context, const tpserve::worker::v1::JoinRequest* request,
                    tpserve::worker::v1::JoinResponse* response) override;
  grpc::Status StoreSet(grpc::ServerContext* context,
                        const tpserve::worker::v1::StoreSetRequest* request,
                        tpserve::worker::v1::StoreSetResponse* response) override;
  grpc::Status StoreGet(grpc::ServerContext* context,
                        const tpserve::worker::v1::StoreGetRequest* request,
                        tpserve::worker::v1::StoreGetResponse* response) override;
  grpc::Status StoreWait(grpc::ServerContext* context,
                         const tpserve::worker::v1::StoreWaitRequest* request,
                         tpserve::worker::v1::StoreWaitResponse* response) override;
  grpc::Status Alive(grpc::ServerContext* context, const tpserve::worker::v1::AliveRequest* request,
                     tpserve::worker::v1::AliveResponse* response) override;

  // Blocks until every rank has joined; element r is rank r. Calls on_join (if set) from this
  // thread once per rank as it joins, and keep_waiting (if set) about every 100 ms: its error
  // (e.g. "a spawned rank exited") ends the wait. DEADLINE_EXCEEDED after `timeout` naming the
  // ranks that never joined.
  absl::StatusOr<std::vector<JoinedRank>> WaitForRanks(
      absl::Duration timeout, const std::function<void(const JoinedRank&)>& on_join = nullptr,
      const std::function<absl::Status()>& keep_waiting = nullptr);

  // Rank `rank` is gone: its slot is free for a successor to join (from any address), which
  // WaitForRejoin returns. REQUIRES: 0 <= rank < world_size.
  void Vacate(int rank);
  // Blocks until rank `rank` has joined since its Vacate, calling keep_waiting (if set) about
  // every 100 ms (its error ends the wait); DEADLINE_EXCEEDED naming the rank after `timeout`.
  absl::StatusOr<JoinedRank> WaitForRejoin(int rank, absl::Duration timeout,
                                           const std::function<absl::Status()>& keep_waiting =
                                               nullptr);

  ClusterKvStore& store() { return store_; }
  int world_size() const { return world_size_; }
  // Random per service: tells a rank whether the coordinator it reaches is the one it joined.
  const std::string& launch_id() const { return launch_id_; }

 private:
  const int world_size_;
  const std::string secret_;
  const std::string launch_id_;
  ClusterKvStore store_;
  absl::Mutex mu_;
  std::vector<JoinedRank> joined_ ABSL_GUARDED_BY(mu_);  // rank -1 while not joined
};

}  // namespace tpserve

#endif  // TPSERVE_CLUSTER_CONTROL_SERVICE_H_
