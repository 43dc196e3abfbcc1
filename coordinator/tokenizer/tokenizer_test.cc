#include "coordinator/tokenizer/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "coordinator/tokenizer/test_vocab.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tokenizer MakeTokenizer(TokenizerData data = MakeTestTokenizerData()) {
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Create(std::move(data));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return *std::move(tokenizer);
}

std::vector<int32_t> BytesOf(std::string_view text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(ByteId(static_cast<unsigned char>(c)));
  return ids;
}

TEST(TokenizerTest, EncodesWithMerges) {
  const Tokenizer tok = MakeTokenizer();
  EXPECT_EQ(tok.vocab_size(), kTestVocabSize);
  EXPECT_THAT(*tok.Encode("hello world"), ElementsAre(kTestHello, kTestSpaceWorld));
  EXPECT_THAT(*tok.Encode("\xEC\x95\x88"), ElementsAre(kTestAn));
  EXPECT_TRUE(tok.Encode("")->empty());
}

TEST(TokenizerTest, ControlTokenTextIsPlainUnlessAllowed) {
  const Tokenizer tok = MakeTokenizer();
  // Plain text goes through the pre-tokenizer: "<|", "im", "_", "end", "|>" -> single bytes.
  EXPECT_EQ(*tok.Encode("<|im_end|>"), BytesOf("<|im_end|>"));
  EXPECT_THAT(*tok.Encode("<|im_end|>", {.allow_special = true}), ElementsAre(kTestImEnd));
  std::vector<int32_t> expected = {kTestHello, kTestImStart};
  expected.insert(expected.end(), {kTestSpaceWorld});
  EXPECT_EQ(*tok.Encode("hello<|im_start|> world", {.allow_special = true}), expected);
}

TEST(TokenizerTest, UserDefinedTokensAlwaysMatch) {
  const Tokenizer tok = MakeTokenizer();
  EXPECT_THAT(*tok.Encode("hello<tool>"), ElementsAre(kTestHello, kTestTool));
}

TEST(TokenizerTest, AddBosNeedsABosToken) {
  TokenizerData data = MakeTestTokenizerData();
  const Tokenizer without_bos = MakeTokenizer(data);
  absl::StatusOr<std::vector<int32_t>> ids = without_bos.Encode("hello", {.add_bos = true});
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kFailedPrecondition);
  data.bos_id = kTestImStart;
  const Tokenizer with_bos = MakeTokenizer(data);
  EXPECT_THAT(*with_bos.Encode("hello", {.add_bos = true}), ElementsAre(kTestImStart, kTestHello));
}

TEST(TokenizerTest, InvalidUtf8IsEncodedAsByteTokensAndRoundTrips) {
  const Tokenizer tok = MakeTokenizer();
  const std::string text = "\xFFhello\xEC\x95";  // a stray byte and a cut-off 안
  absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(ByteId(0xFF), kTestHello, ByteId(0xEC), ByteId(0x95)));
  EXPECT_EQ(*tok.Decode(*ids), text);
}

TEST(TokenizerTest, DecodeRoundTripsEveryByte) {
  const Tokenizer tok = MakeTokenizer();
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte) all_bytes.push_back(static_cast<char>(byte));
  for (const std::string& text : {all_bytes, std::string("hello <|im_end|> world\r\n\t")}) {
    absl::StatusOr<std::vector<int32_t>> ids = tok.Encode(text);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*tok.Decode(*ids), text);
  }
}

TEST(TokenizerTest, DecodeControlTokensOrSkipThem) {
  const Tokenizer tok = MakeTokenizer();
  const std::vector<int32_t> ids = {kTestImStart, kTestHello, kTestImEnd, kTestTool};
  EXPECT_EQ(*tok.Decode(ids), "<|im_start|>hello<|im_end|><tool>");
  EXPECT_EQ(*tok.Decode(ids, {.skip_control = true}), "hello<tool>");
}

TEST(TokenizerTest, DecodeRejectsUnknownIds) {
  const Tokenizer tok = MakeTokenizer();
  absl::StatusOr<std::string> text = tok.Decode({kTestHello, 271});
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("token id 271 at position 1"));
  EXPECT_THAT(text.status().message(), HasSubstr("[0, 271)"));
  EXPECT_EQ(tok.Decode({-1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tok.TokenBytes(5000).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerTest, SpecialTokenLookup) {
  const Tokenizer tok = MakeTokenizer();
  EXPECT_EQ(tok.SpecialTokenId("<|im_end|>"), kTestImEnd);
  EXPECT_EQ(tok.SpecialTokenId("<tool>"), kTestTool);
  EXPECT_EQ(tok.SpecialTokenId("hello"), std::nullopt);
}

TEST(TokenizerTest, CreateRejectsInconsistentData) {
  TokenizerData sizes = MakeTestTokenizerData();
  sizes.token_types.pop_back();
  EXPECT_THAT(Tokenizer::Create(sizes).status().message(),
              HasSubstr("token_types has 270 entries but tokens has 271"));

  TokenizerData alphabet = MakeTestTokenizerData();
  alphabet.tokens[5] = "\xE2\x82\xAC";  // '€' is not a byte-level symbol
  absl::StatusOr<Tokenizer> bad_token = Tokenizer::Create(alphabet);
  EXPECT_EQ(bad_token.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_token.status().message(), HasSubstr("tokens[5]"));

  TokenizerData bos = MakeTestTokenizerData();
  bos.bos_id = 271;
  EXPECT_THAT(Tokenizer::Create(bos).status().message(),
              HasSubstr("bos_id = 271 is outside the vocabulary [0, 271)"));

  TokenizerData byte_token = MakeTestTokenizerData();
  byte_token.token_types[5] = TokenType::kByte;
  EXPECT_THAT(Tokenizer::Create(byte_token).status().message(),
              HasSubstr("tokens[5] '\xC4\x81' has type byte but is not of the form <0xHH>"));
}

Tokenizer MakeSpmTokenizer(bool add_space_prefix) {
  return MakeTokenizer(MakeTestSpmTokenizerData(add_space_prefix));
}

std::vector<int32_t> SpmBytesOf(std::string_view text) {
  std::vector<int32_t> ids;
  for (const char c : text) ids.push_back(SpmByteId(static_cast<unsigned char>(c)));
  return ids;
}

TEST(TokenizerSpmTest, MergesByScoreWithByteFallback) {
  const Tokenizer tok = MakeSpmTokenizer(/*add_space_prefix=*/false);
  EXPECT_EQ(tok.model(), TokenizerModel::kSpm);
  EXPECT_EQ(tok.vocab_size(), kSpmVocabSize);
  EXPECT_THAT(*tok.Encode("abc"), ElementsAre(kSpmAB, kSpmC));
  EXPECT_THAT(*tok.Encode("aaa"), ElementsAre(kSpmAA, kSpmA));  // tie: the leftmost pair
  EXPECT_THAT(*tok.Encode("a hi"), ElementsAre(kSpmA, kSpmSpaceHI));
  EXPECT_THAT(*tok.Encode("\xEC\x95\x88"), ElementsAre(kSpmAn));
  // "한" (ED 95 9C) is no token: its bytes.
  EXPECT_EQ(*tok.Encode("\xED\x95\x9C"), SpmBytesOf("\xED\x95\x9C"));
  EXPECT_TRUE(tok.Encode("")->empty());
  EXPECT_EQ(*tok.Decode(*tok.Encode("a hi")), "a hi");
  EXPECT_EQ(*tok.TokenBytes(kSpmSpaceHI), " hi");
  EXPECT_EQ(*tok.TokenBytes(SpmByteId(0xED)), "\xED");
}

TEST(TokenizerSpmTest, SpacePrefixGoesBeforeTextAfterAnySpecialToken) {
  const Tokenizer tok = MakeSpmTokenizer(/*add_space_prefix=*/true);
  EXPECT_THAT(*tok.Encode("hi"), ElementsAre(kSpmSpaceHI));
  EXPECT_THAT(*tok.Encode("a hi"), ElementsAre(kSpmSpaceA, kSpmSpaceHI));
  EXPECT_THAT(*tok.Encode("<start_of_turn>hi<end_of_turn>", {.allow_special = true}),
              ElementsAre(kSpmStartOfTurn, kSpmSpaceHI, kSpmEndOfTurn));
  // The user-defined "\n" is always split out, and counts as special for the prefix.
  EXPECT_THAT(*tok.Encode("hi\nhi"), ElementsAre(kSpmSpaceHI, kSpmNewline, kSpmSpaceHI));
  EXPECT_THAT(*tok.Encode("hi", {.add_bos = true}), ElementsAre(kSpmBos, kSpmSpaceHI));
}

TEST(TokenizerSpmTest, DecodeDropsTheLeadingSpaceOfTheFirstTokenOnly) {
  const Tokenizer tok = MakeSpmTokenizer(/*add_space_prefix=*/true);
  EXPECT_EQ(*tok.Decode({kSpmSpaceA, kSpmSpaceHI}), "a hi");
  // A control token first takes the drop (llama.cpp's detokenize): the space stays.
  EXPECT_EQ(*tok.Decode({kSpmStartOfTurn, kSpmSpaceHI, kSpmEndOfTurn}),
            "<start_of_turn> hi<end_of_turn>");
  EXPECT_EQ(*tok.Decode({kSpmStartOfTurn, kSpmSpaceHI, kSpmEndOfTurn}, {.skip_control = true}),
            " hi");
  EXPECT_EQ(*tok.DecodedPiece(kSpmSpaceHI, 0), "hi");
  EXPECT_EQ(*tok.DecodedPiece(kSpmSpaceHI, 1), " hi");
  // Without add_space_prefix nothing is dropped.
  EXPECT_EQ(*MakeSpmTokenizer(false).Decode({kSpmSpaceHI}), " hi");
}

TEST(TokenizerSpmTest, ControlAndUnknownTokenTextIsPlainUnlessAllowed) {
  const Tokenizer tok = MakeSpmTokenizer(/*add_space_prefix=*/false);
  EXPECT_EQ(*tok.Encode("<unk>"), SpmBytesOf("<unk>"));
  EXPECT_THAT(*tok.Encode("<unk>", {.allow_special = true}), ElementsAre(kSpmUnk));
  EXPECT_EQ(*tok.Encode("</s>"), SpmBytesOf("</s>"));
  EXPECT_EQ(tok.SpecialTokenId("<end_of_turn>"), kSpmEndOfTurn);
}

TEST(TokenizerSpmTest, CreateRejectsBadScores) {
  TokenizerData short_scores = MakeTestSpmTokenizerData(false);
  short_scores.scores.pop_back();
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(short_scores);
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(),
              HasSubstr("SPM: scores has 274 entries but the vocabulary has 275"));

  TokenizerData byte_token = MakeTestSpmTokenizerData(false);
  byte_token.tokens[SpmByteId(7)] = "<0x7>";
  EXPECT_THAT(Tokenizer::Create(byte_token).status().message(),
              HasSubstr("tokens[13] '<0x7>' has type byte but is not of the form <0xHH>"));
}

}  // namespace
}  // namespace tpserve
