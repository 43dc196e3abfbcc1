// ParseQuantizationConfig: what each accepted method parses to, and that every option the
// engine does not implement is refused naming the key and the value.
#include "checkpoint/quant_scheme.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

std::string Config(const std::string& quantization_config) {
  return R"({"model_type": "llama", "quantization_config": )" + quantization_config + "}";
}

// The quantization_config blocks of tests/golden/quant (as the public exporters write them).
constexpr char kAwq[] = R"({"bits": 4, "group_size": 64, "modules_to_not_convert": null,
    "quant_method": "awq", "version": "gemm", "zero_point": true})";
constexpr char kGptq[] = R"({"bits": 4, "checkpoint_format": "gptq", "damp_percent": 0.01,
    "desc_act": true, "group_size": 32, "model_file_base_name": null, "quant_method": "gptq",
    "static_groups": false, "sym": false, "true_sequential": true})";
constexpr char kFbgemm[] = R"({"activation_scale_ub": 1200.0, "modules_to_not_convert":
    ["model.layers.0.self_attn.q_proj", "lm_head"], "quant_method": "fbgemm_fp8"})";
constexpr char kCtBlock[] = R"({"config_groups": {"group_0": {"targets": ["Linear"],
    "weights": {"num_bits": 8, "type": "float", "symmetric": true, "group_size": null,
      "strategy": "block", "block_structure": [128, 128], "dynamic": false, "actorder": null},
    "input_activations": {"num_bits": 8, "type": "float", "symmetric": true, "group_size": 128,
      "strategy": "group", "dynamic": true},
    "output_activations": null, "format": "float-quantized"}},
    "format": "float-quantized", "ignore": ["lm_head"], "kv_cache_scheme": null,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
    "sparsity_config": {}, "transform_config": {}})";

// DeepSeek-V3's own (transformers' fine-grained "fp8").
constexpr char kDeepseekFp8[] = R"({"activation_scheme": "dynamic", "fmt": "e4m3",
    "quant_method": "fp8", "weight_block_size": [128, 128]})";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(QuantSchemeTest, NoQuantizationConfigIsPlain) {
  absl::StatusOr<QuantScheme> s = ParseQuantizationConfig(R"({"hidden_size": 8})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->method, QuantMethod::kNone);
  EXPECT_FALSE(s->Quantizes("model.layers.0.mlp.up_proj"));
}

TEST(QuantSchemeTest, AwqAndGptqParseGroupsAndKeepEmbeddingAndHeadFloat) {
  absl::StatusOr<QuantScheme> awq = ParseQuantizationConfig(Config(kAwq));
  ASSERT_TRUE(awq.ok()) << awq.status();
  EXPECT_EQ(awq->method, QuantMethod::kAwq);
  EXPECT_EQ(awq->bits, 4);
  EXPECT_EQ(awq->group_size, 64);
  EXPECT_TRUE(awq->Quantizes("model.layers.3.self_attn.q_proj"));
  EXPECT_FALSE(awq->Quantizes("lm_head"));
  EXPECT_FALSE(awq->Quantizes("model.embed_tokens"));

  absl::StatusOr<QuantScheme> gptq = ParseQuantizationConfig(Config(kGptq));
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  EXPECT_EQ(gptq->method, QuantMethod::kGptq);
  EXPECT_EQ(gptq->group_size, 32);
  EXPECT_TRUE(gptq->desc_act);
  EXPECT_FALSE(gptq->symmetric);
  EXPECT_TRUE(gptq->Quantizes("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(gptq->Quantizes("lm_head"));

  // checkpoint_format absent: an older export, v1.
  absl::StatusOr<QuantScheme> v1 =
      ParseQuantizationConfig(Config(Replace(kGptq, R"("checkpoint_format": "gptq",)", "")));
  ASSERT_TRUE(v1.ok()) << v1.status();
}

TEST(QuantSchemeTest, FbgemmKeepsItsListAndBound) {
  absl::StatusOr<QuantScheme> s = ParseQuantizationConfig(Config(kFbgemm));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->method, QuantMethod::kFbgemmFp8);
  EXPECT_EQ(s->activation_scale_ub, 1200.0f);
  EXPECT_FALSE(s->Quantizes("model.layers.0.self_attn.q_proj"));
  EXPECT_TRUE(s->Quantizes("model.layers.1.self_attn.q_proj"));
  EXPECT_TRUE(s->Quantizes("model.layers.0.mlp.gate_proj"));
}

TEST(QuantSchemeTest, CompressedTensorsChannelAndBlock) {
  absl::StatusOr<QuantScheme> block = ParseQuantizationConfig(Config(kCtBlock));
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->method, QuantMethod::kCompressedFp8);
  EXPECT_TRUE(block->fp8_block);
  EXPECT_FALSE(block->Quantizes("lm_head"));
  EXPECT_TRUE(block->Quantizes("model.layers.0.mlp.down_proj"));
  const std::string channel =
      Replace(Replace(kCtBlock, R"("strategy": "block", "block_structure": [128, 128])",
                      R"("strategy": "channel", "block_structure": null)"),
              R"("ignore": ["lm_head"])", R"("ignore": [])");
  absl::StatusOr<QuantScheme> c = ParseQuantizationConfig(Config(channel));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->fp8_block);
  EXPECT_TRUE(c->Quantizes("lm_head"));  // a Linear that nothing ignores
  EXPECT_FALSE(c->Quantizes("model.embed_tokens"));
}

TEST(QuantSchemeTest, DeepseekFp8IsBlockTilesWithFloatEmbeddingAndHead) {
  absl::StatusOr<QuantScheme> s = ParseQuantizationConfig(Config(kDeepseekFp8));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->method, QuantMethod::kFp8Block);
  EXPECT_TRUE(s->fp8_block);
  EXPECT_EQ(s->bits, 8);
  EXPECT_TRUE(s->Quantizes("model.layers.3.self_attn.kv_b_proj"));
  EXPECT_FALSE(s->Quantizes("model.embed_tokens"));
  EXPECT_FALSE(s->Quantizes("lm_head"));
  EXPECT_EQ(QuantMethodName(s->method), "fp8");
}

TEST(QuantSchemeTest, EveryUnimplementedOptionIsRefusedByKeyAndValue) {
  struct Case {
    std::string quantization_config;
    absl::StatusCode code;
    std::string fragment;
  };
  const auto kUnimpl = absl::StatusCode::kUnimplemented;
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::vector<Case> cases = {
      {R"({"quant_method": "bitsandbytes", "load_in_4bit": true})", kUnimpl,
       "quantization_config.quant_method = \"bitsandbytes\" is not implemented (supported: awq, "
       "gptq, fbgemm_fp8, fp8, compressed-tensors)"},
      {Replace(kDeepseekFp8, "[128, 128]", "[64, 64]"), kUnimpl,
       "quantization_config.weight_block_size = [64,64] is not implemented (supported: "
       "[128, 128])"},
      {Replace(kDeepseekFp8, R"("e4m3")", R"("e5m2")"), kUnimpl,
       "quantization_config.fmt = \"e5m2\" is not implemented"},
      {Replace(kDeepseekFp8, R"("dynamic")", R"("static")"), kUnimpl,
       "quantization_config.activation_scheme = \"static\" is not implemented"},
      {R"({"bits": 4})", kInvalid, "quantization_config.quant_method is missing"},
      {R"("awq")", kInvalid, "quantization_config = \"awq\": expected an object"},
      {Replace(kGptq, R"("bits": 4)", R"("bits": 3)"), kUnimpl,
       "quantization_config.bits = 3 is not implemented (supported: 4)"},
      {Replace(kAwq, R"("bits": 4)", R"("bits": "4")"), kInvalid,
       "quantization_config.bits = \"4\": expected an integer"},
      {Replace(kAwq, R"("group_size": 64)", R"("group_size": 16)"), kUnimpl,
       "quantization_config.group_size = 16 is not implemented"},
      {Replace(kGptq, R"("group_size": 32)", R"("group_size": -1)"), kUnimpl,
       "quantization_config.group_size = -1 is not implemented"},
      {Replace(kGptq, R"("group_size": 32)", R"("group_size": 0)"), kInvalid,
       "quantization_config.group_size = 0: expected a positive integer or -1"},
      {Replace(kAwq, R"("version": "gemm")", R"("version": "gemv")"), kUnimpl,
       "quantization_config.version = \"gemv\" is not implemented (supported: \"gemm\")"},
      {Replace(kAwq, R"("zero_point": true)", R"("zero_point": false)"), kUnimpl,
       "quantization_config.zero_point = false is not implemented"},
      {Replace(kAwq, R"("version": "gemm")", R"("version": "gemm", "backend": "llm-awq")"), kUnimpl,
       "quantization_config.backend = \"llm-awq\" is not implemented"},
      {Replace(kGptq, R"("checkpoint_format": "gptq")", R"("checkpoint_format": "gptq_v2")"),
       kUnimpl, "quantization_config.checkpoint_format = \"gptq_v2\" is not implemented"},
      {Replace(kGptq, R"("sym": false)", R"("sym": false, "lm_head": true)"), kUnimpl,
       "quantization_config.lm_head = true is not implemented"},
      {Replace(kGptq, R"("sym": false)", R"("sym": false, "dynamic": {"-:.*": {}})"), kUnimpl,
       "quantization_config.dynamic = {\"-:.*\":{}} is not implemented"},
      {Replace(kFbgemm, "1200.0", "-1"), kInvalid,
       "quantization_config.activation_scale_ub = -1: expected a positive number"},
      {Replace(kFbgemm, R"(["model.layers.0.self_attn.q_proj", "lm_head"])", "\"lm_head\""),
       kInvalid, "quantization_config.modules_to_not_convert = \"lm_head\": expected a list"},
      {Replace(kCtBlock, R"("format": "float-quantized", "ignore")",
               R"("format": "pack-quantized", "ignore")"),
       kUnimpl, "quantization_config.format = \"pack-quantized\" is not implemented"},
      {Replace(kCtBlock, R"("num_bits": 8, "type": "float", "symmetric": true, "group_size": null)",
               R"("num_bits": 4, "type": "int", "symmetric": true, "group_size": null)"),
       kUnimpl,
       "quantization_config.config_groups.group_0.weights.num_bits = 4 is not implemented"},
      {Replace(kCtBlock, R"("strategy": "block", "block_structure": [128, 128])",
               R"("strategy": "tensor", "block_structure": null)"),
       kUnimpl,
       "quantization_config.config_groups.group_0.weights.strategy = \"tensor\" is not "
       "implemented"},
      {Replace(kCtBlock, "[128, 128]", "[64, 64]"), kUnimpl,
       "quantization_config.config_groups.group_0.weights.block_structure = [64,64] is not "
       "implemented (supported: [128, 128])"},
      {Replace(kCtBlock, R"("group_size": 128,
      "strategy": "group", "dynamic": true)",
               R"("group_size": 128,
      "strategy": "group", "dynamic": false)"),
       kUnimpl,
       "quantization_config.config_groups.group_0.input_activations.dynamic = false is not "
       "implemented"},
      {Replace(kCtBlock, R"("targets": ["Linear"])", R"("targets": ["re:.*mlp.*"])"), kUnimpl,
       "quantization_config.config_groups.group_0.targets = [\"re:.*mlp.*\"] is not implemented"},
      {Replace(kCtBlock, R"("ignore": ["lm_head"])", R"("ignore": ["re:.*lm_head"])"), kUnimpl,
       "quantization_config.ignore = \"re:.*lm_head\" is not implemented"},
      {Replace(kCtBlock, R"("kv_cache_scheme": null)", R"("kv_cache_scheme": {"num_bits": 8})"),
       kUnimpl, "quantization_config.kv_cache_scheme = {\"num_bits\":8} is not implemented"},
      {Replace(kCtBlock, R"("transform_config": {})", R"("transform_config": {"u": 1})"), kUnimpl,
       "quantization_config.transform_config = {\"u\":1} is not implemented"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ParseQuantizationConfig(Config(c.quantization_config)).status();
    EXPECT_EQ(s.code(), c.code) << c.quantization_config << "\n" << s;
    EXPECT_NE(s.message().find(c.fragment), std::string::npos)
        << "want: " << c.fragment << "\ngot:  " << s.message();
  }
}

}  // namespace
}  // namespace tpserve
