#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <utility>

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
                HasSubstr("general.architecture 'phi3' is not supported (supported: deepseek2, "
                          "gemma2, gemma3, glm4moe, llama, llama4, qwen2, qwen3, qwen3moe)"));
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

// Llama 4 as llama.cpp's converter writes it: eight layers, MoE every second.
GgufTestBuilder TinyLlama4(uint32_t experts) {
  GgufTestBuilder b;
  b.AddString("general.architecture", "llama4")
      .AddU32("llama4.block_count", 8)
      .AddU32("llama4.context_length", 4096)
      .AddU32("llama4.embedding_length", 256)
      .AddU32("llama4.feed_forward_length", 512)
      .AddU32("llama4.attention.head_count", 8)
      .AddU32("llama4.attention.head_count_kv", 2)
      .AddF32("llama4.rope.freq_base", 500000.0f)
      .AddF32("llama4.attention.layer_norm_rms_epsilon", 1e-5f)
      .AddU32("llama4.expert_count", experts)
      .AddU32("llama4.expert_used_count", 1)
      .AddU32("llama4.expert_feed_forward_length", 128)
      .AddU32("llama4.interleave_moe_layer_step", 2)
      .AddStringArray("tokenizer.ggml.tokens", std::vector<std::string>(300, "t"));
  return b;
}

// llama.cpp's constants for every llama4 file: every 4th layer NoPE with the temperature
// (floor 8192, scale 0.1), the others chunked by 8192 with the L2 QK-norm, except in files of
// 128 experts (Maverick's, which has none).
TEST(ModelSpecFromGgufTest, Llama4ReadsLlamaCppsFixedIRopeLayout) {
  for (const uint32_t experts : {16u, 128u}) {
    GgufTestBuilder b = TinyLlama4(experts);
    absl::StatusOr<ModelSpec> c = ConfigOf(b);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->family, "llama4");
    EXPECT_EQ(c->intermediate_size, 512);
    EXPECT_EQ(c->moe.expert_intermediate_size, 128);
    EXPECT_EQ(c->moe.shared_expert_intermediate_size, 128);
    EXPECT_EQ(c->moe.routing,
              (ExpertRouting{.score = RoutingScore::kSigmoid, .num_experts = int32_t(experts),
                             .top_k = 1, .select_on_logits = true, .weight_on_input = true}));
    for (int64_t l = 0; l < 8; ++l) {
      const LayerSpec layer = c->Layer(l);
      const bool nope = l % 4 == 3;
      EXPECT_EQ(c->IsMoeLayer(l), l % 2 == 1) << l;
      EXPECT_EQ(layer.rope, !nope) << l;
      EXPECT_EQ(layer.attention_chunk, nope ? 0 : 8192) << l;
      EXPECT_EQ(layer.qk_l2_norm, !nope && experts != 128) << l;
      EXPECT_EQ(layer.temperature_floor, nope ? 8192 : 0) << l;
      EXPECT_DOUBLE_EQ(layer.temperature_scale, nope ? 0.1 : 0.0) << l;
    }
  }
}

// Keys with which llama.cpp would compute something else than their value says.
TEST(ModelSpecFromGgufTest, Llama4RefusesWindowKeysLlamaCppWouldNotHonour) {
  const std::pair<std::function<void(GgufTestBuilder&)>, std::string> cases[] = {
      {[](GgufTestBuilder& b) { b.AddU32("llama4.attention.sliding_window", 0); },
       "llama4.attention.sliding_window 0: llama.cpp runs a llama4 file with this key without "
       "chunks and with RoPE on all but the last layer"},
      {[](GgufTestBuilder& b) { b.AddU32("llama4.attention.sliding_window", 4096); },
       "llama4.attention.sliding_window 4096: llama.cpp runs a llama4 file with this key with "
       "chunks of 8192 whatever its value"},
      {[](GgufTestBuilder& b) { b.AddU32("llama4.attention.sliding_window_pattern", 2); },
       "llama4.attention.sliding_window_pattern: llama.cpp would move the chunked layers"},
  };
  for (const auto& [add, message] : cases) {
    GgufTestBuilder b = TinyLlama4(16);
    add(b);
    absl::Status s = ConfigOf(b).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << message;
    EXPECT_THAT(s.message(), HasSubstr(message));
  }
  GgufTestBuilder b = TinyLlama4(16);
  b.AddF32("llama4.rope.freq_base_swa", 10000.0f);  // the chunked (RoPE) layers' base
  absl::StatusOr<ModelSpec> c = ConfigOf(b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(c->Layer(0).rope_theta, 10000.0);
}

}  // namespace
}  // namespace tpserve
