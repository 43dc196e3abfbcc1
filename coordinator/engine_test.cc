#include "coordinator/engine.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "coordinator/test_support.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

struct Collected {
  std::vector<GenerationEvent> events;
  std::string text() const {
    std::string t;
    for (const auto& e : events) t += e.text;
    return t;
  }
  std::vector<int32_t> ids() const {
    std::vector<int32_t> v;
    for (const auto& e : events) v.insert(v.end(), e.token_ids.begin(), e.token_ids.end());
    return v;
  }
  const GenerationEvent& last() const { return events.back(); }
};

class EngineTest : public ::testing::Test {
 protected:
  void Make(std::string script, int32_t num_blocks = 64, SchedulerOptions sched = {},
            bool prefix_caching = true) {
    auto exec = std::make_unique<ScriptedExecutor>(std::move(script));
    executor_ = exec.get();
    EngineOptions o;
    o.scheduler = sched;
    o.num_kv_blocks = num_blocks;
    o.block_size_tokens = 4;
    o.context_length = 1024;
    o.eos_token_ids = {kEos};
    o.enable_prefix_caching = prefix_caching;
    engine_ = std::make_unique<Engine>(o, std::move(exec), &tokenizer_);
  }
  int64_t Submit(std::string_view prompt, int32_t max_new, Collected* out,
                 std::vector<std::string> stops = {}) {
    absl::StatusOr<AdmittedRequest> r =
        AdmitForTest(*engine_, {Bytes(prompt), max_new, std::move(stops)});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return -1;
    absl::StatusOr<int64_t> id = engine_->Submit(
        *std::move(r), [out](GenerationEvent e) { out->events.push_back(std::move(e)); });
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or(-1);
  }
  void RunToIdle() {
    for (int i = 0; i < 10000 && engine_->Step(); ++i) {
    }
  }

  Tokenizer tokenizer_ = ByteTokenizer();
  ScriptedExecutor* executor_ = nullptr;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, StreamsWholeKoreanCharactersAndStopsAtEos) {
  const std::string script = "Q: 안녕? A: 안녕하세요!";
  Make(script);
  Collected out;
  Submit("Q: 안녕? A: ", 100, &out);
  RunToIdle();
  ASSERT_FALSE(out.events.empty());
  for (const auto& e : out.events) EXPECT_TRUE(IsValidUtf8(e.text)) << e.text;
  EXPECT_EQ(out.text(), "안녕하세요!");
  EXPECT_EQ(out.ids(), Bytes("안녕하세요!"));  // the EOS id itself is not streamed
  EXPECT_EQ(out.last().finish, FinishReason::kEos);
  EXPECT_EQ(out.last().usage.prompt_tokens, static_cast<int32_t>(Bytes("Q: 안녕? A: ").size()));
  EXPECT_EQ(out.last().usage.completion_tokens, static_cast<int32_t>(Bytes("안녕하세요!").size()) + 1);
  EXPECT_EQ(engine_->stats().free_kv_blocks, 64);
}

TEST_F(EngineTest, MaxNewTokensEndsWithLength) {
  Make("abcdefghijklmnop");
  Collected out;
  Submit("abc", 5, &out);
  RunToIdle();
  EXPECT_EQ(out.text(), "defgh");
  EXPECT_EQ(out.last().finish, FinishReason::kLength);
  EXPECT_EQ(out.last().usage.completion_tokens, 5);
}

TEST_F(EngineTest, StopSequenceIsNotSentAndEndsTheStream) {
  Make("prompt: one two STOP three");
  Collected out;
  Submit("prompt:", 100, &out, {"STOP"});
  RunToIdle();
  EXPECT_EQ(out.text(), " one two ");
  EXPECT_EQ(out.last().finish, FinishReason::kStopSequence);
  EXPECT_EQ(out.last().matched_stop_sequence, "STOP");
}

TEST_F(EngineTest, CancelFreesTheBlocksBeforeTheNextStep) {
  Make(std::string(200, 'x'));
  Collected out;
  const int64_t id = Submit("xxxx", 150, &out);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(engine_->Step());
  EXPECT_LT(engine_->stats().free_kv_blocks, 64);
  engine_->Cancel(id);
  EXPECT_FALSE(engine_->Step());  // nothing left to run
  EXPECT_EQ(out.last().finish, FinishReason::kCancelled);
  EXPECT_EQ(out.last().usage.completion_tokens, 5);
  Collected other;
  Submit("xx", 1, &other);
  RunToIdle();
  EXPECT_EQ(engine_->stats().free_kv_blocks, 64);
}

TEST_F(EngineTest, ExpiredDeadlineFinishesTheRequest) {
  Make(std::string(100, 'y'));
  Collected out;
  absl::StatusOr<AdmittedRequest> r = AdmitForTest(
      *engine_, {.prompt_ids = Bytes("yy"), .max_new_tokens = 50,
                 .deadline = absl::Now() - absl::Seconds(1)});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(
      engine_->Submit(*std::move(r), [&](GenerationEvent e) { out.events.push_back(e); }).ok());
  RunToIdle();
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.last().finish, FinishReason::kDeadline);
}

TEST_F(EngineTest, ManySequencesUnderKvPressureAllFinishCorrectly) {
  // 12 blocks of 4 tokens: 48 slots for 6 sequences that each grow to 3 + 20 tokens.
  // Preemption and recompute must not change any output (the executor checks every KV read).
  const std::string script = "abcdefghijklmnopqrstuvwxyz";
  Make(script, /*num_blocks=*/12, SchedulerOptions{8, 16});
  std::vector<Collected> outs(6);
  for (auto& o : outs) Submit("abc", 20, &o);
  RunToIdle();
  for (const auto& o : outs) {
    ASSERT_FALSE(o.events.empty());
    EXPECT_EQ(o.text(), script.substr(3, 20));
    EXPECT_EQ(o.last().finish, FinishReason::kLength);
  }
  EXPECT_EQ(engine_->stats().free_kv_blocks, 12);
  EXPECT_GT(engine_->stats().preemptions, 0);  // the pressure this test is about did happen
}

// Block size 4. Request A computes prompt tokens 0..19 and its first generated token: 5 full
// blocks. Request B's 22-token prompt starts with those 20 tokens, so it computes only 2.
TEST_F(EngineTest, ASharedPromptPrefixIsServedFromTheCacheWithTheSameOutput) {
  const std::string script = "You are a helpful bot. Q: hi A: hello!";
  for (bool caching : {true, false}) {
    SCOPED_TRACE(caching ? "prefix caching on" : "prefix caching off");
    Make(script, 64, {}, caching);
    Collected a, b;
    Submit(script.substr(0, 20), 2, &a);
    RunToIdle();
    const size_t first_step_of_b = executor_->seen_steps.size();
    Submit(script.substr(0, 22), 3, &b);
    RunToIdle();
    ASSERT_FALSE(b.events.empty());
    EXPECT_EQ(b.text(), script.substr(22, 3));
    EXPECT_EQ(a.last().usage.cached_tokens, 0);
    EXPECT_EQ(b.last().usage.cached_tokens, caching ? 20 : 0);
    EXPECT_EQ(b.last().usage.prompt_tokens, 22);
    ASSERT_GT(executor_->seen_steps.size(), first_step_of_b);
    const StepBatch& step = executor_->seen_steps[first_step_of_b];
    ASSERT_FALSE(step.sequences.empty());
    const StepBatch::Sequence& chunk = step.sequences[0];
    EXPECT_EQ(chunk.start_position, caching ? 20 : 0);
    EXPECT_EQ(std::vector<int32_t>(step.tokens(chunk).begin(), step.tokens(chunk).end()),
              Bytes(script.substr(chunk.start_position, 22 - chunk.start_position)));
    const EngineStats stats = engine_->stats();
    EXPECT_EQ(stats.prefix_cache_hits_tokens, caching ? 20 : 0);
    EXPECT_EQ(stats.prefix_cache_misses_tokens, caching ? 20 + 2 : 20 + 22);
    EXPECT_EQ(stats.free_kv_blocks, 64);
    // A's 5 full blocks, plus B's sixth (prompt tokens 20, 21 and 2 generated ones).
    EXPECT_EQ(stats.cached_kv_blocks, caching ? 6 : 0);
    EXPECT_EQ(stats.preemptions, 0);
  }
}

// Requests admitted in the same step cannot share what neither has computed yet; the next one can.
TEST_F(EngineTest, ConcurrentIdenticalPromptsAllFinishAndALaterOneHits) {
  const std::string script = "abcdefghijklmnopqrstuvwxyz";
  Make(script);
  std::vector<Collected> outs(4);
  for (int i = 0; i < 3; ++i) Submit("abcdefghij", 5, &outs[i]);
  RunToIdle();
  Submit("abcdefghij", 5, &outs[3]);
  RunToIdle();
  for (const auto& o : outs) {
    ASSERT_FALSE(o.events.empty());
    EXPECT_EQ(o.text(), "klmno");
  }
  EXPECT_EQ(outs[0].last().usage.cached_tokens, 0);
  EXPECT_EQ(outs[2].last().usage.cached_tokens, 0);
  EXPECT_EQ(outs[3].last().usage.cached_tokens, 8);
}

TEST_F(EngineTest, AFailedStepFailsEveryRequestAndTheEngineStaysUnhealthy) {
  Make(std::string(100, 'z'));
  executor_->fail_at_step_ = 2;
  Collected a, b;
  Submit("zz", 50, &a);
  Submit("zzz", 50, &b);
  RunToIdle();
  for (const Collected* o : {&a, &b}) {
    EXPECT_EQ(o->last().finish, FinishReason::kError);
    EXPECT_EQ(o->last().error.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(o->last().error.message().find("rank 1 stopped answering"), std::string::npos);
  }
  EXPECT_EQ(engine_->health().code(), absl::StatusCode::kUnavailable);
  absl::StatusOr<AdmittedRequest> r = AdmitForTest(*engine_, {.prompt_ids = {1}, .max_new_tokens = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(engine_->Submit(*std::move(r), [](GenerationEvent) {}).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(EngineTest, BackgroundThreadServesConcurrentSubmitters) {
  Make("0123456789");
  engine_->Start();
  absl::Mutex mu;
  std::vector<Collected> outs(4);
  int done = 0;
  for (auto& o : outs) {
    absl::StatusOr<AdmittedRequest> r =
        AdmitForTest(*engine_, {.prompt_ids = Bytes("01"), .max_new_tokens = 100});
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(engine_->Submit(*std::move(r), [&, out = &o](GenerationEvent e) {
      absl::MutexLock lock(&mu);
      if (e.finish != FinishReason::kNone) ++done;
      out->events.push_back(std::move(e));
    }).ok());
  }
  {
    absl::MutexLock lock(&mu);
    auto all_done = [&]() { return done == 4; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_done), absl::Seconds(30)));
  }
  engine_->Stop();
  for (const auto& o : outs) EXPECT_EQ(o.text(), "23456789");
}

// n = 3: choice 0 computes the prompt alone; the others are queued once it sampled, start after
// its full blocks (shared by reference, not recomputed) and compute only the partial last one.
TEST_F(EngineTest, ChoicesWaitForThePromptThenShareItsFullBlocks) {
  const std::string script = "0123456789abcdef";
  Make(script);
  std::map<int32_t, Collected> out;
  absl::StatusOr<AdmittedRequest> r =
      AdmitForTest(*engine_, {Bytes("0123456789"), /*max_new_tokens=*/3, {}, 0.0f,
                              absl::InfiniteFuture(), /*n=*/3});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(engine_->Submit(*std::move(r), [&out](GenerationEvent e) {
    out[e.index].events.push_back(std::move(e));
  }).ok());
  RunToIdle();
  ASSERT_EQ(out.size(), 3u);
  for (auto& [index, c] : out) {
    EXPECT_EQ(c.text(), "abc") << index;
    EXPECT_EQ(c.last().finish, FinishReason::kLength);
    EXPECT_EQ(c.last().index, index);
    EXPECT_EQ(c.last().usage.cached_tokens, index == 0 ? 0 : 8);  // two full blocks of 4
  }
  // Step 0: the prompt, alone. Step 1: choice 0's decode, and choices 1 and 2 from position 8
  // with the same physical blocks for positions 0-7.
  ASSERT_GE(executor_->seen_steps.size(), 2u);
  const StepBatch& first = executor_->seen_steps[0];
  ASSERT_EQ(first.sequences.size(), 1u);
  EXPECT_EQ(first.sequences[0].num_tokens, 10);
  const StepBatch& second = executor_->seen_steps[1];
  ASSERT_EQ(second.sequences.size(), 3u);
  const std::vector<int32_t>& table0 = second.sequences[0].block_table;
  for (int i : {1, 2}) {
    const StepBatch::Sequence& s = second.sequences[i];
    EXPECT_EQ(s.start_position, 8);
    EXPECT_EQ(s.num_tokens, 2);
    ASSERT_GE(s.block_table.size(), 3u);
    EXPECT_EQ(s.block_table[0], table0[0]);
    EXPECT_EQ(s.block_table[1], table0[1]);
    EXPECT_NE(s.block_table[2], table0[2]);  // the partial block is each one's own
  }
  EXPECT_EQ(engine_->stats().free_kv_blocks, 64);
}

// A request cancelled before its prompt ran: every choice ends cancelled, none computed.
TEST_F(EngineTest, CancellingAChoiceRequestEndsEveryChoice) {
  Make("0123456789abcdef");
  std::map<int32_t, Collected> out;
  absl::StatusOr<AdmittedRequest> r =
      AdmitForTest(*engine_, {Bytes("0123"), 5, {}, 0.0f, absl::InfiniteFuture(), /*n=*/4});
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<int64_t> id = engine_->Submit(*std::move(r), [&out](GenerationEvent e) {
    out[e.index].events.push_back(std::move(e));
  });
  ASSERT_TRUE(id.ok());
  engine_->Cancel(*id);
  RunToIdle();
  ASSERT_EQ(out.size(), 4u);
  for (auto& [index, c] : out) {
    ASSERT_EQ(c.events.size(), 1u) << index;
    EXPECT_EQ(c.last().finish, FinishReason::kCancelled);
  }
  EXPECT_TRUE(executor_->seen_steps.empty());
}

// A failed step whose lost rank the executor replaces (Recover OK, its KV wiped): every
// sequence is recomputed from its tokens and finishes with the text it would have had, and the
// replacement is counted. A sequence admitted on a cached prefix from before (whose KV is
// gone) would fail its next step on the wiped store and need a second Recover.
TEST_F(EngineTest, AReplacedRankCostsARecomputationNotTheRequests) {
  const std::string script = "The quick brown fox jumps over the lazy dog.";
  Make(script);
  executor_->fail_at_step_ = 5;
  executor_->recover_result = absl::OkStatus();
  Collected a, b;
  Submit("The quick ", 100, &a);
  Submit("The quick brown ", 100, &b);
  RunToIdle();
  EXPECT_EQ(executor_->recovers, 1);
  ASSERT_EQ(executor_->recovered_after.size(), 1u);
  EXPECT_EQ(executor_->recovered_after[0], "model step failed: rank 1 stopped answering");
  EXPECT_EQ(a.text(), "brown fox jumps over the lazy dog.");
  EXPECT_EQ(b.text(), "fox jumps over the lazy dog.");
  EXPECT_EQ(a.last().finish, FinishReason::kEos);
  EXPECT_EQ(b.last().finish, FinishReason::kEos);
  EXPECT_TRUE(engine_->health().ok()) << engine_->health();
  const EngineStats st = engine_->stats();
  EXPECT_EQ(st.rank_replacements, 1);
  EXPECT_GE(st.rank_replacement_s, 0.0);
  EXPECT_EQ(st.preemptions, 2);  // both were running
  EXPECT_TRUE(engine_->CheckKvAccounting().ok()) << engine_->CheckKvAccounting();
  EXPECT_FALSE(engine_->recovering());
}

// When the lost rank is not replaced, every request fails naming both the failure and why.
TEST_F(EngineTest, ARankNotReplacedFailsEveryRequestNamingWhy) {
  Make("The quick brown fox.");
  executor_->fail_at_step_ = 2;
  executor_->recover_result =
      absl::UnavailableError("rank 1 (127.0.0.1:7) is gone and was not replaced: no successor");
  Collected a;
  Submit("The ", 100, &a);
  RunToIdle();
  ASSERT_FALSE(a.events.empty());
  EXPECT_EQ(a.last().finish, FinishReason::kError);
  EXPECT_EQ(a.last().error.message(),
            "model step failed: rank 1 stopped answering; rank 1 (127.0.0.1:7) is gone and was "
            "not replaced: no successor");
  EXPECT_EQ(engine_->health().message(), a.last().error.message());
  EXPECT_EQ(engine_->stats().rank_replacements, 0);
}

}  // namespace
}  // namespace tpserve
