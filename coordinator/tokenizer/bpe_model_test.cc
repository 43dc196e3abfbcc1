#include "coordinator/tokenizer/bpe_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using Merges = std::vector<std::pair<std::string, std::string>>;

// Tokens: the 256 single bytes (id = byte value), then `extra` in order from id 256.
std::vector<std::string> ByteVocab(const std::vector<std::string>& extra) {
  std::vector<std::string> tokens;
  for (int byte = 0; byte < 256; ++byte) tokens.push_back(std::string(1, static_cast<char>(byte)));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  return tokens;
}

std::vector<int32_t> Encode(const BpeModel& bpe, std::string_view piece) {
  std::vector<int32_t> ids;
  bpe.EncodePiece(piece, &ids);
  return ids;
}

TEST(BpeModelTest, AppliesLowestRankFirst) {
  // ab=256 abc=257 bc=258
  absl::StatusOr<BpeModel> bpe = BpeModel::Create(
      ByteVocab({"ab", "abc", "bc"}), Merges{{"a", "b"}, {"ab", "c"}, {"b", "c"}}, false);
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_THAT(Encode(*bpe, "abc"), ElementsAre(257));
  // (a,b) outranks (b,c) although (b,c) comes first in the text.
  EXPECT_THAT(Encode(*bpe, "bcab"), ElementsAre(258, 256));
  EXPECT_THAT(Encode(*bpe, "xbc"), ElementsAre('x', 258));
  EXPECT_THAT(Encode(*bpe, "z"), ElementsAre('z'));
}

TEST(BpeModelTest, EqualRanksMergeLeftmostFirst) {
  absl::StatusOr<BpeModel> bpe = BpeModel::Create(ByteVocab({"aa"}), Merges{{"a", "a"}}, false);
  ASSERT_TRUE(bpe.ok());
  EXPECT_THAT(Encode(*bpe, "aaa"), ElementsAre(256, 'a'));
  EXPECT_THAT(Encode(*bpe, "aaaa"), ElementsAre(256, 256));
}

TEST(BpeModelTest, MergeResultsOutsideTheVocabularyFallBackToBytes) {
  // "xy" is no token but a step towards "xyz" (=256).
  absl::StatusOr<BpeModel> bpe =
      BpeModel::Create(ByteVocab({"xyz"}), Merges{{"x", "y"}, {"xy", "z"}}, false);
  ASSERT_TRUE(bpe.ok());
  EXPECT_THAT(Encode(*bpe, "xyz"), ElementsAre(256));
  EXPECT_THAT(Encode(*bpe, "xyx"), ElementsAre('x', 'y', 'x'));
}

TEST(BpeModelTest, IgnoreMergesEmitsWholeTokens) {
  const auto vocab = ByteVocab({"hello"});
  absl::StatusOr<BpeModel> plain = BpeModel::Create(vocab, Merges{}, false);
  absl::StatusOr<BpeModel> llama3 = BpeModel::Create(vocab, Merges{}, true);
  ASSERT_TRUE(plain.ok() && llama3.ok());
  EXPECT_THAT(Encode(*plain, "hello"), ElementsAre('h', 'e', 'l', 'l', 'o'));
  EXPECT_THAT(Encode(*llama3, "hello"), ElementsAre(256));
  EXPECT_EQ(llama3->TokenId("hello"), 256);
  EXPECT_EQ(llama3->TokenId("hell"), -1);
}

TEST(BpeModelTest, RejectsEmptyMergeSide) {
  absl::StatusOr<BpeModel> bpe =
      BpeModel::Create(ByteVocab({}), Merges{{"a", "b"}, {"", "c"}}, false);
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bpe.status().message().find("merge rank 1 has an empty left side"), std::string::npos)
      << bpe.status();
}

TEST(BpeModelTest, LongPieceIsNotQuadratic) {
  // 200 KiB of 'a': 102400 "aa", then 51200 "aaaa". A quadratic merge loop would need ~10^10
  // steps and blow the small-test timeout.
  absl::StatusOr<BpeModel> bpe =
      BpeModel::Create(ByteVocab({"aa", "aaaa"}), Merges{{"a", "a"}, {"aa", "aa"}}, false);
  ASSERT_TRUE(bpe.ok());
  const std::vector<int32_t> ids = Encode(*bpe, std::string(200 * 1024, 'a'));
  ASSERT_EQ(ids.size(), 51200u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 257), 51200);
}

}  // namespace
}  // namespace tpserve
