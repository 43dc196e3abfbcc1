#include "coordinator/tokenizer/incremental_detokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "coordinator/tokenizer/test_vocab.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;

Tokenizer MakeTokenizer() {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Create(MakeTestTokenizerData());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

std::vector<std::string> PushAll(IncrementalDetokenizer& detok, const std::vector<int32_t>& ids) {
  std::vector<std::string> chunks;
  for (const int32_t id : ids) {
    absl::StatusOr<std::string> chunk = detok.Push(id);
    EXPECT_TRUE(chunk.ok()) << chunk.status();
    chunks.push_back(*chunk);
  }
  return chunks;
}

TEST(IncrementalDetokenizerTest, HoldsBackASplitKoreanSyllable) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok);
  // 안 = EC 95 88 arriving as three byte tokens, then "hello".
  EXPECT_THAT(PushAll(detok, {ByteId(0xEC), ByteId(0x95), ByteId(0x88), kTestHello}),
              ElementsAre("", "", "\xEC\x95\x88", "hello"));
  EXPECT_EQ(detok.pending_bytes(), 0u);
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, TokenEndingMidCharacter) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok);
  // "hello" + EC | 95 88 + "hello": the first chunk must stop before EC.
  EXPECT_THAT(PushAll(detok, {kTestHello, ByteId(0xEC), ByteId(0x95), ByteId(0x88)}),
              ElementsAre("hello", "", "", "\xEC\x95\x88"));
}

TEST(IncrementalDetokenizerTest, NeverCompletableBytesBecomeReplacementAtOnce) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok);
  EXPECT_THAT(PushAll(detok, {ByteId(0xFF), ByteId(0xEC), kTestHello}),
              ElementsAre("\xEF\xBF\xBD", "", "\xEF\xBF\xBDhello"));
}

TEST(IncrementalDetokenizerTest, FlushReplacesAnUnfinishedTail) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok);
  EXPECT_THAT(PushAll(detok, {kTestHello, ByteId(0xEC), ByteId(0x95)}),
              ElementsAre("hello", "", ""));
  EXPECT_EQ(detok.pending_bytes(), 2u);
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(IncrementalDetokenizerTest, UnknownIdLeavesStateAlone) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok);
  ASSERT_TRUE(detok.Push(ByteId(0xEC)).ok());
  EXPECT_EQ(detok.Push(kTestVocabSize).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(detok.pending_bytes(), 1u);
}

TEST(IncrementalDetokenizerTest, SkipsControlTokensWhenAsked) {
  const Tokenizer tok = MakeTokenizer();
  IncrementalDetokenizer detok(&tok, {.skip_control = true});
  EXPECT_THAT(PushAll(detok, {kTestImStart, kTestHello, kTestImEnd}), ElementsAre("", "hello", ""));
}

TEST(IncrementalDetokenizerTest, ByteByByteStreamingEqualsDecode) {
  const Tokenizer tok = MakeTokenizer();
  // Every token a single byte: the worst case for splitting characters.
  const std::string text = "hello 안녕하세요 👨‍👩‍👧‍👦 👍🏽 日本語 é";
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(ByteId(static_cast<unsigned char>(c)));
  IncrementalDetokenizer detok(&tok);
  std::string streamed;
  for (const std::string& chunk : PushAll(detok, ids)) {
    EXPECT_TRUE(IsValidUtf8(chunk));
    streamed += chunk;
  }
  streamed += detok.Flush();
  EXPECT_EQ(streamed, text);
}

TEST(IncrementalDetokenizerTest, SpmByteFallbackKoreanNeverEmitsPartialCharacters) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(MakeTestSpmTokenizerData(false));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "한" (ED 95 9C) arrives as three byte tokens, then "안" as one token.
  const std::vector<int32_t> ids = {SpmByteId(0xED), SpmByteId(0x95), SpmByteId(0x9C), kSpmAn};
  ASSERT_EQ(*tok->Encode("\xED\x95\x9C\xEC\x95\x88"), ids);
  IncrementalDetokenizer detok(&*tok);
  EXPECT_THAT(PushAll(detok, ids), ElementsAre("", "", "\xED\x95\x9C", "\xEC\x95\x88"));
  EXPECT_EQ(detok.Flush(), "");
}

TEST(IncrementalDetokenizerTest, SpmStreamDropsTheSameLeadingSpaceAsDecode) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(MakeTestSpmTokenizerData(true));
  ASSERT_TRUE(tok.ok()) << tok.status();
  IncrementalDetokenizer detok(&*tok);
  EXPECT_THAT(PushAll(detok, {kSpmSpaceHI, kSpmSpaceHI}), ElementsAre("hi", " hi"));
  EXPECT_EQ(*tok->Decode({kSpmSpaceHI, kSpmSpaceHI}), "hi hi");
  // Flush starts a new sequence.
  EXPECT_EQ(detok.Flush(), "");
  EXPECT_THAT(PushAll(detok, {kSpmSpaceA}), ElementsAre("a"));
}

}  // namespace
}  // namespace tpserve
