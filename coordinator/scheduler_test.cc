#include "coordinator/scheduler.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tpserve {
namespace {

// "id:start+n" for each sequence of the batch ("*" when it wants a row of logits to sample
// from, "*k" when it wants k rows), then "!id" for each preemption: a whole step in one string.
std::string Describe(const ScheduledStep& step) {
  std::string out;
  for (const StepBatch::Sequence& s : step.batch.sequences) {
    out += std::to_string(s.seq_id) + ":" + std::to_string(s.start_position) + "+" +
           std::to_string(s.num_tokens) +
           (s.num_logits == 0   ? " "
            : s.num_logits == 1 ? "* "
                                : "*" + std::to_string(s.num_logits) + " ");
  }
  for (int64_t id : step.preempted) out += "!" + std::to_string(id) + " ";
  return out;
}

// A prompt of `n` tokens that no other sequence's prompt shares a block with.
std::vector<int32_t> Prompt(int64_t seq_id, int64_t n) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(seq_id * 1000 + i));
  return ids;
}

// The scheduler with its sequences' token lists, owned here as the engine's Sequences own
// theirs (coordinator/sequence.h): the scheduler reads each list, which only grows by
// AppendToken (an append, then Scheduler::TokenAppended).
class ListedScheduler : public Scheduler {
 public:
  using Scheduler::Scheduler;

  absl::Status Add(int64_t seq_id, std::vector<int32_t> prompt_ids, bool score_prompt = false) {
    lists_.push_back(std::make_unique<std::vector<int32_t>>(std::move(prompt_ids)));
    absl::Status added = Scheduler::Add(seq_id, lists_.back().get(), score_prompt);
    if (added.ok()) by_id_[seq_id] = lists_.back().get();
    return added;
  }
  void AppendToken(int64_t seq_id, int32_t token_id) {
    by_id_.at(seq_id)->push_back(token_id);
    TokenAppended(seq_id);
  }

 private:
  std::vector<std::unique_ptr<std::vector<int32_t>>> lists_;
  std::map<int64_t, std::vector<int32_t>*> by_id_;
};

// Runs one step the way the engine does: every chunk that completes its known tokens samples
// one (token 7, always). `known` counts each sequence's tokens (the test adds its prompts);
// absent: every chunk with a row samples.
std::string Step(ListedScheduler& sched, const BlockManager& blocks,
                 std::map<int64_t, int64_t>* known = nullptr) {
  ScheduledStep step = sched.Schedule();
  EXPECT_TRUE(step.batch.CheckShape().ok());
  sched.Commit(step.batch);
  for (const StepBatch::Sequence& s : step.batch.sequences) {
    // The batch says which sequences sample (StepBatch::Sequence::samples); the test's own
    // count of known tokens must agree.
    const bool samples =
        s.num_logits > 0 && (known == nullptr || s.end_position() == (*known)[s.seq_id]);
    EXPECT_EQ(s.samples, samples) << "sequence " << s.seq_id;
    EXPECT_EQ(s.num_drafts, 0) << "sequence " << s.seq_id;
    if (!samples) continue;
    sched.AppendToken(s.seq_id, 7);
    if (known != nullptr) ++(*known)[s.seq_id];
  }
  EXPECT_EQ(blocks.num_free_blocks() + blocks.num_used_blocks(), blocks.num_blocks());
  return Describe(step);
}

TEST(Scheduler, ChunkedPrefillThenBatchedDecode) {
  BlockManager blocks(/*num_blocks=*/32, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/8, /*max_tokens_per_step=*/8}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 10)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 3)).ok());
  const std::vector<std::string> expected = {
      "1:0+8 ",            // prompt 1 chunked by the 8-token budget
      "1:8+2* 2:0+3* ",    // rest of prompt 1, all of prompt 2: both sample
      "1:10+1* 2:3+1* ",   // decode both
      "1:11+1* 2:4+1* ",
  };
  for (size_t step = 0; step < expected.size(); ++step) {
    EXPECT_EQ(Step(sched, blocks), expected[step]) << "step " << step;
  }
  EXPECT_EQ(blocks.NumTokens(1), 12);
  EXPECT_EQ(blocks.NumTokens(2), 5);
  // ceil(12 / 4) + ceil(5 / 4) blocks in the tables, the other 27 free.
  EXPECT_EQ(blocks.num_used_blocks(), 3 + 2);
  EXPECT_EQ(blocks.num_free_blocks(), 32 - 5);
  sched.Remove(1);
  sched.Remove(2);
  EXPECT_EQ(blocks.num_used_blocks(), 0);
  EXPECT_EQ(blocks.num_free_blocks(), 32);
  EXPECT_TRUE(sched.Empty());
}

TEST(Scheduler, OneTokenChunksLeadTheStep) {
  // Sequence 1 is admitted first and still chunks its long prompt when sequences 2 (a one-token
  // prompt) and 3 are admitted behind it: the one-token chunk moves to the front, the others
  // keep their order.
  BlockManager blocks(64, 4);
  ListedScheduler sched({8, 8}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 20)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 1)).ok());
  ASSERT_TRUE(sched.Add(3, Prompt(3, 2)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+8 ");
  EXPECT_EQ(Step(sched, blocks), "1:8+8 ");
  EXPECT_EQ(Step(sched, blocks), "2:0+1* 1:16+4* 3:0+2* ");
  EXPECT_EQ(Step(sched, blocks), "1:20+1* 2:1+1* 3:2+1* ");
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndRecomputesIt) {
  // 4 blocks of 2 tokens = 8 token slots. Two prompts of 3 tokens take 2 blocks each.
  BlockManager blocks(4, 2);
  ListedScheduler sched({8, 16}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 3)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 3)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+3* 2:0+3* ");
  EXPECT_EQ(Step(sched, blocks), "1:3+1* 2:3+1* ");  // 4 tokens each still fit in 2 blocks
  // Token 5 of each needs a third block each: only seq 1 can grow; seq 2 is preempted. Its two
  // full blocks stay cached (evictable, tail first), and seq 1's third block evicts the tail.
  EXPECT_EQ(Step(sched, blocks), "1:4+1* !2 ");
  EXPECT_EQ(sched.num_waiting(), 1u);
  EXPECT_EQ(blocks.num_cached_blocks(), 1);
  sched.Remove(1);  // seq 1 finishes
  // Seq 2 comes back, finds its first block still cached and recomputes the other 3 of its 5
  // known tokens (3 prompt + 2 generated).
  ScheduledStep step = sched.Schedule();
  EXPECT_EQ(Describe(step), "2:2+3* ");
  ASSERT_EQ(step.admitted.size(), 1u);
  EXPECT_EQ(step.admitted[0].seq_id, 2);
  EXPECT_EQ(step.admitted[0].num_cached_tokens, 2);
  // The batch carries the tokens it recomputes: prompt token 2, then the two generated (7).
  EXPECT_EQ(step.batch.token_ids, (std::vector<int32_t>{2002, 7, 7}));
}

TEST(Scheduler, PreemptedSequenceRecomputesEverythingWithoutThePrefixCache) {
  BlockManager blocks(4, 2, /*enable_prefix_caching=*/false);
  ListedScheduler sched({8, 16}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 3)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 3)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+3* 2:0+3* ");
  EXPECT_EQ(Step(sched, blocks), "1:3+1* 2:3+1* ");
  EXPECT_EQ(Step(sched, blocks), "1:4+1* !2 ");
  EXPECT_EQ(blocks.num_cached_blocks(), 0);
  sched.Remove(1);
  EXPECT_EQ(Step(sched, blocks), "2:0+5* ");
}

TEST(Scheduler, SecondSequenceWithTheSamePromptStartsAfterTheCachedBlocks) {
  BlockManager blocks(/*num_blocks=*/32, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/8, /*max_tokens_per_step=*/64}, &blocks);
  const std::vector<int32_t> prompt = Prompt(1, 10);  // 2 full blocks + 2 tokens
  ASSERT_TRUE(sched.Add(1, prompt).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+10* ");
  ASSERT_TRUE(sched.Add(2, prompt).ok());
  ScheduledStep step = sched.Schedule();
  EXPECT_EQ(Describe(step), "1:10+1* 2:8+2* ");  // seq 2 computes only the partial tail block
  ASSERT_EQ(step.admitted.size(), 1u);
  EXPECT_EQ(step.admitted[0].seq_id, 2);
  EXPECT_EQ(step.admitted[0].num_cached_tokens, 8);
  const std::vector<int32_t>& t1 = blocks.BlockTable(1);
  const std::vector<int32_t>& t2 = blocks.BlockTable(2);
  EXPECT_EQ(step.batch.sequences[0].block_table, t1);
  EXPECT_EQ(step.batch.sequences[1].block_table, t2);
  EXPECT_EQ(step.batch.token_ids, (std::vector<int32_t>{7, 1008, 1009}));
  ASSERT_EQ(t1.size(), 3u);
  ASSERT_EQ(t2.size(), 3u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_NE(t2[2], t1[2]);  // the partial block is private
  EXPECT_EQ(blocks.RefCount(t1[0]), 2);
  EXPECT_EQ(blocks.num_used_blocks(), 4);  // 2 shared + 2 private tails
  EXPECT_EQ(blocks.num_free_blocks(), 32 - 4);
  sched.Commit(step.batch);
  sched.Remove(1);
  sched.Remove(2);
  EXPECT_EQ(blocks.num_free_blocks(), 32);
  EXPECT_EQ(blocks.num_cached_blocks(), 2);
}

TEST(Scheduler, WaitingQueueIsFifoAndRespectsMaxNumSeqs) {
  BlockManager blocks(100, 4);
  ListedScheduler sched({/*max_num_seqs=*/2, 64}, &blocks);
  for (int64_t id = 1; id <= 3; ++id) ASSERT_TRUE(sched.Add(id, Prompt(id, 2)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+2* 2:0+2* ");
  EXPECT_EQ(Step(sched, blocks), "1:2+1* 2:2+1* ");
  sched.Remove(2);
  EXPECT_EQ(Step(sched, blocks), "1:3+1* 3:0+2* ");
}

TEST(Scheduler, RejectsDuplicatesEmptyPromptsAndPromptsLargerThanTheCache) {
  BlockManager blocks(2, 4);
  ListedScheduler sched({}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 4)).ok());
  EXPECT_EQ(sched.Add(1, Prompt(1, 4)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(sched.Add(2, Prompt(2, 0)).message(), "sequence 2 has 0 tokens, needs at least 1");
  absl::Status s = sched.Add(3, Prompt(3, 9));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "sequence 3 needs 3 KV blocks, the cache has 2");
}

TEST(Scheduler, CancelledWaitingSequenceLeavesNoTrace) {
  BlockManager blocks(8, 4);
  ListedScheduler sched({1, 64}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 4)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 4)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+4* ");
  sched.Remove(2);  // cancelled while waiting
  sched.Remove(1);  // cancelled while running
  EXPECT_TRUE(sched.Empty());
  EXPECT_EQ(blocks.num_free_blocks(), 8);
  EXPECT_EQ(Step(sched, blocks), "");
}

// Prompt scoring: a row per prompt token, once; cut to the step's rows, a row left for each
// running sequence; never taken from the prefix cache.
TEST(Scheduler, ScoredPromptWantsARowPerTokenWithinTheRowBudget) {
  BlockManager blocks(/*num_blocks=*/32, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/16, /*max_logit_rows=*/4},
                        &blocks);
  std::map<int64_t, int64_t> known = {{1, 3}, {2, 9}};
  ASSERT_TRUE(sched.Add(1, Prompt(1, 3)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 9), /*score_prompt=*/true).ok());
  const std::vector<std::string> expected = {
      "1:0+3* 2:0+3*3 ",  // 1 takes its row, 2 the three left (positions 0-2)
      "1:3+1* 2:3+3*3 ",  // 1 decodes (a row kept for it), 2 scores 3-5
      "1:4+1* 2:6+3*3 ",  // 2's last chunk: rows for 6 and 7, and 8's to sample from
      "1:5+1* 2:9+1* ",   // both decode
  };
  for (const std::string& e : expected) EXPECT_EQ(Step(sched, blocks, &known), e);
}

TEST(Scheduler, ScoredPromptSkipsTheCacheAndIsNotScoredTwiceAfterPreemption) {
  BlockManager blocks(/*num_blocks=*/6, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/8, /*max_logit_rows=*/8},
                        &blocks);
  // Sequence 1 computes and caches the prompt's full blocks and finishes.
  ASSERT_TRUE(sched.Add(1, Prompt(1, 9)).ok());
  EXPECT_EQ(Step(sched, blocks), "1:0+8 ");
  EXPECT_EQ(Step(sched, blocks), "1:8+1* ");
  sched.Remove(1);
  // The same prompt, scored: computed from position 0, every row wanted.
  ASSERT_TRUE(sched.Add(2, Prompt(1, 9), /*score_prompt=*/true).ok());
  ScheduledStep first = sched.Schedule();
  ASSERT_EQ(first.admitted.size(), 1u);
  EXPECT_EQ(first.admitted[0].num_cached_tokens, 0);
  EXPECT_EQ(Describe(first), "2:0+8*8 ");
}

TEST(Scheduler, ScoredPromptIsNotScoredTwiceAfterPreemption) {
  BlockManager blocks(/*num_blocks=*/6, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/16, /*max_logit_rows=*/8},
                        &blocks);
  std::map<int64_t, int64_t> known = {{3, 12}, {2, 9}};
  ASSERT_TRUE(sched.Add(3, Prompt(3, 12)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 9), /*score_prompt=*/true).ok());
  EXPECT_EQ(Step(sched, blocks, &known), "3:0+12* 2:0+4*4 ");  // 2 scored positions 0-3
  EXPECT_EQ(Step(sched, blocks, &known), "3:12+1* !2 ");       // 3 grows: 2 makes room
  EXPECT_EQ(Step(sched, blocks, &known), "3:13+1* ");          // 2 waits for blocks
  sched.Remove(3);
  // Recomputed from 0 (nothing from the cache while scoring), rows from position 4 on only.
  EXPECT_EQ(Step(sched, blocks, &known), "2:0+9*5 ");
  EXPECT_EQ(Step(sched, blocks, &known), "2:9+1* ");
}

// Proposes `script` tokens for every slot (cut to max_tokens), wanting `want` of them.
class ScriptedDrafts {
 public:
  ScriptedDrafts(int64_t want, std::vector<int32_t> script) : want_(want), script_(script) {}
  int64_t WantedDraftTokens(int64_t, int64_t num_decoding) {
    last_num_decoding = num_decoding;
    return want_;
  }
  void Propose(absl::Span<DraftSlot> slots) {
    for (DraftSlot& slot : slots) {
      max_tokens[slot.seq_id] = slot.max_tokens;
      // The table already covers the known tokens and every draft it may propose.
      covered[slot.seq_id] = static_cast<int64_t>(slot.block_table.size());
      slot.draft = script_;
    }
  }
  int64_t last_num_decoding = 0;
  std::map<int64_t, int64_t> max_tokens, covered;

 private:
  int64_t want_;
  std::vector<int32_t> script_;
};

// A step with drafts, as the engine makes it: Plan, the drafts each decoding sequence wants,
// the proposer's tokens for the room it got, Finish.
ScheduledStep ScheduleWith(ListedScheduler& sched, ScriptedDrafts& drafts) {
  PlannedStep plan = sched.Plan();
  std::vector<int64_t> wanted;
  for (int64_t id : plan.decoding) {
    wanted.push_back(drafts.WantedDraftTokens(id, static_cast<int64_t>(plan.decoding.size())));
  }
  std::vector<DraftSlot> slots = sched.ReserveDrafts(plan, wanted);
  if (!slots.empty()) drafts.Propose(absl::MakeSpan(slots));
  return sched.Finish(std::move(plan), absl::MakeSpan(slots));
}

// Blocks the sequence's table holds, counted from the table, against what its tokens need.
void ExpectBlocksMatch(const BlockManager& blocks, int64_t seq_id, int64_t needed_tokens) {
  EXPECT_EQ(static_cast<int64_t>(blocks.BlockTable(seq_id).size()),
            blocks.BlocksFor(needed_tokens)) << "sequence " << seq_id;
  EXPECT_EQ(blocks.num_free_blocks() + blocks.num_used_blocks(), blocks.num_blocks());
}

TEST(SchedulerDrafts, AcceptedDraftsKeepTheirKvAndRejectedOnesGiveItBack) {
  BlockManager blocks(/*num_blocks=*/16, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/64, /*max_logit_rows=*/64},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 6)).ok());
  ScriptedDrafts drafts(/*want=*/5, {11, 12, 13, 14, 15});
  EXPECT_EQ(Describe(ScheduleWith(sched, drafts)), "1:0+6* ");  // a prompt chunk never drafts
  // (Scheduled but not yet committed: commit the prompt and sample token 10.)
  StepBatch prompt;
  prompt.Add(1, 0, Prompt(1, 6), blocks.BlockTable(1));
  sched.Commit(prompt);
  sched.AppendToken(1, 10);
  ExpectBlocksMatch(blocks, 1, 6);

  // Decode token 10 with five drafts: six rows, room for positions 6..11.
  ScheduledStep step = ScheduleWith(sched, drafts);
  EXPECT_EQ(Describe(step), "1:6+6*6 ");
  EXPECT_EQ(std::vector<int32_t>(step.batch.token_ids.begin(), step.batch.token_ids.end()),
            (std::vector<int32_t>{10, 11, 12, 13, 14, 15}));
  EXPECT_TRUE(step.batch.sequences[0].samples);  // the batch says so: nothing works it out again
  EXPECT_EQ(step.batch.sequences[0].num_drafts, 5);
  EXPECT_EQ(drafts.max_tokens[1], 5);
  EXPECT_EQ(drafts.covered[1], blocks.BlocksFor(12));
  EXPECT_EQ(drafts.last_num_decoding, 1);
  sched.Commit(step.batch);
  EXPECT_EQ(sched.PendingDraft(1).size(), 5u);
  ExpectBlocksMatch(blocks, 1, 12);  // the drafts' blocks are held until settled

  // The model agrees with 11 and 12, then says 20: 13..15's KV is dropped.
  sched.AppendToken(1, 11);
  sched.AppendToken(1, 12);
  EXPECT_EQ(sched.PendingDraft(1).size(), 3u);
  sched.AppendToken(1, 20);
  EXPECT_TRUE(sched.PendingDraft(1).empty());
  // Known: 6 prompt + 10, 11, 12, 20 = 10 tokens, of which 9 are computed (20 is not).
  ExpectBlocksMatch(blocks, 1, 9);
  // The next step computes 20 at position 9: the accepted drafts are not recomputed.
  EXPECT_EQ(Describe(sched.Schedule()), "1:9+1* ");
}

TEST(SchedulerDrafts, AllAcceptedThenTheBonusTokenDecodesNext) {
  BlockManager blocks(/*num_blocks=*/16, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/64, /*max_logit_rows=*/64},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 3)).ok());
  ScriptedDrafts drafts(/*want=*/3, {21, 22, 23});
  Step(sched, blocks);  // prompt; samples 7
  ScheduledStep step = ScheduleWith(sched, drafts);
  EXPECT_EQ(Describe(step), "1:3+4*4 ");
  sched.Commit(step.batch);
  for (int32_t t : {21, 22, 23, 30}) sched.AppendToken(1, t);  // all three, then the bonus
  ExpectBlocksMatch(blocks, 1, 7);
  EXPECT_EQ(Describe(sched.Schedule()), "1:7+1* ");
}

TEST(SchedulerDrafts, DraftsTakeOnlyWhatIsSpare) {
  // Two sequences; 6 blocks of 4 tokens. Drafts never preempt and never take a block that a
  // running sequence needs for its own decode token.
  BlockManager blocks(/*num_blocks=*/6, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/64, /*max_logit_rows=*/64},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 8)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 8)).ok());
  Step(sched, blocks);  // both prompts: 4 blocks, both sample
  ScriptedDrafts drafts(/*want=*/8, {1, 2, 3, 4, 5, 6, 7, 8});
  ScheduledStep step = ScheduleWith(sched, drafts);
  // Each decode token needs a new block (positions 8): 2 blocks, none spare for drafts beyond
  // those blocks' 3 other slots each.
  EXPECT_EQ(Describe(step), "1:8+4*4 2:8+4*4 ");
  EXPECT_TRUE(step.preempted.empty());
  EXPECT_EQ(drafts.last_num_decoding, 2);
  EXPECT_EQ(blocks.num_free_blocks(), 0);
}

TEST(SchedulerDrafts, TokenBudgetAndRowsBoundTheDrafts) {
  BlockManager blocks(/*num_blocks=*/64, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/2, /*max_tokens_per_step=*/6, /*max_logit_rows=*/5},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 2)).ok());
  ASSERT_TRUE(sched.Add(2, Prompt(2, 2)).ok());
  Step(sched, blocks);
  ScriptedDrafts drafts(/*want=*/4, {1, 2, 3, 4});
  // 2 decode tokens leave 4 of the budget but 3 of the rows: the first takes all 3 (and,
  // a multi-token chunk now, goes after the plain decode).
  EXPECT_EQ(Describe(ScheduleWith(sched, drafts)), "2:2+1* 1:2+4*4 ");
}

TEST(SchedulerDrafts, FewerDraftsThanRoomGiveTheRestBack) {
  BlockManager blocks(/*num_blocks=*/64, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/16, /*max_logit_rows=*/64},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 5)).ok());
  Step(sched, blocks);
  ASSERT_TRUE(sched.Add(2, Prompt(2, 12)).ok());
  ScriptedDrafts drafts(/*want=*/8, {1});  // asks for 8, proposes 1
  // The 7 unused tokens of budget go to the waiting prompt (16 - 2 = 14 >= 12).
  EXPECT_EQ(Describe(ScheduleWith(sched, drafts)), "1:5+2*2 2:0+12* ");
  ExpectBlocksMatch(blocks, 1, 7);
}

TEST(SchedulerDrafts, StaleDraftsAreDroppedByTheNextSchedule) {
  BlockManager blocks(/*num_blocks=*/16, /*block_size_tokens=*/4);
  ListedScheduler sched({/*max_num_seqs=*/4, /*max_tokens_per_step=*/64, /*max_logit_rows=*/64},
                        &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 4)).ok());
  Step(sched, blocks);
  ScriptedDrafts drafts(/*want=*/6, {1, 2, 3, 4, 5, 6});
  ScheduledStep step = ScheduleWith(sched, drafts);
  sched.Commit(step.batch);
  sched.AppendToken(1, 1);  // one accepted; the engine then stopped reading the rows
  EXPECT_EQ(sched.PendingDraft(1).size(), 5u);
  ExpectBlocksMatch(blocks, 1, 11);
  EXPECT_EQ(Describe(sched.Schedule()), "");  // nothing known is left to compute
  EXPECT_TRUE(sched.PendingDraft(1).empty());
  ExpectBlocksMatch(blocks, 1, 6);
}

// Data-parallel attention: sequences spread over the partitions (the one running fewest first),
// the batch names each one's rank, its blocks numbered in that rank's cache, and each rank's
// sequences form one run in rank order; a sequence that cannot grow preempts the newest of its
// own partition, not the newest overall.
TEST(Scheduler, PartitionsSpreadSequencesAndPreemptWithinOne) {
  BlockManager blocks(/*num_blocks=*/8, /*block_size_tokens=*/4, true, /*num_partitions=*/2);
  ListedScheduler sched({/*max_num_seqs=*/8, /*max_tokens_per_step=*/64}, &blocks);
  ASSERT_TRUE(sched.Add(1, Prompt(1, 8)).ok());  // 2 blocks
  ASSERT_TRUE(sched.Add(2, Prompt(2, 8)).ok());  // 2 blocks
  ASSERT_TRUE(sched.Add(3, Prompt(3, 8)).ok());  // 2 blocks
  ASSERT_TRUE(sched.Add(4, Prompt(4, 3)).ok());  // 1 block, its first decode too
  ScheduledStep step = sched.Schedule();
  ASSERT_TRUE(step.batch.CheckShape().ok()) << step.batch.CheckShape();
  // 1 -> partition 0 (a tie: the first), 2 -> 1 (fewer running), 3 -> 0 (a tie), 4 -> 1.
  std::map<int64_t, int32_t> rank;
  std::vector<int64_t> order;
  for (const StepBatch::Sequence& s : step.batch.sequences) {
    rank[s.seq_id] = s.attention_rank;
    order.push_back(s.seq_id);
    for (int32_t b : s.block_table) EXPECT_LT(b, 4) << "seq " << s.seq_id << ": local ids";
  }
  EXPECT_EQ(rank, (std::map<int64_t, int32_t>{{1, 0}, {2, 1}, {3, 0}, {4, 1}}));
  EXPECT_EQ(order, (std::vector<int64_t>{1, 3, 2, 4}));  // rank 0's run, then rank 1's
  sched.Commit(step.batch);
  for (int64_t id : {1, 2, 3, 4}) sched.AppendToken(id, 7);
  ASSERT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
  // Partition 0 is full (1 and 3 hold 2 blocks each) and 1 needs a third: it preempts 3, the
  // newest of its partition, and not 4, the newest overall, whose blocks are partition 1's.
  step = sched.Schedule();
  EXPECT_EQ(step.preempted, (std::vector<int64_t>{3}));
  ASSERT_TRUE(step.batch.CheckShape().ok()) << step.batch.CheckShape();
  std::map<int64_t, int32_t> decoding;
  for (const StepBatch::Sequence& s : step.batch.sequences) decoding[s.seq_id] = s.attention_rank;
  EXPECT_EQ(decoding, (std::map<int64_t, int32_t>{{1, 0}, {2, 1}, {4, 1}}));
  sched.Commit(step.batch);
  ASSERT_TRUE(sched.CheckBlocks().ok()) << sched.CheckBlocks();
  // A prompt longer than one partition is refused up front, naming the rank's cache.
  const absl::Status big = sched.Add(9, Prompt(9, 17));
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("one rank's cache (data-parallel attention) has 4"),
            std::string::npos)
      << big;
}

}  // namespace
}  // namespace tpserve
