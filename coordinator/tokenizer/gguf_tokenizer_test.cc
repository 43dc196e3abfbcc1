#include "coordinator/tokenizer/gguf_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "coordinator/tokenizer/test_vocab.h"
#include "formats/byte_source.h"
#include "formats/gguf_test_builder.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GGUF holding the test vocabulary; tests override single keys through `edit`.
struct GgufParts {
  std::string model = "gpt2";
  std::string pre = "smollm";
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  bool with_bos = true;
};

GgufParts TestParts() {
  const TokenizerData data = MakeTestTokenizerData();
  GgufParts parts;
  parts.tokens = data.tokens;
  for (const TokenType type : data.token_types) parts.types.push_back(static_cast<int32_t>(type));
  for (const auto& [left, right] : data.merges) parts.merges.push_back(left + " " + right);
  return parts;
}

std::unique_ptr<GgufFile> BuildGguf(const GgufParts& parts) {
  GgufTestBuilder builder;
  builder.AddString("general.architecture", "llama")
      .AddString("tokenizer.ggml.model", parts.model)
      .AddString("tokenizer.ggml.pre", parts.pre)
      .AddStringArray("tokenizer.ggml.tokens", parts.tokens)
      .AddI32Array("tokenizer.ggml.token_type", parts.types)
      .AddStringArray("tokenizer.ggml.merges", parts.merges)
      .AddU32("tokenizer.ggml.eos_token_id", kTestImEnd)
      .AddString("tokenizer.chat_template", "{{ '<|im_start|>' + message['role'] }}");
  if (parts.with_bos) builder.AddU32("tokenizer.ggml.bos_token_id", kTestImStart);
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::FromSource(std::make_unique<MemoryByteSource>("test.gguf", builder.Build()));
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return *std::move(gguf);
}

TEST(GgufTokenizerTest, BuildsAWorkingTokenizer) {
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildGguf(TestParts()));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), kTestVocabSize);
  EXPECT_EQ(tok->bos_id(), kTestImStart);
  EXPECT_EQ(tok->eos_id(), kTestImEnd);
  EXPECT_EQ(tok->pad_id(), -1);
  EXPECT_FALSE(tok->add_bos_by_default());
  EXPECT_EQ(tok->pre_tokenizer_kind(), PreTokenizerKind::kSmolLm);
  EXPECT_THAT(*tok->Encode("hello world"), ElementsAre(kTestHello, kTestSpaceWorld));
}

TEST(GgufTokenizerTest, Llama3PreTokenizerImpliesIgnoreMergesAndBos) {
  GgufParts parts = TestParts();
  parts.pre = "llama-bpe";
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(*BuildGguf(parts));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->ignore_merges);
  EXPECT_TRUE(data->add_bos_by_default);
  EXPECT_EQ(data->pre_tokenizer, PreTokenizerKind::kLlama3);
}

TEST(GgufTokenizerTest, RejectsUnsupportedModelsAndPreTokenizers) {
  GgufParts rwkv = TestParts();
  rwkv.model = "rwkv";
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildGguf(rwkv));
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.model 'rwkv'"));

  GgufParts deepseek = TestParts();
  deepseek.pre = "deepseek-coder";
  tok = TokenizerFromGguf(*BuildGguf(deepseek));
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tok.status().message(), HasSubstr("'deepseek-coder'"));
}

TEST(GgufTokenizerTest, ReadsQwen2AndTekkenPreTokenizers) {
  GgufParts qwen = TestParts();
  qwen.pre = "qwen2";
  absl::StatusOr<TokenizerData> data = TokenizerDataFromGguf(*BuildGguf(qwen));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->pre_tokenizer, PreTokenizerKind::kQwen2);
  EXPECT_FALSE(data->ignore_merges);
  EXPECT_FALSE(data->add_bos_by_default);

  GgufParts tekken = TestParts();
  tekken.pre = "tekken";
  data = TokenizerDataFromGguf(*BuildGguf(tekken));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->pre_tokenizer, PreTokenizerKind::kTekken);
  EXPECT_TRUE(data->ignore_merges);  // as llama.cpp sets for tekken
  EXPECT_TRUE(data->add_bos_by_default);
}

// A GGUF holding the SPM test vocabulary; `edit` adds or leaves out keys.
struct SpmGgufParts {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<float> scores;
  std::optional<bool> add_space_prefix = false;
  bool with_ids = true;
};

SpmGgufParts TestSpmParts() {
  const TokenizerData data = MakeTestSpmTokenizerData(false);
  SpmGgufParts parts;
  parts.tokens = data.tokens;
  for (const TokenType type : data.token_types) parts.types.push_back(static_cast<int32_t>(type));
  parts.scores = data.scores;
  return parts;
}

std::unique_ptr<GgufFile> BuildSpmGguf(const SpmGgufParts& parts) {
  GgufTestBuilder builder;
  builder.AddString("general.architecture", "gemma3")
      .AddString("tokenizer.ggml.model", "llama")
      .AddString("tokenizer.ggml.pre", "not-a-pre-tokenizer")  // ignored for SPM, as llama.cpp
      .AddStringArray("tokenizer.ggml.tokens", parts.tokens)
      .AddI32Array("tokenizer.ggml.token_type", parts.types)
      .AddF32Array("tokenizer.ggml.scores", parts.scores);
  if (parts.add_space_prefix.has_value()) {
    builder.AddBool("tokenizer.ggml.add_space_prefix", *parts.add_space_prefix);
  }
  if (parts.with_ids) {
    builder.AddU32("tokenizer.ggml.bos_token_id", 2)
        .AddU32("tokenizer.ggml.eos_token_id", 1)
        .AddU32("tokenizer.ggml.padding_token_id", 0)
        .AddBool("tokenizer.ggml.add_bos_token", false);
  }
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf =
      GgufFile::FromSource(std::make_unique<MemoryByteSource>("spm.gguf", builder.Build()));
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  return *std::move(gguf);
}

TEST(GgufTokenizerTest, BuildsAnSpmTokenizer) {
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildSpmGguf(TestSpmParts()));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->model(), TokenizerModel::kSpm);
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_EQ(tok->pad_id(), 0);
  EXPECT_EQ(tok->unk_id(), kSpmUnk);  // absent key: llama.cpp's SPM default 0
  EXPECT_FALSE(tok->add_bos_by_default());
  EXPECT_THAT(*tok->Encode("a hi"), ElementsAre(kSpmA, kSpmSpaceHI));
  EXPECT_THAT(*tok->Encode("<end_of_turn>", {.allow_special = true}), ElementsAre(kSpmEndOfTurn));
}

TEST(GgufTokenizerTest, SpmDefaultsAreLlamaCpps) {
  SpmGgufParts parts = TestSpmParts();
  parts.add_space_prefix.reset();
  parts.with_ids = false;
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildSpmGguf(parts));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_TRUE(tok->add_bos_by_default());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_EQ(tok->pad_id(), -1);
  EXPECT_THAT(*tok->Encode("hi"), ElementsAre(kSpmSpaceHI));
}

TEST(GgufTokenizerTest, SpmRejectsInconsistentArrays) {
  SpmGgufParts short_scores = TestSpmParts();
  short_scores.scores.pop_back();
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildSpmGguf(short_scores));
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(),
              HasSubstr("tokenizer.ggml.scores has 274 entries but tokenizer.ggml.tokens has 275"));

  SpmGgufParts nan_score = TestSpmParts();
  nan_score.scores[9] = std::nanf("");
  EXPECT_THAT(TokenizerFromGguf(*BuildSpmGguf(nan_score)).status().message(),
              HasSubstr("tokenizer.ggml.scores[9] is NaN"));

  SpmGgufParts long_types = TestSpmParts();
  long_types.types.push_back(1);
  EXPECT_THAT(TokenizerFromGguf(*BuildSpmGguf(long_types)).status().message(),
              HasSubstr("token_type has 276 entries but tokenizer.ggml.tokens has 275"));

  SpmGgufParts bad_type = TestSpmParts();
  bad_type.types[270] = 0;
  EXPECT_THAT(TokenizerFromGguf(*BuildSpmGguf(bad_type)).status().message(),
              HasSubstr("tokenizer.ggml.token_type[270] = 0 is outside [1, 6]"));
}

TEST(GgufTokenizerTest, RejectsInconsistentArrays) {
  GgufParts short_types = TestParts();
  short_types.types.pop_back();
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildGguf(short_types));
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(),
              HasSubstr("token_type has 270 entries but tokenizer.ggml.tokens has 271"));

  GgufParts bad_type = TestParts();
  bad_type.types[7] = 9;
  EXPECT_THAT(TokenizerFromGguf(*BuildGguf(bad_type)).status().message(),
              HasSubstr("tokenizer.ggml.token_type[7] = 9 is outside [1, 6]"));

  GgufParts bad_merge = TestParts();
  bad_merge.merges[1] = "ll";
  EXPECT_THAT(TokenizerFromGguf(*BuildGguf(bad_merge)).status().message(),
              HasSubstr("tokenizer.ggml.merges[1] 'll' has no space"));
}

TEST(GgufTokenizerTest, OptionalIdsDefaultToNone) {
  GgufParts parts = TestParts();
  parts.with_bos = false;
  absl::StatusOr<Tokenizer> tok = TokenizerFromGguf(*BuildGguf(parts));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->bos_id(), -1);
}

}  // namespace
}  // namespace tpserve
