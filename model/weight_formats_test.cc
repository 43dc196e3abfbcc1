#include "model/weight_formats.h"

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(WeightFormatsTest, Fp8PresetKeepsEmbeddingsAndNormsInBf16) {
  absl::StatusOr<WeightFormats> f = WeightFormatsPreset("fp8");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)[TensorRole::kQ].kind, FormatKind::kFp8PerChannel);
  EXPECT_EQ((*f)[TensorRole::kDown].kind, FormatKind::kFp8PerChannel);
  EXPECT_EQ((*f)[TensorRole::kEmbedding].kind, FormatKind::kBF16);
  EXPECT_EQ((*f)[TensorRole::kLmHead].kind, FormatKind::kBF16);
  EXPECT_EQ((*f)[TensorRole::kAttnNorm].kind, FormatKind::kBF16);
}

TEST(WeightFormatsTest, GgmlAndInt4Presets) {
  WeightFormats q4 = *WeightFormatsPreset("q4_1");
  EXPECT_EQ(q4[TensorRole::kEmbedding].kind, FormatKind::kQ4_1);
  EXPECT_EQ(q4[TensorRole::kFinalNorm].kind, FormatKind::kF32);
  WeightFormats int4 = *WeightFormatsPreset("int4-g64");
  EXPECT_EQ(int4.preset, "int4-g64");
  EXPECT_EQ(int4[TensorRole::kUp], TensorFormat::Int4(64));
  EXPECT_EQ(int4[TensorRole::kEmbedding].kind, FormatKind::kF16);
  // Plain "int4" keeps its name (FitInt4Groups may shrink its group to fit a model) and
  // starts at group 128.
  EXPECT_EQ(WeightFormatsPreset("int4")->preset, "int4");
  EXPECT_EQ((*WeightFormatsPreset("int4"))[TensorRole::kQ], TensorFormat::Int4(128));
  WeightFormats q6k = *WeightFormatsPreset("q6_k");
  EXPECT_EQ(q6k[TensorRole::kDown].kind, FormatKind::kQ6_K);
  EXPECT_EQ(q6k[TensorRole::kLmHead].kind, FormatKind::kQ6_K);
  EXPECT_EQ(q6k[TensorRole::kAttnNorm].kind, FormatKind::kF32);
  EXPECT_EQ(WeightFormatsPreset("q4_k")->preset, "q4_k");
}

TEST(WeightFormatsTest, UnknownPresetListsNames) {
  absl::Status s = WeightFormatsPreset("int3").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("accepted: f32, fp16, bf16, fp8"), std::string::npos) << s;
  EXPECT_NE(s.message().find("q4_1, q4_k, q5_k, q6_k"), std::string::npos) << s;
}

TEST(WeightFormatsTest, NormsMustBePlainFloats) {
  WeightFormats f = *WeightFormatsPreset("bf16");
  f[TensorRole::kFfnNorm] = TensorFormat::Of(FormatKind::kQ4_0);
  absl::Status s = f.Validate();
  EXPECT_NE(s.message().find("ffn_norm is q4_0; norms and biases must be f32, f16 or bf16"), std::string::npos)
      << s;
}

TEST(WeightFormatsTest, RolesFromGgufNames) {
  EXPECT_EQ(TensorRoleFromGgufName("blk.7.ffn_down.weight"), TensorRole::kDown);
  EXPECT_EQ(TensorRoleFromGgufName("blk.12.attn_q.weight"), TensorRole::kQ);
  EXPECT_EQ(TensorRoleFromGgufName("token_embd.weight"), TensorRole::kEmbedding);
  EXPECT_EQ(TensorRoleFromGgufName("output.weight"), TensorRole::kLmHead);
  EXPECT_EQ(TensorRoleFromGgufName("output_norm.weight"), TensorRole::kFinalNorm);
  EXPECT_EQ(TensorRoleFromGgufName("rope_freqs.weight"), std::nullopt);
  EXPECT_EQ(TensorRoleFromGgufName("blk.x.attn_q.weight"), std::nullopt);
  EXPECT_EQ(TensorRoleFromGgufName("blk.0.output.weight"), std::nullopt);
  EXPECT_EQ(TensorRoleFromGgufName("attn_q.weight"), std::nullopt);
  EXPECT_EQ(TensorRoleFromGgufName("blk.0.attn_q.bias"), TensorRole::kQBias);
  EXPECT_EQ(TensorRoleFromGgufName("blk.3.attn_v.bias"), TensorRole::kVBias);
  EXPECT_EQ(TensorRoleFromGgufName("blk.3.attn_k_norm.weight"), TensorRole::kKNorm);
  EXPECT_EQ(TensorRoleFromGgufName("blk.3.post_ffw_norm.weight"), TensorRole::kPostFfnNorm);
  EXPECT_EQ(TensorRoleFromGgufName("blk.0.attn_output.bias"), std::nullopt);
  EXPECT_EQ(TensorRoleFromGgufName("blk.0.attn_q_norm.bias"), std::nullopt);
}

std::vector<NamedTensorType> SmallLlamaTensors(const char* proj_type) {
  std::vector<NamedTensorType> t = {
      {"token_embd.weight", "Q8_0"}, {"output_norm.weight", "F32"}, {"rope_freqs.weight", "F32"}};
  for (int layer = 0; layer < 2; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    for (const char* n :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      t.push_back({p + n + ".weight", proj_type});
    }
    t.push_back({p + "attn_norm.weight", "F32"});
    t.push_back({p + "ffn_norm.weight", "F32"});
  }
  return t;
}

TEST(WeightFormatsTest, FromTensorTypesTiedAndUntied) {
  absl::StatusOr<WeightFormats> tied =
      WeightFormatsFromTensorTypes(SmallLlamaTensors("Q4_1"), true);
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_EQ((*tied)[TensorRole::kEmbedding].kind, FormatKind::kQ8_0);
  EXPECT_EQ((*tied)[TensorRole::kLmHead].kind, FormatKind::kQ8_0);
  EXPECT_EQ((*tied)[TensorRole::kO].kind, FormatKind::kQ4_1);
  EXPECT_EQ((*tied)[TensorRole::kAttnNorm].kind, FormatKind::kF32);

  absl::Status untied = WeightFormatsFromTensorTypes(SmallLlamaTensors("Q4_1"), false).status();
  EXPECT_NE(untied.message().find("no tensor for role lm_head"), std::string::npos) << untied;
}

TEST(WeightFormatsTest, FromTensorTypesReadsKQuants) {
  // llama.cpp's Q4_K_S on a small model: Q4_K projections, Q6_K output, Q4_K embedding.
  std::vector<NamedTensorType> t = SmallLlamaTensors("Q4_K");
  t[0].type_name = "Q4_K";
  t.push_back({"output.weight", "Q6_K"});
  absl::StatusOr<WeightFormats> f = WeightFormatsFromTensorTypes(t, false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)[TensorRole::kEmbedding].kind, FormatKind::kQ4_K);
  EXPECT_EQ((*f)[TensorRole::kDown].kind, FormatKind::kQ4_K);
  EXPECT_EQ((*f)[TensorRole::kLmHead].kind, FormatKind::kQ6_K);
  EXPECT_EQ((*f)[TensorRole::kFinalNorm].kind, FormatKind::kF32);
  EXPECT_TRUE(f->Validate().ok());
  absl::StatusOr<WeightFormats> q5 = WeightFormatsFromTensorTypes(SmallLlamaTensors("Q5_K"), true);
  ASSERT_TRUE(q5.ok()) << q5.status();
  EXPECT_EQ((*q5)[TensorRole::kUp].kind, FormatKind::kQ5_K);
}

TEST(WeightFormatsTest, FromTensorTypesRejectsUnsizedTypes) {
  std::vector<NamedTensorType> unsized = SmallLlamaTensors("Q4_1");
  unsized.push_back({"output.weight", "Q3_K"});
  absl::Status s = WeightFormatsFromTensorTypes(unsized, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("output.weight is stored as Q3_K"), std::string::npos) << s;
}

TEST(WeightFormatsTest, LayersThatDifferBecomeOverrides) {
  // Q4_K_M keeps some layers' ffn_down (and attn_v) in Q6_K.
  std::vector<NamedTensorType> q4_k_m = SmallLlamaTensors("Q4_K");
  q4_k_m[3 + 6].type_name = "Q6_K";  // blk.0.ffn_down
  absl::StatusOr<WeightFormats> f = WeightFormatsFromTensorTypes(q4_k_m, true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->At(TensorRole::kDown, 0).kind, FormatKind::kQ6_K);
  EXPECT_EQ(f->At(TensorRole::kDown, 1).kind, FormatKind::kQ4_K);
  EXPECT_EQ(f->At(TensorRole::kUp, 0).kind, FormatKind::kQ4_K);
  EXPECT_EQ(f->AllOf(TensorRole::kDown).size(), 2u);
  EXPECT_EQ(f->AllOf(TensorRole::kUp).size(), 1u);
  EXPECT_TRUE(f->Validate().ok());
  // The majority is the role's format: two of three layers in Q8_0.
  std::vector<NamedTensorType> mixed = SmallLlamaTensors("Q4_1");
  mixed.push_back({"blk.2.attn_q.weight", "Q4_1"});
  mixed[3].type_name = "Q8_0";  // blk.0.attn_q
  f = WeightFormatsFromTensorTypes(mixed, true);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)[TensorRole::kQ].kind, FormatKind::kQ4_1);
  EXPECT_EQ(f->At(TensorRole::kQ, 0).kind, FormatKind::kQ8_0);
  ASSERT_EQ(f->layer_overrides.size(), 1u);
  f->Set(TensorRole::kQ, TensorFormat::Of(FormatKind::kBF16));  // a preset replaces them all
  EXPECT_TRUE(f->layer_overrides.empty());
  EXPECT_EQ(f->At(TensorRole::kQ, 0).kind, FormatKind::kBF16);
}

}  // namespace
}  // namespace tpserve
