#include "coordinator/tokenizer/spm_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ids: 0 "a", 1 "b", 2 "c", 3 "ab" (score -1), 4 "bc" (-2), 5 "abc" (-3), 6 "▁", 7 "▁a" (-0.5),
// 8 "<0x41>" ('A'), 9 "<0xC3>", 10 "<0xA9>" (the two bytes of 'é').
SpmModel MakeModel() {
  const std::vector<std::string> texts = {
      "a", "b", "c", "ab", "bc", "abc", "\xE2\x96\x81", "\xE2\x96\x81" "a",
      "<0x41>", "<0xC3>", "<0xA9>"};
  const std::vector<float> scores = {-5, -5, -5, -1, -2, -3, -4, -0.5, 0, 0, 0};
  absl::StatusOr<SpmModel> model = SpmModel::Create(texts, scores);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

std::vector<int32_t> Encode(const SpmModel& model, std::string_view text, bool prefix = false) {
  std::vector<int32_t> ids;
  model.EncodeFragment(text, prefix, &ids);
  return ids;
}

TEST(SpmModelTest, HighestScoreMergesFirstAndMergedPairsKeepMerging) {
  const SpmModel model = MakeModel();
  // "ab" (-1) beats "bc" (-2); then "ab"+"c" forms "abc" (-3).
  EXPECT_THAT(Encode(model, "abc"), ElementsAre(5));
  EXPECT_THAT(Encode(model, "bc"), ElementsAre(4));
  EXPECT_THAT(Encode(model, "cab"), ElementsAre(2, 3));
}

TEST(SpmModelTest, SpacesBecomeU2581AndThePrefixIsOptional) {
  const SpmModel model = MakeModel();
  EXPECT_THAT(Encode(model, "a"), ElementsAre(0));
  EXPECT_THAT(Encode(model, "a", /*prefix=*/true), ElementsAre(7));
  EXPECT_THAT(Encode(model, "b a"), ElementsAre(1, 7));
  EXPECT_THAT(Encode(model, "  "), ElementsAre(6, 6));
}

TEST(SpmModelTest, UnknownCharactersFallBackToByteTokens) {
  const SpmModel model = MakeModel();
  EXPECT_THAT(Encode(model, "A"), ElementsAre(8));
  EXPECT_THAT(Encode(model, "\xC3\xA9" "a"), ElementsAre(9, 10, 0));
  // A byte with neither "<0xXX>" nor a one-byte entry is dropped.
  EXPECT_THAT(Encode(model, "Za"), ElementsAre(0));
}

TEST(SpmModelTest, InvalidUtf8IsCutByLeadByteLengthAsLlamaCppDoes) {
  const SpmModel model = MakeModel();
  // 0xC3 claims two bytes, so "\xC3" "a" is one symbol, no entry: it falls back byte by byte
  // ('a' has no "<0x61>", so its one-byte entry "a"), and "ab" is never formed.
  EXPECT_THAT(Encode(model, "\xC3" "ab"), ElementsAre(9, 0, 1));
  // A lone continuation byte is a symbol of its own.
  EXPECT_THAT(Encode(model, "\xA9" "ab"), ElementsAre(10, 3));
}

TEST(SpmModelTest, TokenIdFindsAnyEntry) {
  const SpmModel model = MakeModel();
  EXPECT_EQ(model.TokenId("bc"), 4);
  EXPECT_EQ(model.TokenId("cb"), -1);
}

TEST(SpmModelTest, RejectsMismatchedScoresAndNaN) {
  absl::StatusOr<SpmModel> short_scores = SpmModel::Create({"a", "b"}, {0});
  ASSERT_FALSE(short_scores.ok());
  EXPECT_EQ(short_scores.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_scores.status().message(),
              HasSubstr("scores has 1 entries but the vocabulary has 2"));
  absl::StatusOr<SpmModel> nan = SpmModel::Create({"a", "b"}, {0, std::nanf("")});
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("scores[1] is NaN"));
}

TEST(SpmModelTest, LongRunsStayFast) {
  const SpmModel model = MakeModel();
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "abc";
  const std::vector<int32_t> ids = Encode(model, text);
  ASSERT_EQ(ids.size(), 50000u);
  EXPECT_EQ(ids.front(), 5);
  EXPECT_EQ(ids.back(), 5);
}

}  // namespace
}  // namespace tpserve
