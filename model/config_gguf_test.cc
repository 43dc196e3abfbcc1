#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "formats/gguf.h"
#include "formats/gguf_test_builder.h"
#include "model/config.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Metadata shaped like llama.cpp's converter output, for a tiny model.
GgufTestBuilder TinyLlama() {
  GgufTestBuilder b;
  b.AddString("general.architecture", "llama")
      .AddString("general.name", "tiny")
      .AddU32("llama.block_count", 2)
      .AddU32("llama.context_length", 4096)
      .AddU32("llama.embedding_length", 256)
      .AddU32("llama.feed_forward_length", 512)
      .AddU32("llama.attention.head_count", 8)
      .AddU32("llama.attention.head_count_kv", 2)
      .AddF32("llama.rope.freq_base", 500000.0f)
      .AddF32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .AddU32("llama.rope.dimension_count", 32)
      .AddStringArray("tokenizer.ggml.tokens", std::vector<std::string>(300, "t"))
      .AddU32("tokenizer.ggml.bos_token_id", 1)
      .AddU32("tokenizer.ggml.eos_token_id", 2);
  return b;
}

absl::StatusOr<ModelSpec> ConfigOf(GgufTestBuilder& b) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      GgufFile::FromSource(std::make_unique<MemoryByteSource>("tiny.gguf", b.Build()));
  if (!file.ok()) return file.status();
  return ModelSpecFromGguf(**file);
}

TEST(ModelSpecFromGgufTest, ReadsLlamaKeys) {
  GgufTestBuilder b = TinyLlama();
  absl::StatusOr<ModelSpec> c = ConfigOf(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "tiny");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->max_context_tokens, 4096);
  EXPECT_EQ(c->hidden_size, 256);
  EXPECT_EQ(c->intermediate_size, 512);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->vocab_size, 300);  // from the token list: no llama.vocab_size
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_FALSE(c->rope_scaling.enabled());
  EXPECT_EQ(c->rms_norm_eps, static_cast<double>(1e-5f));
  EXPECT_TRUE(c->tie_word_embeddings);  // no output.weight
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
  EXPECT_TRUE(c->extra_eos_token_ids.empty());
}

TEST(ModelSpecFromGgufTest, Llama3StyleFile) {
  GgufTestBuilder b = TinyLlama();
  b.AddU32("llama.vocab_size", 320)
      .AddU32("tokenizer.ggml.eot_token_id", 9)
      .AddU32("tokenizer.ggml.eom_token_id", 8)
      .AddTensor("output.weight", 0, {256, 320}, std::string(256 * 320 * 4, '\0'))
      .AddTensor("rope_freqs.weight", 0, {16}, std::string(64, '\0'));
  absl::StatusOr<ModelSpec> c = ConfigOf(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 320);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_TRUE(c->rope_scaling.enabled());
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_THAT(c->extra_eos_token_ids, ElementsAre(8, 9));
}

TEST(ModelSpecFromGgufTest, ErrorsNameTheKey) {
  {
    GgufTestBuilder b;
    b.AddString("general.architecture", "llama");
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("no GGUF key 'llama.block_count'"));
  }
  {
    GgufTestBuilder b;
    b.AddString("general.architecture", "phi3");
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(s.message(),
                HasSubstr("general.architecture 'phi3' is not supported (supported: gemma2, "
                          "gemma3, glm4moe, llama, qwen2, qwen3, qwen3moe)"));
  }
  {
    GgufTestBuilder b;
    b.AddU32("llama.block_count", 2);
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("no GGUF key 'general.architecture'"));
  }
  {
    GgufTestBuilder b = TinyLlama();
    b.AddString("llama.vocab_size", "many");
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'llama.vocab_size' has type STRING, expected an integer"));
  }
  {
    GgufTestBuilder b = TinyLlama();
    b.AddString("llama.rope.scaling.type", "longrope");
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(s.message(), HasSubstr("llama.rope.scaling.type 'longrope' is not implemented "
                                       "(none, llama3, linear, yarn)"));
  }
  {
    GgufTestBuilder b = TinyLlama();
    b.AddU32("tokenizer.ggml.eot_token_id", 5000);
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("extra_eos_token_ids is 5000; it must be in [0, 300)"));
  }
}

}  // namespace
}  // namespace tpserve
