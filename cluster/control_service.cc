#include "cluster/control_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cluster/secret.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

// Longest a store call may wait (a handler thread is held meanwhile).
constexpr absl::Duration kMaxStoreWait = absl::Minutes(10);

// The earlier of the request's own timeout and the call's deadline.
absl::Time StoreDeadline(const grpc::ServerContext& context, int32_t timeout_ms) {
  const absl::Time now = absl::Now();
  absl::Time deadline = now + std::min(absl::Milliseconds(std::max(timeout_ms, 0)), kMaxStoreWait);
  return std::min(deadline, absl::FromChrono(context.deadline()));
}

}  // namespace

ClusterControlService::ClusterControlService(int world_size, std::string cluster_secret)
    : world_size_(world_size),
      secret_(std::move(cluster_secret)),
      launch_id_(NewClusterSecret().substr(0, 16)),
      joined_(world_size) {}

grpc::Status ClusterControlService::Join(grpc::ServerContext* context, const wpb::JoinRequest* req,
                                         wpb::JoinResponse* response) {
  if (grpc::Status s = CheckClusterSecret(*context, secret_); !s.ok()) return s;
  if (req->rank() < 0 || req->rank() >= world_size_) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("rank = ", req->rank(), " is outside [0, ", world_size_,
                                     "): this cluster has ", world_size_, " rank(s)"));
  }
  if (req->worker_address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker_address is empty");
  }
  absl::MutexLock lock(&mu_);
  JoinedRank& slot = joined_[req->rank()];
  if (slot.rank >= 0 && slot.worker_address != req->worker_address()) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("rank ", req->rank(), " already joined from ",
                                     slot.worker_address, "; ", req->worker_address(),
                                     " cannot join as rank ", req->rank(), " too"));
  }
  slot.rank = req->rank();
  slot.worker_address = req->worker_address();
  slot.hostname = req->hostname();
  slot.boot_id = req->boot_id();
  response->set_world_size(world_size_);
  response->set_launch_id(launch_id_);
  return grpc::Status::OK;
}

grpc::Status ClusterControlService::Alive(grpc::ServerContext* context, const wpb::AliveRequest*,
                                          wpb::AliveResponse* response) {
  if (grpc::Status s = CheckClusterSecret(*context, secret_); !s.ok()) return s;
  response->set_launch_id(launch_id_);
  return grpc::Status::OK;
}

grpc::Status ClusterControlService::StoreSet(grpc::ServerContext* context,
                                             const wpb::StoreSetRequest* req,
                                             wpb::StoreSetResponse*) {
  if (grpc::Status s = CheckClusterSecret(*context, secret_); !s.ok()) return s;
  store_.Set(req->key(), req->value());
  return grpc::Status::OK;
}

grpc::Status ClusterControlService::StoreGet(grpc::ServerContext* context,
                                             const wpb::StoreGetRequest* req,
                                             wpb::StoreGetResponse* response) {
  if (grpc::Status s = CheckClusterSecret(*context, secret_); !s.ok()) return s;
  absl::StatusOr<std::string> value =
      store_.Get(req->key(), StoreDeadline(*context, req->timeout_ms()));
  if (!value.ok()) return ToGrpcStatus(value.status());
  response->set_value(*std::move(value));
  return grpc::Status::OK;
}

grpc::Status ClusterControlService::StoreWait(grpc::ServerContext* context,
                                              const wpb::StoreWaitRequest* req,
                                              wpb::StoreWaitResponse*) {
  if (grpc::Status s = CheckClusterSecret(*context, secret_); !s.ok()) return s;
  const std::vector<std::string> keys(req->keys().begin(), req->keys().end());
  return ToGrpcStatus(store_.Wait(keys, StoreDeadline(*context, req->timeout_ms())));
}

void ClusterControlService::Vacate(int rank) {
  absl::MutexLock lock(&mu_);
  joined_.at(rank) = JoinedRank{};
}

absl::StatusOr<JoinedRank> ClusterControlService::WaitForRejoin(
    int rank, absl::Duration timeout, const std::function<absl::Status()>& keep_waiting) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (joined_.at(rank).rank >= 0) return joined_[rank];
    }
    if (keep_waiting) TP_RETURN_IF_ERROR(keep_waiting());
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no replacement for rank ", rank, " joined within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(std::min(absl::Milliseconds(100), deadline - absl::Now()));
  }
}

absl::StatusOr<std::vector<JoinedRank>> ClusterControlService::WaitForRanks(
    absl::Duration timeout, const std::function<void(const JoinedRank&)>& on_join,
    const std::function<absl::Status()>& keep_waiting) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<bool> announced(world_size_, false);
  while (true) {
    std::vector<JoinedRank> snapshot;
    {
      absl::MutexLock lock(&mu_);
      snapshot = joined_;
    }
    std::vector<int> missing;
    for (int r = 0; r < world_size_; ++r) {
      if (snapshot[r].rank < 0) {
        missing.push_back(r);
      } else if (!announced[r]) {
        announced[r] = true;
        if (on_join) on_join(snapshot[r]);
      }
    }
    if (missing.empty()) return snapshot;
    if (keep_waiting) {
      absl::Status s = keep_waiting();
      if (!s.ok()) return s;
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          missing.size() == 1 ? "rank " : "ranks ", absl::StrJoin(missing, ", "), " of ",
          world_size_, " never joined (waited ", absl::FormatDuration(timeout), ")"));
    }
    absl::SleepFor(std::min(absl::Milliseconds(100), deadline - absl::Now()));
  }
}

}  // namespace tpserve
