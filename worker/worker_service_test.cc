// The worker rank's gRPC service, driven as the coordinator drives it: Load with the plan's
// assignment, Step (over gRPC and over the step channel), and the refusals (wrong assignment,
// step before load, bad tokens, and every method called without the cluster secret).
#include "worker/worker_service.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "checkpoint/model_files.h"
#include "cluster/secret.h"
#include "model/bundled_model.h"
#include "model/sharding.h"
#include "step/rank_load_proto.h"
#include "step/sampling.h"
#include "step/step_sampling.h"
#include "step/step_sampling_proto.h"

namespace tpserve {
namespace {

namespace wpb = ::tpserve::worker::v1;

const std::string kSecret = NewClusterSecret();

class WorkerServiceTest : public ::testing::Test {
 protected:
  virtual WorkerServiceOptions Options() const {
    return WorkerServiceOptions{.cluster_secret = kSecret};
  }
  void SetUp() override {
    service_ = std::make_unique<WorkerService>(Options());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = wpb::Worker::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                                     grpc::InsecureChannelCredentials()));
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    RankLoad load;
    load.model.path = *path;
    load.model.max_logit_rows = 2;
    load.num_kv_blocks = 8;
    load.block_size_tokens = 16;
    load.max_tokens_per_step = 64;
    load.kv_dtype = DType::kF32;
    ToLoadRequest(load, &request_);
    request_.set_rank(0);
    request_.set_comm_kind("single");
  }
  void TearDown() override { server_->Shutdown(); }

  // Returns the final status; `ready` gets the last progress message.
  grpc::Status Load(const wpb::LoadRequest& req, wpb::LoadProgress* ready) {
    grpc::ClientContext ctx;
    AttachClusterSecret(&ctx, kSecret);
    auto reader = stub_->Load(&ctx, req);
    wpb::LoadProgress p;
    while (reader->Read(&p)) *ready = p;
    return reader->Finish();
  }
  // One sequence's first step: tokens 1 and 28 at positions 0 and 1, in block 0; the logits of
  // the last.
  static wpb::StepRequest TwoTokenStep() {
    wpb::StepRequest step;
    wpb::SequenceChunk* c = step.add_chunks();
    c->add_token_ids(1);
    c->add_token_ids(28);
    c->set_start_position(0);
    c->add_block_table(0);
    c->set_num_logits(1);
    return step;
  }
  wpb::ShardAssignment Assignment(int rank, int world) {
    absl::StatusOr<ModelFiles> files = OpenModelFiles(*BundledModelPath());
    EXPECT_TRUE(files.ok()) << files.status();
    absl::StatusOr<ShardingPlan> plan =
        ShardingPlan::Create(files->config, files->stored_formats, {rank, world});
    EXPECT_TRUE(plan.ok()) << plan.status();
    return ToAssignment(*plan);
  }

  // Holds a step's logits, samples them over gRPC and the step channel (greedy, with
  // alternatives, against the logits the same step returns whole), and refuses a sample request
  // for a step not held.
  void SamplesTheLogitsItHeld();

  std::unique_ptr<WorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<wpb::Worker::Stub> stub_;
  wpb::LoadRequest request_;
};

TEST_F(WorkerServiceTest, LoadsTheAssignedShardThenSteps) {
  *request_.add_assignments() = Assignment(0, 1);
  wpb::LoadProgress ready;
  grpc::Status s = Load(request_, &ready);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(ready.ready());
  EXPECT_EQ(ready.num_layers(), 30);
  EXPECT_EQ(ready.kv_cache_bytes(), 8 * 16 * 30 * 2 * 3 * 64 * 4);  // f32 K and V, 3 KV heads

  wpb::StepRequest step = TwoTokenStep();
  step.set_step_id(7);
  wpb::StepResponse out;
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, kSecret);
  s = stub_->Step(&ctx, step, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.step_id(), 7);
  EXPECT_EQ(out.vocab_size(), 49152);
  EXPECT_EQ(out.logits().size(), 49152 * sizeof(float));  // rank 0 returns one row per chunk

  step.mutable_chunks(0)->set_token_ids(1, 49152);  // outside the vocabulary
  grpc::ClientContext ctx2;
  AttachClusterSecret(&ctx2, kSecret);
  s = stub_->Step(&ctx2, step, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("rank 0: "), std::string::npos) << s.error_message();
}

// The same step through the shared-memory step channel gives the floats the gRPC Step gives
// (a fresh KV cache each time: position 0 overwrites the same slots), and a bad token comes
// back as the rank's INVALID_ARGUMENT.
TEST_F(WorkerServiceTest, StepsThroughTheStepChannelLikeThroughGrpc) {
  absl::StatusOr<StepChannel> channel = StepChannel::Create(1, 1 << 16, 2 * 49152 * 4);
  ASSERT_TRUE(channel.ok()) << channel.status();
  *request_.add_assignments() = Assignment(0, 1);
  request_.set_step_channel(channel->name());
  wpb::LoadProgress ready;
  grpc::Status s = Load(request_, &ready);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(ready.step_channel());
  (void)channel->Unlink();  // mapped by both ends now; leave nothing in /dev/shm

  wpb::StepRequest step = TwoTokenStep();
  wpb::StepResponse out;
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, kSecret);
  ASSERT_TRUE(stub_->Step(&ctx, step, &out).ok());
  std::vector<float> over_grpc(out.logits().size() / sizeof(float));
  std::memcpy(over_grpc.data(), out.logits().data(), out.logits().size());

  channel->Post(step.SerializeAsString());
  ASSERT_TRUE(channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5)).ok());
  const absl::Span<const float> over_channel = channel->logits();
  EXPECT_EQ(std::vector<float>(over_channel.begin(), over_channel.end()), over_grpc);
  EXPECT_GT(channel->compute_s(0), 0.0);

  step.mutable_chunks(0)->set_token_ids(1, 49152);  // outside the vocabulary
  channel->Post(step.SerializeAsString());
  const absl::Status bad = channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("rank 0: "), std::string::npos) << bad;
}

// A step whose logits the rank holds returns none; the sample request that follows draws from
// them on the rank, over gRPC and over the step channel alike: the greedy token and logprob
// of the logits the same step returns whole. A sample request for another step is refused,
// naming both steps.
void WorkerServiceTest::SamplesTheLogitsItHeld() {
  absl::StatusOr<StepChannel> channel = StepChannel::Create(1, 1 << 16, 2 * 49152 * 4);
  ASSERT_TRUE(channel.ok()) << channel.status();
  *request_.add_assignments() = Assignment(0, 1);
  request_.set_step_channel(channel->name());
  wpb::LoadProgress ready;
  ASSERT_TRUE(Load(request_, &ready).ok());
  (void)channel->Unlink();
  const auto call = [&](const wpb::StepRequest& req, wpb::StepResponse* out) {
    grpc::ClientContext ctx;
    AttachClusterSecret(&ctx, kSecret);
    return stub_->Step(&ctx, req, out);
  };
  wpb::StepRequest step = TwoTokenStep();
  step.set_step_id(3);
  wpb::StepResponse whole;
  ASSERT_TRUE(call(step, &whole).ok());
  std::vector<float> logits(whole.logits().size() / sizeof(float));
  std::memcpy(logits.data(), whole.logits().data(), whole.logits().size());
  ASSERT_EQ(logits.size(), 49152u);
  const int32_t greedy =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const SampledToken expected = ScoreToken(logits, greedy, 2);

  StepSampling sampling;
  SequenceSampling& seq = sampling.sequences.emplace_back();
  seq.num_rows = 1;
  seq.samples = true;
  seq.params.temperature = 0.0f;
  seq.params.top_logprobs = 2;
  wpb::StepRequest sample;
  *sample.mutable_sample() = ToProto(sampling);
  const auto check = [&](const wpb::SampleResponse& answer, const char* path) {
    absl::StatusOr<std::vector<SequenceSamples>> got = FromProto(answer);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status();
    ASSERT_EQ(got->size(), 1u) << path;
    ASSERT_EQ((*got)[0].sampled.size(), 1u) << path;
    EXPECT_EQ((*got)[0].sampled[0].id, greedy) << path;
    EXPECT_EQ((*got)[0].sampled[0].logprob, expected.logprob) << path;
    EXPECT_EQ((*got)[0].sampled[0].top_logprobs, expected.top_logprobs) << path;
  };

  step.set_step_id(4);
  step.set_hold_logits(true);
  wpb::StepResponse held;
  ASSERT_TRUE(call(step, &held).ok());
  EXPECT_TRUE(held.logits().empty());
  sample.set_step_id(4);
  wpb::StepResponse answer;
  ASSERT_TRUE(call(sample, &answer).ok());
  check(answer.samples(), "gRPC");
  // Sampled once: the logits are no longer held.
  grpc::Status again = call(sample, &answer);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(again.error_message(),
            "rank 0: a sample request for step 4, but no step's logits are held");

  step.set_step_id(5);
  channel->Post(step.SerializeAsString());
  ASSERT_TRUE(channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5)).ok());
  EXPECT_TRUE(channel->logits().empty());
  sample.set_step_id(6);  // not the step held
  channel->Post(sample.SerializeAsString());
  const absl::Status wrong = channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5));
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("a sample request for step 6, but the logits held are step 5's"),
            std::string::npos)
      << wrong;
  channel->Post(step.SerializeAsString());  // hold step 5 again (the refusal dropped nothing)
  ASSERT_TRUE(channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5)).ok());
  sample.set_step_id(5);
  channel->Post(sample.SerializeAsString());
  ASSERT_TRUE(channel->AwaitAll(absl::Now() + absl::Seconds(30), absl::Seconds(5)).ok());
  wpb::SampleResponse over_channel;
  const std::string_view bytes = channel->result_bytes();
  ASSERT_TRUE(over_channel.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  check(over_channel, "step channel");
}

TEST_F(WorkerServiceTest, SamplesTheLogitsItHeldOverGrpcAndTheStepChannel) {
  SamplesTheLogitsItHeld();
}

// The path of a GPU rank, whose logits stay on the device: the held step keeps them in the
// model's workspace and Backend::SampleRows samples them there (on the CPU backend, the device
// sampler's passes run on the host); the same tokens and logprobs.
class WorkerServiceSamplingRowsTest : public WorkerServiceTest {
 protected:
  WorkerServiceOptions Options() const override {
    return WorkerServiceOptions{.cluster_secret = kSecret, .always_sample_rows = true};
  }
};

TEST_F(WorkerServiceSamplingRowsTest, SamplesTheLogitsItKeptWhereTheStepLeftThem) {
  SamplesTheLogitsItHeld();
}

TEST_F(WorkerServiceTest, RefusesAnAssignmentItsOwnPlanDisagreesWith) {
  *request_.add_assignments() = Assignment(1, 3);  // another rank's slices
  wpb::LoadProgress ready;
  grpc::Status s = Load(request_, &ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("rank 0 failed to load: the coordinator assigned"),
            std::string::npos)
      << s.error_message();
  EXPECT_FALSE(ready.ready());
}

TEST_F(WorkerServiceTest, RefusesAVocabularyOtherThanTheCoordinators) {
  *request_.add_assignments() = Assignment(0, 1);
  request_.set_vocab_size(32000);
  wpb::LoadProgress ready;
  grpc::Status s = Load(request_, &ready);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("rank 0 failed to load: the coordinator planned a "
                                   "vocabulary of 32000 tokens, but "),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find(" has 49152"), std::string::npos) << s.error_message();
}

TEST_F(WorkerServiceTest, StepBeforeLoadIsRefused) {
  wpb::StepResponse out;
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, kSecret);
  grpc::Status s = stub_->Step(&ctx, wpb::StepRequest(), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(), "Step before Load");
}

// A plain client, and one with another cluster's secret, get UNAUTHENTICATED from every method
// and change nothing: Load loads nothing, Step runs nothing and Shutdown shuts nothing down,
// before the load and after it; the coordinator's own calls keep working.
TEST_F(WorkerServiceTest, EveryMethodRefusesAMissingOrWrongSecretAndChangesNothing) {
  *request_.add_assignments() = Assignment(0, 1);
  const auto refused_everything = [&](bool loaded) {
    for (const std::string& secret : {std::string(), NewClusterSecret()}) {
      const auto context = [&] {
        auto ctx = std::make_unique<grpc::ClientContext>();
        if (!secret.empty()) AttachClusterSecret(ctx.get(), secret);
        return ctx;
      };
      const char* who = secret.empty() ? "no secret" : "a wrong secret";
      if (!loaded) {
        auto ctx = context();
        auto reader = stub_->Load(ctx.get(), request_);
        wpb::LoadProgress p;
        EXPECT_FALSE(reader->Read(&p)) << who;
        EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED) << who;
      }
      wpb::StepResponse out;
      EXPECT_EQ(stub_->Step(context().get(), TwoTokenStep(), &out).error_code(),
                grpc::StatusCode::UNAUTHENTICATED) << who;
      EXPECT_TRUE(out.logits().empty());
      wpb::HeartbeatResponse beat;
      EXPECT_EQ(stub_->Heartbeat(context().get(), wpb::HeartbeatRequest(), &beat).error_code(),
                grpc::StatusCode::UNAUTHENTICATED) << who;
      wpb::ShutdownResponse bye;
      EXPECT_EQ(stub_->Shutdown(context().get(), wpb::ShutdownRequest(), &bye).error_code(),
                grpc::StatusCode::UNAUTHENTICATED) << who;
      EXPECT_FALSE(service_->shutdown_requested()) << who;
    }
  };
  refused_everything(/*loaded=*/false);
  wpb::StepResponse out;
  {
    grpc::ClientContext ctx;
    AttachClusterSecret(&ctx, kSecret);
    EXPECT_EQ(stub_->Step(&ctx, TwoTokenStep(), &out).error_message(), "Step before Load");
  }
  wpb::LoadProgress ready;
  ASSERT_TRUE(Load(request_, &ready).ok());
  {
    grpc::ClientContext ctx;
    AttachClusterSecret(&ctx, kSecret);
    ASSERT_TRUE(stub_->Step(&ctx, TwoTokenStep(), &out).ok());
  }
  const std::string first_logits = out.logits();
  refused_everything(/*loaded=*/true);
  grpc::ClientContext ctx;
  AttachClusterSecret(&ctx, kSecret);
  wpb::StepResponse again;
  ASSERT_TRUE(stub_->Step(&ctx, TwoTokenStep(), &again).ok());
  EXPECT_EQ(again.logits(), first_logits);  // the same step on an untouched rank
  grpc::ClientContext beat_ctx;
  AttachClusterSecret(&beat_ctx, kSecret);
  wpb::HeartbeatResponse beat;
  EXPECT_TRUE(stub_->Heartbeat(&beat_ctx, wpb::HeartbeatRequest(), &beat).ok());
}

}  // namespace
}  // namespace tpserve
