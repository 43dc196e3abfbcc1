// The tokenizer on the real Gemma 3 270M GGUF (a SentencePiece vocabulary: tokenizer.ggml.model
// "llama", 262,144 tokens, byte fallback, no space prefix) against llama.cpp's ids and
// detokenized text for the whole corpus in tests/golden/tokenizer/gemma3_llamacpp.jsonl (written
// by make_gemma3_tokenizer_golden.py). Needs the model file, which scripts/setup.sh fetches next
// to the bundled SmolLM2; skips, saying so, when it is absent.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/tokenizer/gguf_tokenizer.h"
#include "coordinator/tokenizer/golden_corpus.h"
#include "coordinator/tokenizer/incremental_detokenizer.h"
#include "coordinator/tokenizer/utf8.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;

constexpr char kGemma3File[] = "gemma-3-270m-q4_k_m.gguf";

// Beside the bundled model: the one place the model directory is spelled is bundled_model.cc.
std::string Gemma3Path() {
  return (std::filesystem::path(BundledModelExpectedPath()).parent_path() / kGemma3File).string();
}

class Gemma3ParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(Gemma3Path(), ec)) return;  // SetUp skips
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(Gemma3Path());
    if (!gguf.ok()) {
      load_error_ = new std::string(gguf.status().message());
      return;
    }
    absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(**gguf);
    if (!tok.ok()) {
      load_error_ = new std::string(tok.status().message());
      return;
    }
    tokenizer_ = new Tokenizer(*std::move(tok));
  }

  void SetUp() override {
    if (tokenizer_ == nullptr && load_error_ == nullptr) {
      GTEST_SKIP() << Gemma3Path() << " is missing: run scripts/setup.sh (or set "
                   << "TPSERVE_MODEL_DIR) to check the tokenizer against llama.cpp on Gemma 3";
    }
    ASSERT_EQ(load_error_, nullptr) << *load_error_;
    absl::StatusOr<std::vector<GoldenRow>> rows =
        ReadGoldenRows(GoldenPath("gemma3_llamacpp.jsonl"));
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_GE(rows->size(), 3000u);
    rows_ = *std::move(rows);
  }

  static Tokenizer* tokenizer_;
  static std::string* load_error_;
  std::vector<GoldenRow> rows_;
};

Tokenizer* Gemma3ParityTest::tokenizer_ = nullptr;
std::string* Gemma3ParityTest::load_error_ = nullptr;

TEST_F(Gemma3ParityTest, ModelMetadata) {
  EXPECT_EQ(tokenizer_->model(), TokenizerModel::kSpm);
  EXPECT_EQ(tokenizer_->vocab_size(), 262144);
  EXPECT_EQ(tokenizer_->bos_id(), 2);
  EXPECT_EQ(tokenizer_->eos_id(), 1);
  EXPECT_EQ(tokenizer_->unk_id(), 3);
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_TRUE(tokenizer_->add_bos_by_default());
  EXPECT_FALSE(tokenizer_->add_space_prefix());
  EXPECT_EQ(tokenizer_->SpecialTokenId("<start_of_turn>"), 105);
  EXPECT_EQ(tokenizer_->SpecialTokenId("<end_of_turn>"), 106);
  EXPECT_EQ(*tokenizer_->GetTokenType(106), TokenType::kControl);
  EXPECT_EQ(*tokenizer_->GetTokenType(107), TokenType::kUserDefined);  // "\n"
}

TEST_F(Gemma3ParityTest, IdsMatchLlamaCppOnTheWholeCorpus) {
  int specials = 0;
  int not_utf8 = 0;
  for (const GoldenRow& row : rows_) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(row.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, row.ids) << "text: " << row.text;
    not_utf8 += IsValidUtf8(row.text) ? 0 : 1;
    if (row.ids_special.has_value()) {
      ++specials;
      EXPECT_EQ(*tokenizer_->Encode(row.text, {.allow_special = true}), *row.ids_special)
          << "text (special parsed): " << row.text;
    }
  }
  EXPECT_GE(specials, 20);
  EXPECT_GE(not_utf8, 300);
}

TEST_F(Gemma3ParityTest, DecodeMatchesLlamaCppDetokenize) {
  int differing = 0;
  for (const GoldenRow& row : rows_) {
    differing += row.decoded.has_value() ? 1 : 0;
    EXPECT_EQ(*tokenizer_->Decode(row.ids), row.decoded.value_or(row.text))
        << "text: " << row.text;
  }
  // U+2581 typed in the input, and spaces inside broken UTF-8, do not round-trip in llama.cpp.
  EXPECT_GE(differing, 3);
}

TEST_F(Gemma3ParityTest, StreamingNeverEmitsPartialUtf8) {
  for (const GoldenRow& row : rows_) {
    absl::StatusOr<std::string> streamed = StreamIds(*tokenizer_, row.ids);
    ASSERT_TRUE(streamed.ok()) << streamed.status() << " text: " << row.text;
    const std::string decoded = *tokenizer_->Decode(row.ids);
    if (IsValidUtf8(decoded)) EXPECT_EQ(*streamed, decoded);
  }
}

TEST_F(Gemma3ParityTest, KoreanByteFallbackStreamsWholeCharacters) {
  // "똠" (EB 98 A0) is not in Gemma's vocabulary: three byte tokens, as llama.cpp gives.
  const std::vector<int32_t> ids = *tokenizer_->Encode("\xEB\x98\xA0\xEB\xB7\x81");  // "똠뷁"
  EXPECT_THAT(ids, ElementsAre(473, 390, 398, 249207));
  IncrementalDetokenizer detok(tokenizer_);
  std::vector<std::string> chunks;
  for (const int32_t id : ids) chunks.push_back(*detok.Push(id));
  EXPECT_THAT(chunks, ElementsAre("", "", "\xEB\x98\xA0", "\xEB\xB7\x81"));
}

TEST_F(Gemma3ParityTest, ChatTurnMarkersAreSpecialOnlyWhenAllowed) {
  const std::string turn = "<start_of_turn>user\nHi<end_of_turn>\n";
  const std::vector<int32_t> ids = *tokenizer_->Encode(turn, {.allow_special = true});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 105);
  EXPECT_EQ(ids[ids.size() - 2], 106);
  EXPECT_EQ(ids.back(), 107);
  EXPECT_EQ(*tokenizer_->Decode(ids), turn);
  EXPECT_EQ(*tokenizer_->Decode(ids, {.skip_control = true}), "user\nHi\n");
  const std::vector<int32_t> plain = *tokenizer_->Encode(turn);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 106), 0);
}

}  // namespace
}  // namespace tpserve
