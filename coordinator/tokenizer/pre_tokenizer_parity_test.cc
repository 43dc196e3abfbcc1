// The pre-tokenizers of the families beyond Llama against llama.cpp: byte-level BPE with
// tokenizer.ggml.pre = "qwen2" (Qwen2/2.5/3) and "tekken" (Mistral Nemo and later), on tiny
// vocabulary-only GGUFs whose merges cross every boundary the regexes draw, over the Gemma 3
// parity corpus plus strings where the two regexes differ (tests/golden/tokenizer/
// make_pre_tokenizer_golden.py, llama-cpp-python 0.3.36): the same ids, and decoding gives the
// text back.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "coordinator/tokenizer/gguf_tokenizer.h"
#include "coordinator/tokenizer/golden_corpus.h"
#include "formats/gguf.h"

namespace tpserve {
namespace {

class PreTokenizerParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PreTokenizerParityTest, IdsEqualLlamaCppsAndDecodeRoundTrips) {
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::Open(GoldenPath("pre_" + GetParam() + ".gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(**gguf);
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::vector<GoldenRow>> rows =
      ReadGoldenRows(GoldenPath("pre_" + GetParam() + "_llamacpp.jsonl"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_GT(rows->size(), 2700u);
  int mismatches = 0;
  for (const GoldenRow& row : *rows) {
    absl::StatusOr<std::vector<int32_t>> ids = tok->Encode(row.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    if (*ids != row.ids && ++mismatches <= 5) {
      ADD_FAILURE() << GetParam() << ": ids differ from llama.cpp's for \"" << row.text << "\"";
    }
    EXPECT_EQ(*tok->Decode(row.ids), row.text);
  }
  EXPECT_EQ(mismatches, 0) << GetParam();
}

// The goldens do tell the two apart: "HelloWorld" is one piece to Qwen2's regex, two to
// tekken's, and the merges cross that boundary.
TEST(PreTokenizerParityTest, TheTwoPreTokenizersSplitCamelCaseDifferently) {
  absl::StatusOr<std::vector<GoldenRow>> qwen2 =
      ReadGoldenRows(GoldenPath("pre_qwen2_llamacpp.jsonl"));
  absl::StatusOr<std::vector<GoldenRow>> tekken =
      ReadGoldenRows(GoldenPath("pre_tekken_llamacpp.jsonl"));
  ASSERT_TRUE(qwen2.ok() && tekken.ok());
  ASSERT_EQ(qwen2->size(), tekken->size());
  int differ = 0;
  for (size_t i = 0; i < qwen2->size(); ++i) differ += (*qwen2)[i].ids != (*tekken)[i].ids;
  EXPECT_GE(differ, 3);
}

INSTANTIATE_TEST_SUITE_P(Pre, PreTokenizerParityTest, ::testing::Values("qwen2", "tekken"));

}  // namespace
}  // namespace tpserve
