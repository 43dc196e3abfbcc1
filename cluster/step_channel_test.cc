#include "cluster/step_channel.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

// Ranks as threads: each answers every request with its length; rank 0 writes logits, rank 1
// fails the request "bad" with INVALID_ARGUMENT.
TEST(StepChannelTest, RequestsReachEveryRankAndResultsComeBack) {
  absl::StatusOr<StepChannel> coordinator =
      StepChannel::Create(3, 1024, 64 * sizeof(float), /*expert_capacity=*/8);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  std::atomic<bool> stop{false};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<StepChannel> ch = StepChannel::Open(coordinator->name(), r);
      ASSERT_TRUE(ch.ok()) << ch.status();
      uint32_t seq = 0;
      std::string request;
      while (ch->WaitRequest(&seq, &request, stop)) {
        size_t logits_bytes = 0;
        // Ranks 0 and 2 report expert loads (TP rank 0 of two pipeline stages): rank 0 one
        // count per byte of the request over 2 layers, rank 2 ten per byte over 1 layer.
        ExpertLoad load;
        if (r == 0) {
          for (size_t i = 0; i < request.size(); ++i) ch->logits_area()[i] = request[i];
          logits_bytes = request.size() * sizeof(float);
          for (char c : request) load.tokens.push_back(c);
          load.layers = 2;
          load.imbalance_sum = 3.5;
        } else if (r == 2) {
          for (char c : request) load.tokens.push_back(10 * c);
          load.layers = 1;
          load.imbalance_sum = 1.25;
        }
        const absl::Status status = r == 1 && request == "bad"
                                        ? absl::InvalidArgumentError("rank 1: bad request")
                                        : absl::OkStatus();
        ch->Finish(seq, status, 0.5 * r, 0.25 * r, logits_bytes, load,
                   /*decoded_weight_bytes=*/r == 0 ? 1000 * request.size() : 7);
      }
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (const std::string text : {"abc", "hello", "x"}) {
    coordinator->Post(text);
    ASSERT_TRUE(coordinator->AwaitAll(deadline, absl::Seconds(5)).ok());
    const absl::Span<const float> logits = coordinator->logits();
    ASSERT_EQ(logits.size(), text.size());
    for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(logits[i], text[i]);
    EXPECT_EQ(coordinator->compute_s(2), 1.0);
    EXPECT_EQ(coordinator->allreduce_s(1), 0.25);
    const ExpertLoad load = coordinator->expert_load();
    std::vector<int64_t> want;
    for (char c : text) want.push_back(11 * c);
    EXPECT_EQ(load.tokens, want) << "the sum of ranks 0 and 2's reports";
    EXPECT_EQ(load.layers, 3);
    EXPECT_EQ(load.imbalance_sum, 4.75);
    EXPECT_EQ(coordinator->decoded_weight_bytes(), 1000 * static_cast<int64_t>(text.size()));
  }
  EXPECT_EQ(coordinator->expert_capacity(), 8u);
  coordinator->Post("bad");
  const absl::Status failed = coordinator->AwaitAll(deadline, absl::Seconds(5));
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.message(), "rank 1: bad request");
  stop = true;
  for (std::thread& t : ranks) t.join();
  EXPECT_FALSE(coordinator->Fits(1025));
  EXPECT_TRUE(coordinator->Fits(1024));
  EXPECT_TRUE(coordinator->Unlink().ok());
}

// A rank that opened the channel and then went silent (killed, stopped) is named once its
// heartbeat is older than the timeout; a slow rank that still beats hits the step deadline.
TEST(StepChannelTest, ASilentRankIsNamedAndASlowOneHitsTheDeadline) {
  absl::StatusOr<StepChannel> coordinator = StepChannel::Create(2, 64, 64);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<StepChannel> rank0 = StepChannel::Open(coordinator->name(), 0);
  absl::StatusOr<StepChannel> rank1 = StepChannel::Open(coordinator->name(), 1);
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  coordinator->Post("step");
  rank0->Finish(1, absl::OkStatus(), 0, 0, 0);
  const absl::Time start = absl::Now();
  absl::Status s = coordinator->AwaitAll(start + absl::Seconds(10), absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 1 stopped answering"), std::string::npos) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  std::atomic<bool> beating{true};
  std::thread heart([&] {
    while (beating) {
      rank1->Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  absl::SleepFor(absl::Milliseconds(60));  // the beat is fresh again
  s = coordinator->AwaitAll(absl::Now() + absl::Milliseconds(300), absl::Milliseconds(200));
  beating = false;
  heart.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("rank(s) 1"), std::string::npos) << s;
}

// A live rank still waiting (on a collective whose peer died) does not hide a silent later
// rank: the dead one is named within the heartbeat timeout, not once the live one gives up.
TEST(StepChannelTest, ASilentRankIsNamedWhileAnEarlierOneStillWorks) {
  absl::StatusOr<StepChannel> coordinator = StepChannel::Create(2, 64, 64);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<StepChannel> rank0 = StepChannel::Open(coordinator->name(), 0);
  absl::StatusOr<StepChannel> rank1 = StepChannel::Open(coordinator->name(), 1);
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  std::atomic<bool> beating{true};
  std::thread heart([&] {  // rank 0 lives, and never finishes the step
    while (beating) {
      rank0->Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  coordinator->Post("step");
  const absl::Time start = absl::Now();
  const absl::Status s =
      coordinator->AwaitAll(start + absl::Seconds(10), absl::Milliseconds(200));
  beating = false;
  heart.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 1 stopped answering"), std::string::npos) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

// A rank the coordinator knows is gone (MarkGone, from another thread: the launcher reaped it)
// is named at once, long before its heartbeat would have gone stale.
TEST(StepChannelTest, ARankMarkedGoneIsNamedAtOnce) {
  absl::StatusOr<StepChannel> coordinator = StepChannel::Create(2, 64, 64);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<StepChannel> rank0 = StepChannel::Open(coordinator->name(), 0);
  absl::StatusOr<StepChannel> rank1 = StepChannel::Open(coordinator->name(), 1);
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  rank0->Heartbeat();
  rank1->Heartbeat();
  coordinator->Post("step");
  rank0->Finish(1, absl::OkStatus(), 0, 0, 0);
  std::thread launcher([&] {
    absl::SleepFor(absl::Milliseconds(100));
    coordinator->MarkGone(1);
  });
  const absl::Time start = absl::Now();
  const absl::Status s = coordinator->AwaitAll(start + absl::Seconds(30), absl::Seconds(10));
  launcher.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("rank 1 stopped answering"), std::string::npos) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));  // the heartbeat timeout is 10 s
}

TEST(StepChannelTest, OpenRefusesAnotherSegmentAndARankOutsideTheWorld) {
  absl::StatusOr<StepChannel> coordinator = StepChannel::Create(2, 64, 64);
  ASSERT_TRUE(coordinator.ok());
  EXPECT_EQ(StepChannel::Open(coordinator->name(), 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StepChannel::Open("/tpserve-step-no-such-segment", 0).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpserve
