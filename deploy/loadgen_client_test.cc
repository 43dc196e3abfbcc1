// The load generator against a real in-process tpserve.v1 server (engine, scheduler, gRPC
// service) over loopback, with a stand-in model. Counts and JSON are checked; timings never.
#include "deploy/loadgen_client.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "coordinator/engine.h"
#include "coordinator/server.h"
#include "coordinator/test_support.h"
#include "deploy/loadgen.h"
#include "deploy/loadgen_report.h"

namespace tpserve {
namespace {

// Always predicts the byte 'a'; from step `fail_from_step` on, every step fails as a dead
// rank would.
class RepeatExecutor : public ModelExecutor {
 public:
  explicit RepeatExecutor(int fail_from_step) : fail_from_step_(fail_from_step) {}
  absl::StatusOr<StepResult> Execute(const StepBatch& batch) override {
    if (fail_from_step_ >= 0 && steps_++ >= fail_from_step_) {
      return absl::UnavailableError("rank 1 stopped answering");
    }
    StepResult r;
    r.vocab_size = kVocab;
    r.logits.assign(batch.num_logit_rows() * kVocab, 0.0f);
    for (int64_t i = 0; i < batch.num_logit_rows(); ++i) r.logits[i * kVocab + 'a'] = 10.0f;
    return r;
  }
  int64_t vocab_size() const override { return kVocab; }
  std::string Describe() const override { return "repeat"; }

 private:
  const int fail_from_step_;
  int steps_ = 0;
};

class LoadgenClientTest : public ::testing::Test {
 protected:
  void Start(int fail_from_step = -1) {
    EngineOptions o;
    o.num_kv_blocks = 512;
    o.block_size_tokens = 4;
    o.context_length = 512;
    o.eos_token_ids = {kEos};
    o.scheduler.max_num_seqs = 8;
    engine_ =
        std::make_unique<Engine>(o, std::make_unique<RepeatExecutor>(fail_from_step), &tokenizer_);
    engine_->Start();
    ModelLimits limits;
    limits.vocab_size = kVocab;
    limits.context_length = 512;
    frontend_ = std::make_unique<Frontend>(engine_.get(), &tokenizer_, nullptr,
                                           ServedModelInfo{"repeat"}, limits, frontend_options_);
    service_ = std::make_unique<TpServeService>(frontend_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    if (engine_) engine_->Stop();
  }
  LoadOptions Options() const {
    LoadOptions o;
    o.address = address_;
    o.concurrency = 4;
    o.max_requests = 8;
    o.prompt_mix = *ParseLengthMix("16", "--prompt_tokens");
    o.output_mix = *ParseLengthMix("4:0.5,8:0.5", "--output_tokens");
    o.request_timeout = absl::Seconds(60);
    return o;
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  std::unique_ptr<Engine> engine_;
  FrontendOptions frontend_options_;
  std::unique_ptr<Frontend> frontend_;
  std::unique_ptr<TpServeService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(LoadgenClientTest, EightRequestsOnFourStreamsAllCompleteWithTheirOutputLengths) {
  Start();
  LoadOptions o = Options();
  o.warmup_requests = 1;
  absl::StatusOr<LoadResult> result = RunLoad(o);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->records.size(), 8u);
  Workload same(o.prompt_mix, o.output_mix, 0.0, o.seed);
  for (const RequestRecord& r : result->records) {
    const WorkloadRequest w = same.Next();
    EXPECT_EQ(r.index, w.index);
    EXPECT_TRUE(r.ok()) << r.status << ": " << r.error_message;
    EXPECT_EQ(r.output_tokens, w.output_tokens) << r.index;  // max_new_tokens forced it
    EXPECT_EQ(r.prompt_tokens, static_cast<int32_t>(w.prompt.size())) << r.index;  // bytes
    EXPECT_GE(r.ttft_s, 0.0);
    EXPECT_EQ(r.itl_s.size(), static_cast<size_t>(w.output_tokens - 1));
  }
  const LoadSummary s = Summarize(result->records, result->window_s, Slo{});
  EXPECT_EQ(s.requests_ok, 8);
  EXPECT_EQ(s.good_requests, 8);  // no limits
  EXPECT_GT(s.output_tokens, 0);
  RunInfo info;
  info.tool = "tpserve";
  info.target = address_;
  const nlohmann::json j = nlohmann::json::parse(RunToJson(info, s, result->records).dump(2));
  EXPECT_EQ(j["summary"]["requests_ok"], 8);
  EXPECT_EQ(j["summary"]["output_tokens"], s.output_tokens);
  EXPECT_EQ(j["requests"].size(), 8u);
}

TEST_F(LoadgenClientTest, FailedRequestsAreRecordedByStatusCode) {
  Start(/*fail_from_step=*/3);
  absl::StatusOr<LoadResult> result = RunLoad(Options());
  ASSERT_TRUE(result.ok()) << result.status();
  const LoadSummary s = Summarize(result->records, result->window_s, Slo{});
  EXPECT_EQ(s.requests, 8);
  EXPECT_EQ(s.requests_failed, 8);
  EXPECT_EQ(s.failures, (std::map<std::string, int64_t>{{"UNAVAILABLE", 8}}));
  EXPECT_EQ(s.good_requests, 0);
}

TEST_F(LoadgenClientTest, AFailedWarmUpMeansTheServerIsNotServing) {
  Start(/*fail_from_step=*/0);
  LoadOptions o = Options();
  o.warmup_requests = 1;
  EXPECT_EQ(RunLoad(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(LoadgenClientTest, RejectsOptionsWithoutALimit) {
  LoadOptions o;
  o.address = "127.0.0.1:1";
  o.max_requests = 0;
  o.prompt_mix = *ParseLengthMix("4", "p");
  o.output_mix = *ParseLengthMix("4", "o");
  EXPECT_EQ(RunLoad(o).status().message(),
            "--requests = 0 and --duration_s = 0: give at least one limit");
}

}  // namespace
}  // namespace tpserve
