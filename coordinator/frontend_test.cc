#include "coordinator/frontend.h"

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "coordinator/test_support.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

namespace pb = ::tpserve::v1;

class FrontendTest : public ::testing::Test {
 protected:
  void Start(std::string script) {
    auto exec = std::make_unique<ScriptedExecutor>(std::move(script));
    executor_ = exec.get();
    engine_ = StartTestEngine(std::move(exec), &tokenizer_);
    log_ = std::tmpfile();
    options_.request_log = log_;
    door_ = std::make_unique<Frontend>(engine_.get(), &tokenizer_, nullptr, ServedModelInfo{"t"},
                                       TestModelLimits(), options_);
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
    if (log_) std::fclose(log_);
  }
  std::vector<nlohmann::json> LogLines() {
    std::fflush(log_);
    std::rewind(log_);
    std::vector<nlohmann::json> lines;
    char buf[4096];
    while (std::fgets(buf, sizeof buf, log_)) lines.push_back(nlohmann::json::parse(buf));
    return lines;
  }

  // Runs one request to its end; returns the finishing event.
  GenerationEvent Run(pb::GenerateRequest req) {
    req.mutable_sampling()->set_temperature(0.0f);  // the scripted model checks every token
    absl::Notification done;
    GenerationEvent last;
    auto admitted = door_->Generate(req, absl::InfiniteFuture(), [&](GenerationEvent e) {
      if (e.finish != FinishReason::kNone) {
        last = std::move(e);
        done.Notify();
      }
    });
    EXPECT_TRUE(admitted.ok()) << admitted.status();
    if (admitted.ok()) done.WaitForNotification();
    return last;
  }

  double Sample(const std::string& line_prefix) {
    const std::string text = door_->metrics().Render();
    const size_t at = text.find("\n" + line_prefix + " ");
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + line_prefix.size() + 2));
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  ScriptedExecutor* executor_ = nullptr;
  std::unique_ptr<Engine> engine_;
  FrontendOptions options_;
  std::FILE* log_ = nullptr;
  std::unique_ptr<Frontend> door_;
};

// A mixture of experts' routing, as the executor reports it per step: per-expert counters on
// /metrics, the imbalance histogram, and the request's mean imbalance in its log line.
TEST_F(FrontendTest, ExpertLoadReachesMetricsAndTheRequestLog) {
  Start("abcdefgh");
  // Each step: 2 MoE layers, 3 slots to expert 0 and 1 to expert 2 in all; ratios 2.0 and 1.0.
  executor_->expert_load_per_step = ExpertLoad{{3, 0, 1}, 2, 3.0};
  pb::GenerateRequest req;
  req.set_text("abc");
  req.set_max_new_tokens(3);
  EXPECT_EQ(Run(req).finish, FinishReason::kLength);
  const int64_t steps = engine_->stats().steps;
  ASSERT_GE(steps, 3);
  EXPECT_EQ(Sample("tpserve_expert_routed_tokens_total{expert=\"0\"}"), 3 * steps);
  EXPECT_EQ(Sample("tpserve_expert_routed_tokens_total{expert=\"1\"}"), 0);
  EXPECT_EQ(Sample("tpserve_expert_routed_tokens_total{expert=\"2\"}"), steps);
  EXPECT_EQ(Sample("tpserve_expert_imbalance_ratio_count"), steps);
  EXPECT_EQ(Sample("tpserve_expert_imbalance_ratio_sum"), 1.5 * steps);
  EXPECT_EQ(engine_->stats().expert_load.layers, 2 * steps);
  const std::vector<nlohmann::json> lines = LogLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["expert_imbalance"], 1.5);
}

// A GEMM fallback that decodes weights whole (the CUDA backend's, where cuBLASLt refuses a
// format), as the executor reports it per step: counted on /metrics.
TEST_F(FrontendTest, DecodedWeightBytesReachMetrics) {
  Start("abcdefgh");
  EXPECT_EQ(Sample("tpserve_decoded_weight_bytes_total"), 0);
  executor_->decoded_weight_bytes_per_step = 117'440'512;  // one 7168 x 8192 matrix in bf16
  pb::GenerateRequest req;
  req.set_text("abc");
  req.set_max_new_tokens(3);
  EXPECT_EQ(Run(req).finish, FinishReason::kLength);
  const int64_t steps = engine_->stats().steps;
  ASSERT_GE(steps, 3);
  EXPECT_EQ(Sample("tpserve_decoded_weight_bytes_total"), 117'440'512.0 * steps);
}

TEST_F(FrontendTest, CountersMoveByWhatTheRequestsImplyAndEachRequestLogsOneLine) {
  Start("abcdefgh");
  pb::GenerateRequest req;
  req.set_text("abc");
  req.set_max_new_tokens(2);
  req.set_request_id("r1");
  EXPECT_EQ(Run(req).finish, FinishReason::kLength);
  req.set_request_id("");
  req.set_max_new_tokens(100);  // runs into EOS after "defgh"
  EXPECT_EQ(Run(req).finish, FinishReason::kEos);
  pb::GenerateRequest bad;
  bad.set_text("a");
  bad.set_max_new_tokens(0);
  EXPECT_EQ(door_->Generate(bad, absl::InfiniteFuture(), [](GenerationEvent) {}).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(Sample("tpserve_prompt_tokens_total"), 6);
  EXPECT_EQ(Sample("tpserve_generation_tokens_total"), 2 + 6);  // EOS is counted, not sent
  EXPECT_EQ(Sample("tpserve_requests_total{finish_reason=\"length\"}"), 1);
  EXPECT_EQ(Sample("tpserve_requests_total{finish_reason=\"stop\"}"), 1);
  EXPECT_EQ(Sample("tpserve_request_errors_total{code=\"INVALID_ARGUMENT\"}"), 1);
  EXPECT_EQ(Sample("tpserve_time_to_first_token_seconds_count"), 2);
  EXPECT_EQ(Sample("tpserve_inter_token_latency_seconds_count"), 1 + 4);
  EXPECT_EQ(Sample("tpserve_request_duration_seconds_count"), 2);
  EXPECT_EQ(door_->in_flight(), 0);
  EXPECT_EQ(Sample("tpserve_step_duration_seconds_count"), engine_->stats().steps);
  EXPECT_GE(engine_->stats().steps, 7);  // one prefill and a decode per later token, at least

  const std::vector<nlohmann::json> lines = LogLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["request_id"], "r1");
  EXPECT_EQ(lines[0]["prompt_tokens"], 3);
  EXPECT_EQ(lines[0]["output_tokens"], 2);
  EXPECT_EQ(lines[0]["finish_reason"], "length");
  EXPECT_EQ(lines[0]["status"], "OK");
  EXPECT_FALSE(lines[0].contains("expert_imbalance"));  // a dense model has none
  EXPECT_GT(lines[0]["ttft_s"].get<double>(), 0.0);
  EXPECT_EQ(lines[1]["request_id"].get<std::string>().size(), 16u);  // made up
  EXPECT_EQ(lines[1]["output_tokens"], 6);  // the engine counts EOS as generated
  EXPECT_EQ(lines[1]["finish_reason"], "stop");
}

// n = 3: three finishing events (one per choice), one request in the metrics and one log line
// counting every choice's tokens.
TEST_F(FrontendTest, ChoicesEndSeparatelyAndTheRequestIsCountedOnce) {
  Start("abcdefgh");
  pb::GenerateRequest req;
  req.set_text("abc");
  req.set_max_new_tokens(3);
  req.set_n(3);
  req.mutable_sampling()->set_temperature(0.0f);
  absl::Mutex mu;
  std::map<int32_t, std::string> text;
  std::map<int32_t, int> finishes;
  absl::BlockingCounter done(3);
  auto admitted = door_->Generate(req, absl::InfiniteFuture(), [&](GenerationEvent e) {
    absl::MutexLock lock(&mu);
    text[e.index] += e.text;
    if (e.finish != FinishReason::kNone) {
      ++finishes[e.index];
      done.DecrementCount();
    }
  });
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(admitted->n, 3);
  done.Wait();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(text, (std::map<int32_t, std::string>{{0, "def"}, {1, "def"}, {2, "def"}}));
  EXPECT_EQ(finishes, (std::map<int32_t, int>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(door_->in_flight(), 0);
  EXPECT_EQ(Sample("tpserve_requests_total{finish_reason=\"length\"}"), 1);
  EXPECT_EQ(Sample("tpserve_generation_tokens_total"), 9);
  const std::vector<nlohmann::json> lines = LogLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["output_tokens"], 9);
  EXPECT_EQ(lines[0]["n"], 3);
  EXPECT_EQ(lines[0]["best_of"], 3);
}

// best_of = 3, n = 1, past its deadline before it runs: every candidate expires, and the one
// choice the client asked for ends with the deadline (no candidate's tokens).
TEST_F(FrontendTest, ACandidateThatExpiresEndsTheChoicesWithTheDeadline) {
  Start("abcdefgh");
  pb::GenerateRequest req;
  req.set_text("abc");
  req.set_max_new_tokens(3);
  req.set_best_of(3);
  absl::Notification done;
  std::vector<GenerationEvent> events;
  auto admitted = door_->Generate(req, absl::Now() - absl::Seconds(1), [&](GenerationEvent e) {
    const bool last = e.finish != FinishReason::kNone;
    events.push_back(std::move(e));
    if (last) done.Notify();
  });
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  done.WaitForNotification();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].index, 0);
  EXPECT_EQ(events[0].finish, FinishReason::kDeadline);
  EXPECT_EQ(door_->in_flight(), 0);
  EXPECT_EQ(Sample("tpserve_requests_total{finish_reason=\"deadline\"}"), 1);
}

TEST_F(FrontendTest, CachedPromptTokensAreReportedInUsageMetricsAndTheLog) {
  Start("abcdefghijklmnop");
  pb::GenerateRequest req;
  req.set_text("abcdefghij");  // 10 tokens: two full blocks of 4 can be shared
  req.set_max_new_tokens(2);
  EXPECT_EQ(Run(req).usage.cached_tokens, 0);
  const GenerationEvent second = Run(req);
  EXPECT_EQ(second.usage.cached_tokens, 8);
  EXPECT_EQ(second.usage.prompt_tokens, 10);
  EXPECT_EQ(Sample("tpserve_prefix_cache_hits_tokens_total"), 8);
  EXPECT_EQ(Sample("tpserve_prefix_cache_misses_tokens_total"), 10 + 2);
  EXPECT_EQ(Sample("tpserve_prompt_tokens_total"), 20);
  const std::vector<nlohmann::json> lines = LogLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["cached_tokens"], 8);
}

TEST_F(FrontendTest, DrainRefusesNewRequestsAndLetsRunningOnesFinish) {
  Start(std::string(200, 'x'));
  executor_->step_delay_ = absl::Milliseconds(5);
  pb::GenerateRequest req;
  req.set_text("x");
  req.mutable_sampling()->set_temperature(0.0f);  // the scripted model checks every token
  req.set_max_new_tokens(40);
  absl::Notification done;
  FinishReason reason = FinishReason::kNone;
  absl::Status error;
  ASSERT_TRUE(door_->Generate(req, absl::InfiniteFuture(), [&](GenerationEvent e) {
                     if (e.finish != FinishReason::kNone) {
                       reason = e.finish;
                       error = e.error;
                       done.Notify();
                     }
                   }).ok());
  door_->BeginDrain();
  absl::StatusOr<Admitted> refused =
      door_->Generate(req, absl::InfiniteFuture(), [](GenerationEvent) {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message(), "the server is draining: no new requests");
  EXPECT_TRUE(door_->WaitIdle(absl::Seconds(30)));
  done.WaitForNotification();
  EXPECT_EQ(reason, FinishReason::kLength) << error;  // finished normally, not cancelled
}

TEST_F(FrontendTest, CancelAllEndsWhatADrainLeftRunning) {
  Start(std::string(250, 'x'));
  executor_->step_delay_ = absl::Milliseconds(5);
  pb::GenerateRequest req;
  req.set_text("x");
  req.mutable_sampling()->set_temperature(0.0f);
  absl::Notification done;
  FinishReason reason = FinishReason::kNone;
  ASSERT_TRUE(door_->Generate(req, absl::InfiniteFuture(), [&](GenerationEvent e) {
                     if (e.finish != FinishReason::kNone) {
                       reason = e.finish;
                       done.Notify();
                     }
                   }).ok());
  door_->BeginDrain();
  EXPECT_FALSE(door_->WaitIdle(absl::Milliseconds(50)));
  door_->CancelAll();
  EXPECT_TRUE(door_->WaitIdle(absl::Seconds(10)));
  done.WaitForNotification();
  EXPECT_EQ(reason, FinishReason::kCancelled);
  for (int i = 0; i < 200 && engine_->stats().running > 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(engine_->stats().running, 0);  // published after the step that ended it
}

TEST_F(FrontendTest, BearerTokenMustMatchExactly) {
  options_.bearer_token = "tok";
  Start("x");
  EXPECT_TRUE(door_->CheckAuth("Bearer tok").ok());
  for (const char* bad : {"", "Bearer to", "Bearer tok2", "bearer tok", "Bearer  tok", "tok"}) {
    EXPECT_EQ(door_->CheckAuth(bad).code(), absl::StatusCode::kUnauthenticated) << bad;
  }
}

}  // namespace
}  // namespace tpserve
