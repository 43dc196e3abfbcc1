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
  EXPECT_EQ(WeightFormatsPreset("int4")->preset, "int4-g128");
}

TEST(WeightFormatsTest, UnknownPresetListsNames) {
  absl::Status s = WeightFormatsPreset("int3").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("accepted: f32, fp16, bf16, fp8"), std::string::npos) << s;
}

TEST(WeightFormatsTest, NormsMustBePlainFloats) {
  WeightFormats f = *WeightFormatsPreset("bf16");
  f[TensorRole::kFfnNorm] = TensorFormat::Of(FormatKind::kQ4_0);
  absl::Status s = f.Validate();
  EXPECT_NE(s.message().find("ffn_norm is q4_0; norms must be f32, f16 or bf16"), std::string::npos)
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
  EXPECT_EQ(TensorRoleFromGgufName("blk.0.attn_q.bias"), std::nullopt);
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

TEST(WeightFormatsTest, FromTensorTypesRejectsUnsizedAndMixedTypes) {
  std::vector<NamedTensorType> k_quant = SmallLlamaTensors("Q4_1");
  k_quant.push_back({"output.weight", "Q6_K"});
  absl::Status s = WeightFormatsFromTensorTypes(k_quant, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("output.weight is stored as Q6_K"), std::string::npos) << s;

  std::vector<NamedTensorType> mixed = SmallLlamaTensors("Q4_1");
  mixed.push_back({"blk.2.attn_q.weight", "Q8_0"});
  s = WeightFormatsFromTensorTypes(mixed, true).status();
  EXPECT_NE(s.message().find("blk.0.attn_q.weight is Q4_1, blk.2.attn_q.weight is Q8_0"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tpserve
