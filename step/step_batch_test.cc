#include "step/step_batch.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "step/step_batch_proto.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

StepBatch PrefillAndDecode() {
  StepBatch b;
  b.Add(/*seq_id=*/9, /*start_position=*/41, std::vector<int32_t>{5}, {3, 4, 8}, 1);
  b.Add(/*seq_id=*/7, /*start_position=*/16, std::vector<int32_t>{10, 11, 12}, {0, 2}, 0);
  b.Add(/*seq_id=*/8, /*start_position=*/0, std::vector<int32_t>{20, 21}, {6}, 2);
  return b;
}

TEST(StepBatchTest, AddTilesTheTokensInOrder) {
  const StepBatch b = PrefillAndDecode();
  EXPECT_THAT(b.token_ids, ElementsAre(5, 10, 11, 12, 20, 21));
  ASSERT_EQ(b.sequences.size(), 3u);
  EXPECT_EQ(b.sequences[1].first_token, 1);
  EXPECT_EQ(b.sequences[2].first_token, 4);
  EXPECT_THAT(b.tokens(b.sequences[1]), ElementsAre(10, 11, 12));
  EXPECT_EQ(b.sequences[1].end_position(), 19);
  EXPECT_EQ(b.num_tokens(), 6);
  EXPECT_EQ(b.num_logit_rows(), 1 + 0 + 2);
  EXPECT_TRUE(b.CheckShape().ok());
}

TEST(StepBatchTest, ProtoRoundTripKeepsEveryField) {
  const StepBatch b = PrefillAndDecode();
  const auto req = ToProto(b, /*step_id=*/12);
  EXPECT_EQ(req.step_id(), 12);
  ASSERT_EQ(req.chunks_size(), 3);
  EXPECT_THAT(req.chunks(1).token_ids(), ElementsAre(10, 11, 12));
  EXPECT_EQ(req.chunks(2).num_logits(), 2);
  absl::StatusOr<StepBatch> back = FromProto(req);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->token_ids, b.token_ids);
  ASSERT_EQ(back->sequences.size(), b.sequences.size());
  for (size_t i = 0; i < b.sequences.size(); ++i) {
    EXPECT_EQ(back->sequences[i].seq_id, b.sequences[i].seq_id) << i;
    EXPECT_EQ(back->sequences[i].first_token, b.sequences[i].first_token) << i;
    EXPECT_EQ(back->sequences[i].num_tokens, b.sequences[i].num_tokens) << i;
    EXPECT_EQ(back->sequences[i].start_position, b.sequences[i].start_position) << i;
    EXPECT_EQ(back->sequences[i].num_logits, b.sequences[i].num_logits) << i;
    EXPECT_EQ(back->sequences[i].block_table, b.sequences[i].block_table) << i;
    EXPECT_EQ(back->sequences[i].attention_rank, -1) << i;
  }
  // Data-parallel attention's ranks travel too (rank 0 included, an explicit field).
  StepBatch ranked = PrefillAndDecode();
  for (size_t i = 0; i < ranked.sequences.size(); ++i) {
    ranked.sequences[i].attention_rank = static_cast<int32_t>(i / 2);  // 0, 0, 1
  }
  back = FromProto(ToProto(ranked, 13));
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < ranked.sequences.size(); ++i) {
    EXPECT_EQ(back->sequences[i].attention_rank, ranked.sequences[i].attention_rank) << i;
  }
}

TEST(StepBatchTest, FromProtoRefusesABatchNoSchedulerMakes) {
  auto req = ToProto(PrefillAndDecode(), 1);
  req.mutable_chunks(2)->set_num_logits(3);  // more rows than its 2 tokens
  absl::Status s = FromProto(req).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("sequence 2: num_logits = 3 is outside [0, num_tokens = 2]"));

  req = ToProto(PrefillAndDecode(), 1);
  req.mutable_chunks(0)->clear_token_ids();
  s = FromProto(req).status();
  EXPECT_THAT(s.message(), HasSubstr("sequence 0: num_tokens = 0, needs at least 1"));

  req = ToProto(PrefillAndDecode(), 1);
  req.mutable_chunks(1)->set_start_position(-2);
  EXPECT_THAT(FromProto(req).status().message(),
              HasSubstr("sequence 1: start_position = -2 is negative"));
}

TEST(StepBatchTest, CheckShapeKeepsEachAttentionRanksSequencesTogether) {
  StepBatch b = PrefillAndDecode();
  for (StepBatch::Sequence& s : b.sequences) s.attention_rank = 1;
  EXPECT_TRUE(b.CheckShape().ok()) << b.CheckShape();
  b.sequences[2].attention_rank = 0;  // rank 1's run, then rank 0's
  EXPECT_THAT(b.CheckShape().message(),
              HasSubstr("sequence 2: attention_rank = 0 after 1 (every sequence names a rank "
                        "or none does, in rank order)"));
  b.sequences[2].attention_rank = -1;  // one without a rank among ranked ones
  EXPECT_THAT(b.CheckShape().message(), HasSubstr("sequence 2: attention_rank = -1 after 1"));
  b = PrefillAndDecode();
  for (StepBatch::Sequence& s : b.sequences) s.attention_rank = -3;
  EXPECT_THAT(b.CheckShape().message(), HasSubstr("sequence 0: attention_rank = -3 is below -1"));
}

TEST(StepBatchTest, CheckShapeNamesASequenceOutOfOrder) {
  StepBatch b = PrefillAndDecode();
  b.sequences[2].first_token = 3;
  EXPECT_THAT(b.CheckShape().message(),
              HasSubstr("sequence 2: first_token = 3, expected 4"));
  b = PrefillAndDecode();
  b.token_ids.push_back(99);
  EXPECT_THAT(b.CheckShape().message(), HasSubstr("the sequences cover 6 tokens, token_ids has 7"));
}


// Pipeline micro-batches: whole sequences in order, each part about its share of the tokens,
// every field carried, rows from 0, and the parts' logit rows adding up to the batch's.
TEST(StepBatchTest, MicroBatchesCutBetweenSequencesByTokens) {
  StepBatch b;
  b.Add(/*seq_id=*/1, 0, std::vector<int32_t>{1, 2, 3, 4, 5, 6}, {0}, 6);
  b.Add(/*seq_id=*/2, 9, std::vector<int32_t>{7}, {1, 2});
  b.Add(/*seq_id=*/3, 4, std::vector<int32_t>{8}, {3}).num_drafts = 0;
  b.Add(/*seq_id=*/4, 2, std::vector<int32_t>{9, 10}, {4}, 2).samples = true;
  const std::vector<StepBatch> two = MicroBatches(b, 2);
  ASSERT_EQ(two.size(), 2u);
  // 10 tokens: the 6-token prompt is half on its own.
  ASSERT_EQ(two[0].sequences.size(), 1u);
  EXPECT_EQ(two[0].token_ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  ASSERT_EQ(two[1].sequences.size(), 3u);
  EXPECT_EQ(two[1].token_ids, (std::vector<int32_t>{7, 8, 9, 10}));
  const StepBatch::Sequence& last = two[1].sequences[2];
  EXPECT_EQ(last.seq_id, 4);
  EXPECT_EQ(last.first_token, 2);
  EXPECT_EQ(last.start_position, 2);
  EXPECT_EQ(last.num_logits, 2);
  EXPECT_TRUE(last.samples);
  EXPECT_EQ(two[1].sequences[0].block_table, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(two[0].num_logit_rows() + two[1].num_logit_rows(), b.num_logit_rows());
  for (const StepBatch& part : two) EXPECT_TRUE(part.CheckShape().ok()) << part.CheckShape();
  // More parts than sequences: one each; every part gets a sequence.
  const std::vector<StepBatch> many = MicroBatches(b, 9);
  ASSERT_EQ(many.size(), 4u);
  for (size_t i = 0; i < many.size(); ++i) {
    ASSERT_EQ(many[i].sequences.size(), 1u);
    EXPECT_EQ(many[i].sequences[0].seq_id, static_cast<int64_t>(i + 1));
  }
  // Four parts of four sequences, even when the first holds most tokens.
  EXPECT_EQ(MicroBatches(b, 4).size(), 4u);
  ASSERT_EQ(MicroBatches(b, 1).size(), 1u);
  EXPECT_EQ(MicroBatches(b, 1)[0].token_ids, b.token_ids);
}

}  // namespace
}  // namespace tpserve
