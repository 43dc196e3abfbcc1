// The tokenizer on the real SmolLM2-135M-Instruct GGUF against llama.cpp's ids for the whole
// golden corpus (tests/golden/tokenizer/smollm2_llamacpp.jsonl) and the SmolLM2 chat
// renderings (chat_golden.json). Needs the model file; see scripts/setup.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "coordinator/chat/chat_template.h"
#include "coordinator/tokenizer/gguf_tokenizer.h"
#include "coordinator/tokenizer/golden_corpus.h"
#include "coordinator/tokenizer/incremental_detokenizer.h"
#include "coordinator/tokenizer/utf8.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

class LlamaCppParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const absl::StatusOr<std::string> path = BundledModelPath();
    if (!path.ok()) {
      load_error_ = new std::string(path.status().message());
      return;
    }
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::Open(*path);
    if (!gguf.ok()) {
      load_error_ = new std::string(std::string(gguf.status().message()));
      return;
    }
    absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(**gguf);
    if (!tok.ok()) {
      load_error_ = new std::string(std::string(tok.status().message()));
      return;
    }
    absl::StatusOr<std::string> source = (*gguf)->GetString("tokenizer.chat_template");
    absl::StatusOr<ChatTemplate> chat =
        source.ok() ? ChatTemplate::Create(*source, ChatTemplateTokensOf(*tok)) : source.status();
    if (!chat.ok()) {
      load_error_ = new std::string(std::string(chat.status().message()));
      return;
    }
    tokenizer_ = new Tokenizer(*std::move(tok));
    chat_ = new ChatTemplate(*std::move(chat));
  }

  void SetUp() override {
    ASSERT_EQ(load_error_, nullptr) << *load_error_;
    absl::StatusOr<std::vector<GoldenRow>> rows =
        ReadGoldenRows(GoldenPath("smollm2_llamacpp.jsonl"));
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_GE(rows->size(), 200u);
    rows_ = *std::move(rows);
  }

  static Tokenizer* tokenizer_;
  static ChatTemplate* chat_;
  static std::string* load_error_;
  std::vector<GoldenRow> rows_;
};

Tokenizer* LlamaCppParityTest::tokenizer_ = nullptr;
ChatTemplate* LlamaCppParityTest::chat_ = nullptr;
std::string* LlamaCppParityTest::load_error_ = nullptr;

TEST_F(LlamaCppParityTest, ModelMetadata) {
  EXPECT_EQ(tokenizer_->vocab_size(), 49152);
  EXPECT_EQ(tokenizer_->bos_id(), 1);
  EXPECT_EQ(tokenizer_->eos_id(), 2);
  EXPECT_FALSE(tokenizer_->add_bos_by_default());
  EXPECT_EQ(tokenizer_->pre_tokenizer_kind(), PreTokenizerKind::kSmolLm);
}

TEST_F(LlamaCppParityTest, IdsMatchLlamaCppOnTheWholeCorpus) {
  int specials = 0;
  for (const GoldenRow& row : rows_) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(row.text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, row.ids) << "text: " << row.text;
    if (row.ids_special.has_value()) {
      ++specials;
      EXPECT_EQ(*tokenizer_->Encode(row.text, {.allow_special = true}), *row.ids_special)
          << "text (special parsed): " << row.text;
    }
  }
  EXPECT_GE(specials, 10);
}

TEST_F(LlamaCppParityTest, DecodeRoundTripsTheCorpus) {
  for (const GoldenRow& row : rows_) {
    EXPECT_EQ(*tokenizer_->Decode(row.ids), row.text);
  }
}

TEST_F(LlamaCppParityTest, StreamingMatchesDecode) {
  for (const GoldenRow& row : rows_) {
    absl::StatusOr<std::string> streamed = StreamIds(*tokenizer_, row.ids);
    ASSERT_TRUE(streamed.ok()) << streamed.status() << " text: " << row.text;
    EXPECT_EQ(*streamed, row.text);
  }
}

TEST_F(LlamaCppParityTest, ChatRenderingAndIdsMatchJinjaAndLlamaCpp) {
  absl::StatusOr<std::string> golden_text = ReadFileToString(GoldenPath("chat_golden.json"));
  ASSERT_TRUE(golden_text.ok()) << golden_text.status();
  const nlohmann::json golden = nlohmann::json::parse(*golden_text);
  int with_ids = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    tpserve::v1::Chat chat;
    for (const auto& m : c["messages"]) {
      tpserve::v1::ChatMessage* message = chat.add_messages();
      message->set_role(m["role"].get<std::string>());
      message->set_content(m["content"].get<std::string>());
    }
    chat.set_add_generation_prompt(c["add_generation_prompt"].get<bool>());
    absl::StatusOr<RenderedPrompt> prompt = chat_->Render(chat);
    ASSERT_TRUE(prompt.ok()) << prompt.status();
    EXPECT_EQ(prompt->Text(), c["smollm2_text"].get<std::string>());
    if (c.contains("smollm2_ids")) {
      ++with_ids;
      EXPECT_EQ(*EncodeRenderedPrompt(*tokenizer_, *prompt),
                c["smollm2_ids"].get<std::vector<int32_t>>());
    }
  }
  EXPECT_GE(with_ids, 6);
}

}  // namespace
}  // namespace tpserve
