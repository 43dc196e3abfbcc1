#include "cluster/control_client.h"

#include <chrono>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cluster/secret.h"
#include "base/grpc_status.h"
#include "gloo/common/error.h"
#include "base/host_identity.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

// Gloo's "no timeout" (zero) still ends: a rendezvous must never wait forever.
constexpr std::chrono::milliseconds kDefaultStoreWait(30000);
// Extra time the RPC gets beyond the store's own wait, so the server answers first.
constexpr absl::Duration kRpcSlack = absl::Seconds(5);

class CoordinatorStore final : public gloo::rendezvous::Store {
 public:
  CoordinatorStore(std::shared_ptr<wpb::ClusterControl::Stub> stub, std::string secret,
                   std::string address)
      : stub_(std::move(stub)), secret_(std::move(secret)), address_(std::move(address)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    wpb::StoreSetRequest req;
    req.set_key(key);
    req.set_value(data.data(), data.size());
    wpb::StoreSetResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, kDefaultStoreWait);
    Check(stub_->StoreSet(&ctx, req, &resp), "set", key);
  }

  std::vector<char> get(const std::string& key) override {
    wpb::StoreGetRequest req;
    req.set_key(key);
    req.set_timeout_ms(static_cast<int32_t>(kDefaultStoreWait.count()));
    wpb::StoreGetResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, kDefaultStoreWait);
    Check(stub_->StoreGet(&ctx, req, &resp), "get", key);
    return std::vector<char>(resp.value().begin(), resp.value().end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultStoreWait); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const std::chrono::milliseconds limit = timeout.count() > 0 ? timeout : kDefaultStoreWait;
    wpb::StoreWaitRequest req;
    for (const std::string& key : keys) req.add_keys(key);
    req.set_timeout_ms(static_cast<int32_t>(limit.count()));
    wpb::StoreWaitResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx, limit);
    Check(stub_->StoreWait(&ctx, req, &resp), "wait for", keys.empty() ? "" : keys[0]);
  }

 private:
  void Prepare(grpc::ClientContext* ctx, std::chrono::milliseconds wait) const {
    AttachClusterSecret(ctx, secret_);
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::FromChrono(wait) + kRpcSlack));
  }
  // Gloo's own messages for a missing key say "timeout", which GlooCommunicator maps to
  // DEADLINE_EXCEEDED; everything else becomes UNAVAILABLE there.
  void Check(const grpc::Status& s, const char* what, const std::string& key) const {
    if (s.ok()) return;
    const absl::Status status = FromGrpcStatus(s);
    throw gloo::IoException(absl::StrCat(
        "rendezvous ", what, " key '", key, "' at the coordinator ", address_, ": ",
        absl::IsDeadlineExceeded(status) ? "timeout: " : "", status.ToString()));
  }

  std::shared_ptr<wpb::ClusterControl::Stub> stub_;
  const std::string secret_;
  const std::string address_;
};

}  // namespace

ClusterControlClient::ClusterControlClient(const std::string& coordinator_address,
                                           std::string cluster_secret)
    : address_(coordinator_address),
      secret_(std::move(cluster_secret)),
      stub_(wpb::ClusterControl::NewStub(
          grpc::CreateChannel(coordinator_address, grpc::InsecureChannelCredentials()))),
      store_(std::make_unique<CoordinatorStore>(stub_, secret_, address_)) {}

ClusterControlClient::~ClusterControlClient() = default;

absl::StatusOr<int> ClusterControlClient::Join(int rank, const std::string& worker_address,
                                               absl::Duration timeout) {
  // LocalHostIdentity is "<hostname>/<boot id>", the identity kAuto compares.
  const std::vector<std::string> identity = absl::StrSplit(LocalHostIdentity(), '/');
  wpb::JoinRequest req;
  req.set_rank(rank);
  req.set_worker_address(worker_address);
  req.set_hostname(identity[0]);
  req.set_boot_id(identity.size() > 1 ? identity[1] : "");
  wpb::JoinResponse resp;
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, secret_);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(true);  // the coordinator may start after this rank
  const grpc::Status s = stub_->Join(&ctx, req, &resp);
  if (s.ok()) {
    launch_id_ = resp.launch_id();
    return resp.world_size();
  }
  const absl::Status status = FromGrpcStatus(s);
  if (absl::IsDeadlineExceeded(status)) {
    return absl::DeadlineExceededError(absl::StrCat("rank ", rank, " could not join the coordinator at ",
                                                    address_, " within ",
                                                    absl::FormatDuration(timeout), ": ",
                                                    status.message()));
  }
  return absl::Status(status.code(), absl::StrCat("the coordinator at ", address_, " refused rank ",
                                                  rank, ": ", status.message()));
}

absl::StatusOr<std::string> ClusterControlClient::Alive(absl::Duration timeout) {
  wpb::AliveResponse resp;
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, secret_);
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  const grpc::Status s = stub_->Alive(&ctx, wpb::AliveRequest(), &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp.launch_id();
}

}  // namespace tpserve
