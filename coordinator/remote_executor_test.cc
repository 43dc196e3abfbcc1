// What RemoteExecutor::Connect sends each rank in its LoadRequest, seen by fake workers over
// loopback gRPC: the communicator kind, the backend and GPU of each rank (for NCCL with no id:
// rank 0 makes it, so the coordinator needs no NCCL), and the step channel offered to local
// ranks; the cluster secret on every call; and a failed step naming the rank that stopped
// answering.
#include "coordinator/remote_executor.h"

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cluster/secret.h"
#include "step/rank_load_proto.h"
#include "step/step_sampling.h"
#include "step/step_sampling_proto.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

// Records the LoadRequest and the secret of every call, and answers "ready" at once. A
// `failing` worker fails its steps as a rank whose collective timed out; a `silent` one holds
// every step and heartbeat until the caller gives up (a rank behind a cut link).
class FakeWorker final : public wpb::Worker::Service {
 public:
  grpc::Status Load(grpc::ServerContext* ctx, const wpb::LoadRequest* request,
                    grpc::ServerWriter<wpb::LoadProgress>* writer) override {
    {
      absl::MutexLock lock(&mu_);
      request_ = *request;
    }
    Record("Load", ctx);
    if (silent) return HoldUntilCancelled(ctx);
    wpb::LoadProgress ready;
    ready.set_rank(request->rank());
    ready.set_ready(true);
    writer->Write(ready);
    return grpc::Status::OK;
  }
  // num_logits rows of 4 logits per chunk, every value the step id but row i's largest at
  // (step id + i) % 4 (a worker that never opens the step channel). Held (hold_logits) for
  // the sample request that follows, which is answered greedily from them.
  grpc::Status Step(grpc::ServerContext* ctx, const wpb::StepRequest* request,
                    wpb::StepResponse* response) override {
    Record(request->has_sample() ? "Sample" : "Step", ctx);
    if (silent) return HoldUntilCancelled(ctx);
    if (failing) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          "AllReduceSum on gloo rank 0/2: Timed out waiting for a peer");
    }
    absl::MutexLock lock(&mu_);
    if (request->has_sample()) {
      absl::StatusOr<StepSampling> sampling = FromProto(request->sample());
      if (!sampling.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad sample");
      absl::StatusOr<std::vector<SequenceSamples>> out = SampleStep(held_, 4, *sampling);
      if (!out.ok()) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            std::string(out.status().message()));
      }
      *response->mutable_samples() = ToProto(*out);
      return grpc::Status::OK;
    }
    int64_t rows = 0;
    for (const wpb::SequenceChunk& c : request->chunks()) rows += c.num_logits();
    const int64_t id = request->step_id();
    std::vector<float> logits(rows * 4, static_cast<float>(id));
    for (int64_t i = 0; i < rows; ++i) logits[i * 4 + (id + i) % 4] += 1.0f;
    if (request->hold_logits()) {
      held_ = std::move(logits);
    } else {
      response->set_logits(logits.data(), logits.size() * sizeof(float));
    }
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const wpb::HeartbeatRequest*,
                         wpb::HeartbeatResponse* response) override {
    Record("Heartbeat", ctx);
    if (silent) return HoldUntilCancelled(ctx);
    response->set_ready(true);
    return grpc::Status::OK;
  }
  grpc::Status Shutdown(grpc::ServerContext* ctx, const wpb::ShutdownRequest*,
                        wpb::ShutdownResponse*) override {
    Record("Shutdown", ctx);
    return grpc::Status::OK;
  }
  grpc::Status Regroup(grpc::ServerContext* ctx, const wpb::RegroupRequest* request,
                       wpb::RegroupResponse*) override {
    Record("Regroup", ctx);
    absl::MutexLock lock(&mu_);
    regrouped_under_ = request->rendezvous_prefix();
    return grpc::Status::OK;
  }
  std::string regrouped_under() {
    absl::MutexLock lock(&mu_);
    return regrouped_under_;
  }
  wpb::LoadRequest request() {
    absl::MutexLock lock(&mu_);
    return request_;
  }
  // "Method=secret" per call, in order.
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  std::atomic<bool> failing{false};
  std::atomic<bool> silent{false};

 private:
  void Record(const char* method, grpc::ServerContext* ctx) {
    const auto it = ctx->client_metadata().find(kClusterSecretMetadataKey);
    const std::string secret =
        it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::string(method) + "=" + secret);
  }
  static grpc::Status HoldUntilCancelled(grpc::ServerContext* ctx) {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!ctx->IsCancelled() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
    return grpc::Status(grpc::StatusCode::CANCELLED, "held");
  }

  absl::Mutex mu_;
  std::vector<float> held_ ABSL_GUARDED_BY(mu_);
  wpb::LoadRequest request_;
  std::vector<std::string> calls_;
  std::string regrouped_under_;
};

// A step of one sequence's first token.
StepBatch OneToken() {
  StepBatch batch;
  batch.Add(/*seq_id=*/1, /*start_position=*/0, std::vector<int32_t>{1}, {0});
  return batch;
}

class RemoteExecutorTest : public ::testing::Test {
 protected:
  void StartRanks(int world) {
    load_.world_size = world;
    for (int r = 0; r < world; ++r) {
      addresses_.push_back(StartWorker());
      load_.model.assignments.emplace_back();
    }
  }
  // A step that must fail UNAVAILABLE well within the step timeout: its message.
  static std::string FailedStepMessage(RemoteExecutor& exec) {
    const absl::Time start = absl::Now();
    absl::StatusOr<StepResult> step = exec.Execute(OneToken());
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));
    EXPECT_EQ(step.status().code(), absl::StatusCode::kUnavailable);
    return std::string(step.status().message());
  }
  // One more fake worker (workers_.back()); its address.
  std::string StartWorker() {
    workers_.push_back(std::make_unique<FakeWorker>());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(workers_.back().get());
    servers_.push_back(builder.BuildAndStart());
    EXPECT_NE(servers_.back(), nullptr);
    return "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    for (auto& s : servers_) s->Shutdown();
  }

  RankLoad load_;
  RemoteExecutorOptions options_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

// CPU ranks default to "auto" (shared memory on one host, else Gloo); the kind is passed on.
TEST_F(RemoteExecutorTest, CpuRanksGetTheirKindAndTheCpuBackend) {
  StartRanks(2);
  EXPECT_EQ(options_.comm_kind, "auto");
  options_.comm_kind = "gloo";
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int r = 0; r < 2; ++r) {
    const wpb::LoadRequest req = workers_[r]->request();
    EXPECT_EQ(req.rank(), r);
    EXPECT_EQ(req.comm_kind(), "gloo");
    EXPECT_EQ(req.deterministic_tp(), false);
    EXPECT_EQ(req.backend(), "cpu");
  }
}

// Every rank is sent the same RankLoad, whole (all ranks' slices and the draft's), beside its
// own rank and placement.
TEST_F(RemoteExecutorTest, EveryRankIsSentTheWholeLoad) {
  StartRanks(2);
  for (int r = 0; r < 2; ++r) load_.model.assignments[r].set_first_head(3 * r);
  load_.model.path = "/models/target.gguf";
  load_.model.weights = "fp8";
  load_.draft = ModelLoad{.path = "/models/draft.gguf", .max_logit_rows = 4,
                          .assignments = load_.model.assignments};
  load_.num_kv_blocks = 77;
  load_.kv_dtype = DType::kBF16;
  load_.deterministic_tp = true;
  load_.collective_timeout = absl::Milliseconds(1500);
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int r = 0; r < 2; ++r) {
    const wpb::LoadRequest req = workers_[r]->request();
    EXPECT_EQ(req.rank(), r);
    absl::StatusOr<RankLoad> got = RankLoadFromRequest(req);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == load_) << "rank " << r << ": " << req.ShortDebugString();
  }
}

// keep_loading (the launcher's SIGTERM) stops a load that a rank does not finish: every call
// is cancelled and its status returned at once, not at load_timeout.
TEST_F(RemoteExecutorTest, KeepLoadingStopsALoadThatHangs) {
  StartRanks(2);
  workers_[1]->silent = true;
  std::atomic<int> asked{0};
  options_.keep_loading = [&asked] {
    return ++asked < 3 ? absl::OkStatus() : absl::CancelledError("terminated while loading");
  };
  const absl::Time start = absl::Now();
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(exec.status().message(), "terminated while loading");
  EXPECT_EQ(asked.load(), 3);
  // Without it the same load waits for the rank (here until its own deadline).
  options_.keep_loading = nullptr;
  options_.load_timeout = absl::Milliseconds(600);
  exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(exec.status().message(), "rank 1 (")) << exec.status();
  EXPECT_TRUE(absl::StrContains(exec.status().message(), "Deadline Exceeded")) << exec.status();
}

TEST_F(RemoteExecutorTest, RefusesALoadForAnotherWorldSize) {
  StartRanks(2);
  load_.world_size = 3;
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(exec.status().message(),
            "the load is for 3 ranks x 1 pipeline stage(s), not the 2 addresses");
  load_.world_size = 1;
  load_.pipeline_stages = 3;
  exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  EXPECT_EQ(exec.status().message(),
            "the load is for 1 ranks x 3 pipeline stage(s), not the 2 addresses");
}

// With step_channel the ranks are offered a shared-memory channel; ranks that do not open it
// (these fakes) are stepped over gRPC, and the channel's name is gone from /dev/shm.
TEST_F(RemoteExecutorTest, RanksThatDoNotOpenTheStepChannelAreSteppedOverGrpc) {
  StartRanks(2);
  options_.step_channel = true;
  load_.vocab_size = 4;
  load_.model.max_logit_rows = 2;
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const std::string name = workers_[0]->request().step_channel();
  ASSERT_FALSE(name.empty());
  EXPECT_EQ(workers_[1]->request().step_channel(), name);
  EXPECT_FALSE(std::filesystem::exists("/dev/shm" + name)) << name;
  StepBatch batch = OneToken();
  batch.Add(/*seq_id=*/2, /*start_position=*/0, std::vector<int32_t>{1}, {1});
  absl::StatusOr<StepResult> step = (*exec)->Execute(batch);
  ASSERT_TRUE(step.ok()) << step.status();
  // The logits stayed on rank 0; sampling them there sends back the tokens alone.
  EXPECT_TRUE(step->logits_held);
  EXPECT_TRUE(step->logits.empty());
  StepSampling sampling;
  for (int64_t seq : {1, 2}) {
    SequenceSampling& s = sampling.sequences.emplace_back();
    s.seq_id = seq;
    s.num_rows = 1;
    s.samples = true;
    s.params.temperature = 0.0f;
  }
  absl::StatusOr<std::vector<SequenceSamples>> samples = (*exec)->Sample(*step, sampling);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 2u);
  EXPECT_EQ((*samples)[0].sampled.at(0).id, 1);  // step 1: row 0's largest at 1, row 1's at 2
  EXPECT_EQ((*samples)[1].sampled.at(0).id, 2);
  // Only the sampling rank was asked; asking again (no step's logits held) is refused.
  EXPECT_EQ(workers_[0]->calls().back(), "Sample=");
  EXPECT_EQ(workers_[1]->calls().back(), "Step=");
  EXPECT_EQ((*exec)->Sample(*step, sampling).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A draft model's step holds its logits too, and its proposals are drawn on rank 0 alone.
  std::unique_ptr<ModelExecutor> draft = (*exec)->DraftExecutor();
  absl::StatusOr<StepResult> drafted = draft->Execute(batch);
  ASSERT_TRUE(drafted.ok()) << drafted.status();
  EXPECT_TRUE(drafted->logits_held);
  EXPECT_TRUE(drafted->logits.empty());
  absl::StatusOr<std::vector<SequenceSamples>> proposals = draft->Sample(*drafted, sampling);
  ASSERT_TRUE(proposals.ok()) << proposals.status();
  ASSERT_EQ(proposals->size(), 2u);
  EXPECT_EQ(workers_[0]->calls().back(), "Sample=");
  EXPECT_EQ(workers_[1]->calls().back(), "Step=");
}

// The coordinator makes no NCCL id (it used to, and failed with UNIMPLEMENTED in a build
// without NCCL): GPU ranks are loaded the same in every build.
TEST_F(RemoteExecutorTest, NcclRanksGetTheirGpusAndNoIdFromTheCoordinator) {
  StartRanks(2);
  options_.comm_kind = "nccl";
  options_.backend = "cuda";
  options_.device_ordinals = {3, 1};
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int r = 0; r < 2; ++r) {
    const wpb::LoadRequest req = workers_[r]->request();
    EXPECT_EQ(req.comm_kind(), "nccl");
    EXPECT_EQ(req.backend(), "cuda");
    EXPECT_EQ(req.rendezvous_prefix(), options_.rendezvous_prefix) << "rank " << r;
  }
  EXPECT_EQ(workers_[0]->request().device_ordinal(), 3);
  EXPECT_EQ(workers_[1]->request().device_ordinal(), 1);
}

TEST_F(RemoteExecutorTest, OneRankIsSingle) {
  StartRanks(1);
  options_.comm_kind = "nccl";
  options_.backend = "cuda";
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const wpb::LoadRequest req = workers_[0]->request();
  EXPECT_EQ(req.comm_kind(), "single");
  EXPECT_EQ(req.device_ordinal(), 0);
}

TEST_F(RemoteExecutorTest, RefusesDeviceOrdinalsOfAnotherWorldSize) {
  StartRanks(2);
  options_.device_ordinals = {0};
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  EXPECT_EQ(exec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(exec.status().message(), "device_ordinals has 1 entries for 2 ranks");
}

TEST_F(RemoteExecutorTest, EveryCallCarriesTheClusterSecret) {
  StartRanks(2);
  options_.cluster_secret = "s3cret-of-this-cluster-0123456789abcdef";
  load_.vocab_size = 4;
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  const StepBatch batch = OneToken();
  ASSERT_TRUE((*exec)->Execute(batch).ok());
  ASSERT_TRUE((*exec)->Ping(absl::Seconds(5)).ok());
  (*exec)->ShutdownRanks();
  const std::string s = "=" + options_.cluster_secret;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(workers_[r]->calls(), std::vector<std::string>({"Load" + s, "Step" + s,
                                                              "Heartbeat" + s, "Shutdown" + s}))
        << "rank " << r;
  }
}

// Rank 0's collective times out because rank 1 is gone (a cut link): the error names rank 1,
// which does not answer, before rank 0's own failure, and comes well within the step timeout.
TEST_F(RemoteExecutorTest, AFailedStepNamesTheRankThatDoesNotAnswer) {
  StartRanks(3);
  load_.vocab_size = 4;
  options_.failure_probe_timeout = absl::Milliseconds(300);
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  workers_[0]->failing = true;
  workers_[1]->silent = true;
  const std::string message = FailedStepMessage(**exec);
  EXPECT_EQ(message.rfind("rank 1 (" + addresses_[1] + ") does not answer (", 0), 0u) << message;
  EXPECT_NE(message.find("the step failed: rank 0 (" + addresses_[0] + ") failed: AllReduceSum"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("rank 2 (" + addresses_[2] + ") does not answer"), std::string::npos)
      << message;
}

// A rank cut off that fails no peer (a later pipeline stage, whose earlier stages sent it
// their rows and answered): while it is out, the ranks still out are asked for a heartbeat, and
// the step fails naming it within a probe or two, not at the step timeout.
TEST_F(RemoteExecutorTest, ASilentRankFailsTheStepWhenNoPeerFails) {
  StartRanks(2);
  load_.vocab_size = 4;
  options_.step_timeout = absl::Seconds(60);
  options_.step_probe_interval = absl::Milliseconds(200);
  options_.failure_probe_timeout = absl::Milliseconds(300);
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  workers_[1]->silent = true;
  const std::string message = FailedStepMessage(**exec);
  EXPECT_NE(message.find("rank 1 (" + addresses_[1] + ") does not answer (Deadline Exceeded) "
                         "during a step"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("rank 0"), std::string::npos) << message;
  // Named once: the probe that found it is not run again.
  EXPECT_EQ(message.find("does not answer"), message.rfind("does not answer")) << message;
}

// Two pipeline stages of one rank: both are sent the whole load with its stage count, and the
// sample request goes to the last stage's rank, which holds the logits.
TEST_F(RemoteExecutorTest, PipelineStagesSampleOnTheLastStage) {
  StartRanks(2);
  load_.world_size = 1;
  load_.pipeline_stages = 2;
  load_.vocab_size = 4;
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(workers_[r]->request().rank(), r);
    EXPECT_EQ(workers_[r]->request().world_size(), 1);
    EXPECT_EQ(workers_[r]->request().pipeline_stages(), 2);
  }
  const StepBatch batch = OneToken();
  absl::StatusOr<StepResult> step = (*exec)->Execute(batch);
  ASSERT_TRUE(step.ok()) << step.status();
  StepSampling sampling;
  SequenceSampling& s = sampling.sequences.emplace_back();
  s.seq_id = 1;
  s.num_rows = 1;
  s.samples = true;
  s.params.temperature = 0.0f;
  absl::StatusOr<std::vector<SequenceSamples>> samples = (*exec)->Sample(*step, sampling);
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 1u);
  // The fake's row 0 of step 1 peaks at (1 + 0) % 4.
  EXPECT_EQ((*samples)[0].sampled.at(0).id, 1);
  EXPECT_EQ(workers_[0]->calls().back(), "Step=");
  EXPECT_EQ(workers_[1]->calls().back(), "Sample=");
}

// Recover: the rank that does not answer a heartbeat is replaced (replace_rank gives its
// successor's address), the successor loads rank 1's shard and the others regroup, all under
// one fresh rendezvous prefix; steps then reach the successor. Without replace_rank, or when
// every rank answers, nothing is replaced.
TEST_F(RemoteExecutorTest, RecoverReplacesTheSilentRankAndRegroupsTheOthers) {
  StartRanks(3);
  load_.vocab_size = 4;
  options_.rendezvous_prefix = "run7";
  options_.failure_probe_timeout = absl::Milliseconds(300);
  std::vector<int> asked;
  std::string successor;
  options_.replace_rank = [&](int rank, absl::Duration timeout) -> absl::StatusOr<std::string> {
    asked.push_back(rank);
    EXPECT_GT(timeout, absl::Seconds(50));
    successor = StartWorker();
    return successor;
  };
  auto exec = RemoteExecutor::Connect(addresses_, load_, options_, nullptr);
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ((*exec)->Recover(absl::UnavailableError("step failed")).code(),
            absl::StatusCode::kFailedPrecondition);  // every rank answers
  workers_[1]->silent = true;
  ASSERT_TRUE((*exec)->Recover(absl::UnavailableError("step failed")).ok());
  EXPECT_EQ(asked, std::vector<int>{1});
  FakeWorker& fresh = *workers_.back();
  EXPECT_EQ(fresh.request().rank(), 1);
  EXPECT_EQ(fresh.request().rendezvous_prefix(), "run7-r1");
  EXPECT_TRUE(fresh.request().step_channel().empty());
  EXPECT_EQ(workers_[0]->regrouped_under(), "run7-r1");
  EXPECT_EQ(workers_[2]->regrouped_under(), "run7-r1");
  EXPECT_EQ(workers_[1]->regrouped_under(), "");
  const StepBatch batch = OneToken();
  ASSERT_TRUE((*exec)->Execute(batch).ok());
  EXPECT_EQ(fresh.calls().back(), "Step=");
  EXPECT_NE((*exec)->Describe().find(successor), std::string::npos);

  options_.replace_rank = nullptr;
  auto plain = RemoteExecutor::Connect({addresses_[0]}, [&] {
    RankLoad one = load_;
    one.world_size = 1;
    one.model.assignments.resize(1);
    return one;
  }(), options_, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->Recover(absl::UnavailableError("x")).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tpserve
