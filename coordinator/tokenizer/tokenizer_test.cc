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

}  // namespace
}  // namespace tpserve
