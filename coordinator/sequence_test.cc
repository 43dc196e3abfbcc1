#include "coordinator/sequence.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "coordinator/block_manager.h"
#include "coordinator/scheduler.h"
#include "coordinator/test_support.h"

namespace tpserve {
namespace {

struct SequenceRequest {
  std::vector<int32_t> prompt_ids;
  int32_t max_new_tokens = 16;
  std::vector<std::string> stop_sequences;
  bool ignore_eos = false;
};

std::shared_ptr<const AdmittedRequest> Admit(const SequenceRequest &r) {
  tpserve::v1::GenerateRequest proto;
  proto.mutable_token_ids()->mutable_ids()->Add(r.prompt_ids.begin(), r.prompt_ids.end());
  proto.set_max_new_tokens(r.max_new_tokens);
  for (const std::string &s : r.stop_sequences) proto.add_stop_sequences(s);
  proto.set_ignore_eos(r.ignore_eos);
  const Admitter door(/*tokenizer=*/nullptr, /*chat_template=*/nullptr, TestModelLimits(),
                      KvCapacity{/*num_blocks=*/64, /*block_size_tokens=*/4});
  absl::StatusOr<AdmittedRequest> admitted = door.Admit(proto, absl::InfiniteFuture());
  EXPECT_TRUE(admitted.ok()) << admitted.status();
  return std::make_shared<const AdmittedRequest>(*std::move(admitted));
}

class SequenceTest : public ::testing::Test {
 protected:
  std::unique_ptr<Sequence> Make(const SequenceRequest &r) {
    return std::make_unique<Sequence>(/*id=*/7, /*request_id=*/7, /*index=*/0, Admit(r),
                                      [](GenerationEvent) {}, &tokenizer_);
  }
  // Appends one token and returns the event it made.
  GenerationEvent Append(Sequence &seq, int32_t id) {
    GenerationEvent event;
    seq.Append(SampledToken{id, -0.5f, {}}, limits_, event);
    return event;
  }

  const Tokenizer tokenizer_ = ByteTokenizer();
  const std::vector<int32_t> eos_ = {kEos};
  SequenceLimits limits_{eos_, kTestContextLength};
};

TEST_F(SequenceTest, TheSchedulerReadsTheSequencesOwnList) {
  std::unique_ptr<Sequence> seq = Make({Bytes("abcdef")});
  BlockManager blocks(/*num_blocks=*/8, /*block_size_tokens=*/4);
  Scheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/16}, &blocks);
  ASSERT_TRUE(sched.Add(seq->id(), &seq->tokens()).ok());

  ScheduledStep step = sched.Schedule();
  ASSERT_EQ(step.batch.sequences.size(), 1u);
  EXPECT_EQ(step.batch.sequences[0].num_tokens, 6);
  sched.Commit(step.batch);
  // Appended once, to the sequence: the next step computes exactly that token at position 6.
  EXPECT_EQ(Append(*seq, 'g').text, "g");
  sched.TokenAppended(seq->id());
  EXPECT_EQ(seq->tokens(), Bytes("abcdefg"));

  step = sched.Schedule();
  ASSERT_EQ(step.batch.sequences.size(), 1u);
  const StepBatch::Sequence &s = step.batch.sequences[0];
  EXPECT_EQ(s.start_position, 6);
  ASSERT_EQ(s.num_tokens, 1);
  EXPECT_EQ(step.batch.tokens(s)[0], 'g');
  sched.Commit(step.batch);
  EXPECT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
}

TEST_F(SequenceTest, KoreanSplitAcrossByteTokensStreamsWholeCharacters) {
  std::unique_ptr<Sequence> seq = Make({Bytes("hi")});
  const std::vector<int32_t> han = Bytes("한");  // three bytes
  ASSERT_EQ(han.size(), 3u);
  GenerationEvent first = Append(*seq, han[0]);
  EXPECT_EQ(first.token_ids, std::vector<int32_t>{han[0]});
  EXPECT_EQ(first.text, "");
  EXPECT_EQ(Append(*seq, han[1]).text, "");
  EXPECT_EQ(Append(*seq, han[2]).text, "한");
  EXPECT_EQ(seq->num_generated(), 3);
  EXPECT_DOUBLE_EQ(seq->cumulative_logprob(), -1.5);
}

TEST_F(SequenceTest, AStopSequenceIsHeldBackThenMatched) {
  std::unique_ptr<Sequence> seq = Make({Bytes("hi"), 16, {"ab"}});
  EXPECT_EQ(Append(*seq, 'x').text, "x");
  GenerationEvent held = Append(*seq, 'a');
  EXPECT_EQ(held.text, "");  // may be the start of "ab"
  EXPECT_EQ(held.finish, FinishReason::kNone);
  GenerationEvent matched = Append(*seq, 'b');
  EXPECT_EQ(matched.finish, FinishReason::kStopSequence);
  EXPECT_EQ(matched.matched_stop_sequence, "ab");
  EXPECT_EQ(matched.text, "");
}

TEST_F(SequenceTest, EndsOnEosUnlessIgnoredAndOnMaxNewTokens) {
  std::unique_ptr<Sequence> seq = Make({Bytes("hi"), 3});
  GenerationEvent eos = Append(*seq, kEos);
  EXPECT_EQ(eos.finish, FinishReason::kEos);
  EXPECT_TRUE(eos.token_ids.empty());  // EOS is never streamed

  std::unique_ptr<Sequence> ignoring = Make({Bytes("hi"), 2, {}, /*ignore_eos=*/true});
  GenerationEvent kept = Append(*ignoring, kEos);
  EXPECT_EQ(kept.finish, FinishReason::kNone);
  EXPECT_EQ(kept.token_ids, std::vector<int32_t>{kEos});
  EXPECT_EQ(Append(*ignoring, 'z').finish,
            FinishReason::kLength);  // its 2nd of 2
}

TEST_F(SequenceTest, EndsAtTheContextLength) {
  std::unique_ptr<Sequence> seq = Make({Bytes("hi"), 16});
  limits_.context_length = 4;  // 2 prompt tokens + 2
  EXPECT_EQ(Append(*seq, 'a').finish, FinishReason::kNone);
  EXPECT_EQ(Append(*seq, 'b').finish, FinishReason::kLength);
}

TEST_F(SequenceTest, TheFinishEventFlushesHeldTextAndCountsUsage) {
  std::unique_ptr<Sequence> seq = Make({Bytes("hello"), 16, {"ab"}});
  seq->cached_tokens = 4;
  Append(*seq, 'x');
  Append(*seq, 'a');  // held: may start "ab"
  GenerationEvent last = seq->FinishEvent(FinishReason::kCancelled, absl::OkStatus(), "");
  EXPECT_EQ(last.finish, FinishReason::kCancelled);
  EXPECT_EQ(last.text, "a");
  EXPECT_EQ(last.usage.prompt_tokens, 5);
  EXPECT_EQ(last.usage.completion_tokens, 2);
  EXPECT_EQ(last.usage.cached_tokens, 4);
  EXPECT_DOUBLE_EQ(last.cumulative_logprob, -1.0);
  EXPECT_GE(last.usage.time_to_first_token_s, 0.0);

  // An error or a stop sequence sends nothing held.
  std::unique_ptr<Sequence> failed = Make({Bytes("hello"), 16, {"ab"}});
  Append(*failed, 'a');
  EXPECT_EQ(failed->FinishEvent(FinishReason::kError, absl::InternalError("x"), "").text, "");
}

}  // namespace
}  // namespace tpserve
