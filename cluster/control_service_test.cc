// The worker plane's coordinator side, driven over loopback gRPC by the rank's client: joins
// (duplicates, bad ranks), the join timeout naming the ranks that never came, Gloo meeting
// through the coordinator's store, and UNAUTHENTICATED for every method called without the
// secret or with another, with nothing changed.
#include "cluster/control_service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "cluster/control_client.h"
#include "cluster/secret.h"
#include "comm/gloo_communicator.h"
#include "gloo/common/error.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

class ClusterControlTest : public ::testing::Test {
 protected:
  void Start(int world_size) {
    service_ = std::make_unique<ClusterControlService>(world_size, secret_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  const std::string secret_ = NewClusterSecret();
  std::unique_ptr<ClusterControlService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ClusterControlTest, JoinTimeoutNamesTheRanksThatNeverJoined) {
  Start(3);
  ClusterControlClient client(address_, secret_);
  ASSERT_EQ(*client.Join(1, "10.0.0.2:4000", absl::Seconds(5)), 3);
  EXPECT_EQ(client.launch_id(), service_->launch_id());
  EXPECT_EQ(*client.Alive(absl::Seconds(5)), service_->launch_id());
  int announced = 0;
  absl::StatusOr<std::vector<JoinedRank>> ranks = service_->WaitForRanks(
      absl::Milliseconds(200), [&](const JoinedRank& r) {
        EXPECT_EQ(r.rank, 1);
        ++announced;
      });
  EXPECT_EQ(ranks.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(ranks.status().message().find("ranks 0, 2 of 3 never joined (waited 200ms)"),
            std::string::npos)
      << ranks.status();
  EXPECT_EQ(announced, 1);
}

TEST_F(ClusterControlTest, EveryRankJoinsFromItsOwnAddress) {
  Start(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      ClusterControlClient client(address_, secret_);
      absl::StatusOr<int> world =
          client.Join(r, "10.0.0." + std::to_string(10 + r) + ":4000", absl::Seconds(5));
      EXPECT_TRUE(world.ok()) << world.status();
    });
  }
  absl::StatusOr<std::vector<JoinedRank>> joined = service_->WaitForRanks(absl::Seconds(10));
  for (std::thread& t : ranks) t.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ((*joined)[r].rank, r);
    EXPECT_EQ((*joined)[r].worker_address, "10.0.0." + std::to_string(10 + r) + ":4000");
    EXPECT_FALSE((*joined)[r].hostname.empty());
    EXPECT_FALSE((*joined)[r].boot_id.empty());
  }
  ClusterControlClient again(address_, secret_);
  EXPECT_TRUE(again.Join(1, "10.0.0.11:4000", absl::Seconds(5)).ok());  // a retry
  absl::StatusOr<int> other = again.Join(1, "10.0.0.99:4000", absl::Seconds(5));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(other.status().message().find("rank 1 already joined from 10.0.0.11:4000"),
            std::string::npos)
      << other.status();
  EXPECT_EQ(again.Join(3, "10.0.0.99:4000", absl::Seconds(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClusterControlTest, KeepWaitingErrorEndsTheWait) {
  Start(2);
  absl::StatusOr<std::vector<JoinedRank>> joined = service_->WaitForRanks(
      absl::Seconds(30), nullptr, [] { return absl::UnavailableError("rank 1 exited"); });
  EXPECT_EQ(joined.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(joined.status().message(), "rank 1 exited");
}

// A rank can tell its coordinator from another launch at the same address.
TEST_F(ClusterControlTest, EveryLaunchHasItsOwnId) {
  Start(1);
  ClusterControlService other(1, secret_);
  EXPECT_EQ(service_->launch_id().size(), 16u);
  EXPECT_NE(service_->launch_id(), other.launch_id());
  server_->Shutdown();
  server_ = nullptr;
  ClusterControlClient client(address_, secret_);
  EXPECT_FALSE(client.Alive(absl::Milliseconds(300)).ok());
}

// Two Gloo ranks on loopback meet through the coordinator's store and all-reduce.
TEST_F(ClusterControlTest, GlooRanksMeetThroughTheCoordinatorStore) {
  Start(2);
  std::vector<absl::Status> results(2);
  std::vector<float> sums(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      ClusterControlClient client(address_, secret_);
      GlooOptions options;
      options.rank = r;
      options.world_size = 2;
      options.timeout = absl::Seconds(10);
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm =
          GlooCommunicator::Connect(options, client.store());
      if (!comm.ok()) {
        results[r] = comm.status();
        return;
      }
      std::vector<float> data = {static_cast<float>(r + 1)};
      results[r] = (*comm)->AllReduceSum(absl::MakeSpan(data));
      sums[r] = data[0];
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(results[r].ok()) << results[r];
    EXPECT_EQ(sums[r], 3.0f);
  }
  EXPECT_GT(service_->store().size(), 0u);
}

TEST_F(ClusterControlTest, StoreWaitTimesOutAsGlooExpects) {
  Start(1);
  ClusterControlClient client(address_, secret_);
  client.store().set("here", {'x'});
  EXPECT_EQ(client.store().get("here"), std::vector<char>({'x'}));
  try {
    client.store().wait({"here", "missing"}, std::chrono::milliseconds(100));
    ADD_FAILURE() << "wait for a missing key returned";
  } catch (const gloo::IoException& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("timeout"), std::string::npos) << what;
    EXPECT_NE(what.find("[missing]"), std::string::npos) << what;
  }
}

// A plain client (no secret) and one with another cluster's secret get UNAUTHENTICATED from
// every method; no rank joined and the store holds nothing.
TEST_F(ClusterControlTest, EveryMethodRefusesAMissingOrWrongSecret) {
  Start(2);
  auto stub = wpb::ClusterControl::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  for (const std::string& secret : {std::string(), NewClusterSecret()}) {
    auto context = [&] {
      auto ctx = std::make_unique<grpc::ClientContext>();
      if (!secret.empty()) AttachClusterSecret(ctx.get(), secret);
      return ctx;
    };
    wpb::JoinRequest join;
    join.set_rank(0);
    join.set_worker_address("10.0.0.66:4000");
    wpb::JoinResponse join_resp;
    EXPECT_EQ(stub->Join(context().get(), join, &join_resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    wpb::StoreSetRequest set;
    set.set_key("k");
    set.set_value("v");
    wpb::StoreSetResponse set_resp;
    EXPECT_EQ(stub->StoreSet(context().get(), set, &set_resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    wpb::StoreGetRequest get;
    get.set_key("k");
    wpb::StoreGetResponse get_resp;
    EXPECT_EQ(stub->StoreGet(context().get(), get, &get_resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    wpb::StoreWaitRequest wait;
    wait.add_keys("k");
    wpb::StoreWaitResponse wait_resp;
    EXPECT_EQ(stub->StoreWait(context().get(), wait, &wait_resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    wpb::AliveResponse alive;
    EXPECT_EQ(stub->Alive(context().get(), wpb::AliveRequest(), &alive).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_TRUE(alive.launch_id().empty());
  }
  ClusterControlClient wrong(address_, NewClusterSecret());
  EXPECT_EQ(wrong.Join(0, "10.0.0.66:4000", absl::Seconds(5)).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(service_->store().size(), 0u);
  absl::StatusOr<std::vector<JoinedRank>> joined = service_->WaitForRanks(absl::ZeroDuration());
  EXPECT_NE(joined.status().message().find("ranks 0, 1 of 2 never joined"), std::string::npos)
      << joined.status();
}


// A rank gone: its slot is vacated and a successor joins it from another address; a slot not
// filled in time names the rank.
TEST_F(ClusterControlTest, AVacatedRankIsJoinedByItsSuccessor) {
  Start(2);
  ClusterControlClient client(address_, secret_);
  ASSERT_TRUE(client.Join(0, "10.0.0.10:4000", absl::Seconds(5)).ok());
  ASSERT_TRUE(client.Join(1, "10.0.0.11:4000", absl::Seconds(5)).ok());
  service_->Vacate(1);
  absl::StatusOr<JoinedRank> none = service_->WaitForRejoin(1, absl::Milliseconds(200));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(none.status().message(), "no replacement for rank 1 joined within 200ms");
  std::thread successor([&] {
    ClusterControlClient c(address_, secret_);
    EXPECT_TRUE(c.Join(1, "10.0.0.99:4000", absl::Seconds(5)).ok());
  });
  absl::StatusOr<JoinedRank> joined = service_->WaitForRejoin(1, absl::Seconds(10));
  successor.join();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->worker_address, "10.0.0.99:4000");
  EXPECT_EQ(service_->WaitForRejoin(1, absl::Seconds(1), [] {
    return absl::OkStatus();
  })->worker_address, "10.0.0.99:4000");
  service_->Vacate(0);
  EXPECT_EQ(service_->WaitForRejoin(0, absl::Seconds(10), [] {
    return absl::UnavailableError("its successor exited");
  }).status().message(), "its successor exited");
}

}  // namespace
}  // namespace tpserve
