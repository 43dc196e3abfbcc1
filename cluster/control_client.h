// A rank's side of the worker plane: joins the coordinator's ClusterControl service and gives
// Gloo (and the shm communicator, kAuto's host check and NCCL's unique id) a
// gloo::rendezvous::Store backed by the coordinator's key-value store, so ranks on any hosts
// can meet.
//
//   ClusterControlClient client("10.0.0.1:7000", secret);
//   TP_RETURN_IF_ERROR(client.Join(rank, "10.0.0.2:41234", absl::Minutes(5)));
//   options.comm.gloo_store = &client.store();
//
// Every call carries the cluster secret. The store reports failures as gloo::IoException,
// as Gloo's stores do (only Gloo and the communicators call it; they turn it into Status).
// Threading: thread-safe (one gRPC channel); store() may be used from one thread at a time.
#ifndef TPSERVE_CLUSTER_CONTROL_CLIENT_H_
#define TPSERVE_CLUSTER_CONTROL_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "proto/worker.grpc.pb.h"

namespace tpserve {

class ClusterControlClient {
 public:
  // Nothing is sent until Join or the store is used.
  ClusterControlClient(const std::string& coordinator_address, std::string cluster_secret);
  ~ClusterControlClient();

  // Joins as `rank` with this host's name and boot id, retrying while the coordinator is not
  // up yet, for up to `timeout`. Returns the cluster's world size. UNAUTHENTICATED for a wrong
  // secret, INVALID_ARGUMENT / ALREADY_EXISTS as the coordinator says, DEADLINE_EXCEEDED
  // naming the coordinator when it never answered.
  absl::StatusOr<int> Join(int rank, const std::string& worker_address, absl::Duration timeout);
  // The launch id of the coordinator now answering (compare with launch_id()); the call's
  // error when none answers within `timeout`.
  absl::StatusOr<std::string> Alive(absl::Duration timeout);
  // The launch id Join got; empty before.
  const std::string& launch_id() const { return launch_id_; }

  gloo::rendezvous::Store& store() { return *store_; }
  const std::string& coordinator_address() const { return address_; }

 private:
  const std::string address_;
  const std::string secret_;
  std::shared_ptr<tpserve::worker::v1::ClusterControl::Stub> stub_;
  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::string launch_id_;
};

}  // namespace tpserve

#endif  // TPSERVE_CLUSTER_CONTROL_CLIENT_H_
