#include "coordinator/tokenizer/pre_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace tpserve {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> SplitWith(PreTokenizerKind kind, std::string_view text) {
  absl::StatusOr<PreTokenizer> pre = PreTokenizer::Create(kind);
  EXPECT_TRUE(pre.ok()) << pre.status();
  std::vector<std::string_view> pieces;
  EXPECT_TRUE(pre->Split(text, &pieces).ok());
  std::string joined;
  for (std::string_view piece : pieces) joined += piece;
  EXPECT_EQ(joined, text) << "pieces must cover the input exactly";
  return std::vector<std::string>(pieces.begin(), pieces.end());
}

TEST(PreTokenizerTest, Gpt2KeepsDigitRunsAndLeadingSpaces) {
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2, "Hello world 42"),
              ElementsAre("Hello", " world", " 42"));
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2, "a   b"), ElementsAre("a", "  ", " b"));
  // Contractions are lowercase only.
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2, "I'M it's"),
              ElementsAre("I", "'", "M", " it", "'s"));
}

TEST(PreTokenizerTest, SmolLmSplitsEveryDigitFirst) {
  // The digit stage cuts "Hello world " off, so its trailing space stands alone.
  EXPECT_THAT(SplitWith(PreTokenizerKind::kSmolLm, "Hello world 42"),
              ElementsAre("Hello", " world", " ", "4", "2"));
  EXPECT_THAT(SplitWith(PreTokenizerKind::kSmolLm, "x１２"), ElementsAre("x", "１", "２"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndIgnoresCaseInContractions) {
  EXPECT_THAT(SplitWith(PreTokenizerKind::kLlama3, "Hello world 12345"),
              ElementsAre("Hello", " world", " ", "123", "45"));
  EXPECT_THAT(SplitWith(PreTokenizerKind::kLlama3, "I'M"), ElementsAre("I", "'M"));
  EXPECT_THAT(SplitWith(PreTokenizerKind::kLlama3, "x\n\n\ny"), ElementsAre("x", "\n\n\n", "y"));
  EXPECT_THAT(SplitWith(PreTokenizerKind::kLlama3, "(hi)"), ElementsAre("(hi", ")"));
}

TEST(PreTokenizerTest, WhiteSpaceIsUnicodeWhiteSpaceNotPcreHorizontalSpace) {
  // U+180E left White_Space in Unicode 6.3 (llama.cpp, HF agree); PCRE2's \s still has it.
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2, "!\xE1\xA0\x8E"), ElementsAre("!\xE1\xA0\x8E"));
  // U+3000 is White_Space, but only an ASCII space may lead a word.
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2,
                        "a\xE3\x80\x80\xE3\x80\x80"
                        "b"),
              ElementsAre("a", "\xE3\x80\x80", "\xE3\x80\x80", "b"));
}

TEST(PreTokenizerTest, InvalidUtf8BytesBecomeTheirOwnPieces) {
  EXPECT_THAT(SplitWith(PreTokenizerKind::kSmolLm,
                        "ab\xFF"
                        "cd\xEC\x95"),
              ElementsAre("ab", "\xFF", "cd", "\xEC", "\x95"));
}

TEST(PreTokenizerTest, NamesMapToKinds) {
  EXPECT_EQ(*PreTokenizerKindFromName("smollm"), PreTokenizerKind::kSmolLm);
  EXPECT_EQ(*PreTokenizerKindFromName("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerKindFromName("default"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(*PreTokenizerKindFromName("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*PreTokenizerKindFromName("deepseek-r1-qwen"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*PreTokenizerKindFromName("tekken"), PreTokenizerKind::kTekken);
  absl::StatusOr<PreTokenizerKind> unknown = PreTokenizerKindFromName("deepseek-coder");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(unknown.status().message().find("'deepseek-coder'"), std::string::npos);
}

TEST(PreTokenizerTest, Qwen2SplitsEveryDigit) {
  EXPECT_THAT(SplitWith(PreTokenizerKind::kQwen2, "abc 12345 I'm\n\n  x"),
              ElementsAre("abc", " ", "1", "2", "3", "4", "5", " I", "'m", "\n\n", " ", " x"));
  // Llama 3 keeps runs of up to three digits; Qwen2 does not.
  EXPECT_THAT(SplitWith(PreTokenizerKind::kLlama3, "12345"), ElementsAre("123", "45"));
}

TEST(PreTokenizerTest, TekkenSplitsAtAsciiCaseChanges) {
  EXPECT_THAT(SplitWith(PreTokenizerKind::kTekken, "HelloWorld ABCdef \xC3\x89" "coleX 12/3"),
              ElementsAre("Hello", "World", " ABCdef", " \xC3\x89" "cole", "X", " ", "1", "2",
                          "/", "3"));
}

TEST(PreTokenizerTest, LongRunsWithoutSpacesStayOnePiece) {
  const std::string letters(200 * 1024, 'a');
  EXPECT_EQ(SplitWith(PreTokenizerKind::kLlama3, letters).size(), 1u);
  std::string spaces(100 * 1024, ' ');
  spaces += "x";
  EXPECT_THAT(SplitWith(PreTokenizerKind::kGpt2, spaces),
              ElementsAre(std::string(100 * 1024 - 1, ' '), " x"));
}

}  // namespace
}  // namespace tpserve
