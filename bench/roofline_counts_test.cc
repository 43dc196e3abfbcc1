#include "bench/roofline_counts.h"

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(RooflineCounts, Llama31_8bParameters) {
  absl::StatusOr<ModelSpec> c = ModelSpecPreset("llama-3.1-8b");
  ASSERT_TRUE(c.ok()) << c.status();
  // 32 x (4096 x (4096 + 2 x 1024) + 4096 x 4096 + 3 x 4096 x 14336).
  EXPECT_EQ(c->NumActiveLinearParameters(), 6'979'321'856);
  EXPECT_EQ(c->NumParameters(), 8'030'261'248);  // the published count
  // 2 x 6.98e9 x 2048 + 2 x 128256 x 4096 + 4 x 32 x 32 x 128 x 2048 x 2049 / 2.
  EXPECT_DOUBLE_EQ(PrefillFlops(*c, 2048, 1), 2.0 * 6'979'321'856 * 2048 + 2.0 * 128256 * 4096 +
                                                  4.0 * 32 * 32 * 128 * (2048.0 * 2049 / 2));
}

TEST(RooflineCounts, HandCountedTinyModel) {
  ModelSpec c;
  c.num_layers = 1;
  c.hidden_size = 2;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 2;
  c.intermediate_size = 3;
  c.vocab_size = 5;
  // q, k, v: 2 x 6; o: 4; gate, up, down: 18.
  EXPECT_EQ(c.NumActiveLinearParameters(), 34);
  // 2 x 34 x 3 tokens, LM head 2 x 5 x 2 for 1 row, attention 4 x 2 x (1 + 2 + 3) pairs.
  EXPECT_DOUBLE_EQ(PrefillFlops(c, 3, 1), 204 + 20 + 48);

  std::array<int64_t, kNumTensorRoles> bytes{};
  bytes[static_cast<int>(TensorRole::kEmbedding)] = 1000;  // 200 per row
  bytes[static_cast<int>(TensorRole::kQ)] = 10;
  bytes[static_cast<int>(TensorRole::kLmHead)] = 1000;
  bytes[static_cast<int>(TensorRole::kFinalNorm)] = 8;
  // Weights but the table (1018), one row per sequence (2 x 200), K and V of 1 layer x 1 head
  // x 2 dims x 2 bytes per token for 2 sequences x 3 positions (8 x 6).
  EXPECT_DOUBLE_EQ(DecodeBytesRead(c, bytes, {.batch = 2, .context_tokens = 3, .kv_elem_bytes = 2}),
                   1018 + 400 + 48);
  // Tied: the LM head reads the whole table.
  c.tie_word_embeddings = true;
  bytes[static_cast<int>(TensorRole::kLmHead)] = 0;
  EXPECT_DOUBLE_EQ(DecodeBytesRead(c, bytes, {.batch = 1, .context_tokens = 0, .kv_elem_bytes = 2}),
                   18 + 1000 + 200);
}

// A mixture of experts: a token multiplies the router, its top-k experts and the shared
// expert; a decode step reads the share of the experts its tokens choose.
TEST(RooflineCounts, MixtureOfExpertsCountsTheChosenExperts) {
  ModelSpec c;
  c.num_layers = 1;
  c.hidden_size = 2;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 2;
  c.intermediate_size = 3;
  c.vocab_size = 5;
  c.layers.assign(1, LayerSpec{});
  c.layers[0].moe = true;
  c.moe.routing = {.score = RoutingScore::kSoftmax, .num_experts = 4, .top_k = 2,
                   .renormalize = true};
  c.moe.expert_intermediate_size = 3;
  c.moe.shared_expert_intermediate_size = 1;
  // q, k, v, o 16; router 4 x 2; 2 experts x 18; shared 3 x 2 x 1.
  EXPECT_EQ(c.NumActiveLinearParameters(), 16 + 8 + 36 + 6);
  std::array<int64_t, kNumTensorRoles> bytes{};
  bytes[static_cast<int>(TensorRole::kQ)] = 10;
  bytes[static_cast<int>(TensorRole::kExpertUp)] = 400;
  // One token reads half the experts (2 of 4); two tokens 1 - (1/2)^2 = 3/4 of them.
  EXPECT_DOUBLE_EQ(DecodeBytesRead(c, bytes, {.batch = 1, .context_tokens = 0}), 10 + 200);
  EXPECT_DOUBLE_EQ(DecodeBytesRead(c, bytes, {.batch = 2, .context_tokens = 0}), 10 + 300);
}

}  // namespace
}  // namespace tpserve
