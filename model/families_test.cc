// What each family reads into the model description, from both forms of the golden tiny models
// (tests/golden/families: a GGUF as llama.cpp's converter writes it and the config.json it came
// from): the two must describe the same computation, layer by layer.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "formats/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/config.h"

namespace tpserve {
namespace {

constexpr char kDir[] = "tests/golden/families/";

struct Both {
  ModelSpec gguf, hf;
};

Both Read(const std::string& name) {
  Both b;
  auto file = GgufFile::Open(kDir + name + ".gguf");
  EXPECT_TRUE(file.ok()) << file.status();
  auto g = ModelSpecFromGguf(**file);
  EXPECT_TRUE(g.ok()) << g.status();
  std::ifstream in(kDir + name + "_hf/config.json");
  std::stringstream text;
  text << in.rdbuf();
  auto h = ModelSpecFromHfJson(text.str());
  EXPECT_TRUE(h.ok()) << h.status();
  if (g.ok()) b.gguf = *g;
  if (h.ok()) b.hf = *h;
  return b;
}

// The same computation from either file: every field that changes a layer's math.
void ExpectSameComputation(const ModelSpec& a, const ModelSpec& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.mlp_activation, b.mlp_activation);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.sandwich_norms, b.sandwich_norms);
  EXPECT_DOUBLE_EQ(a.embedding_multiplier, b.embedding_multiplier);
  EXPECT_NEAR(a.attn_logit_softcap, b.attn_logit_softcap, 1e-6);
  EXPECT_NEAR(a.final_logit_softcap, b.final_logit_softcap, 1e-6);
  EXPECT_EQ(a.gguf_rope_rotate_half, b.gguf_rope_rotate_half);
  EXPECT_EQ(a.moe.routing, b.moe.routing);
  EXPECT_EQ(a.moe.expert_intermediate_size, b.moe.expert_intermediate_size);
  EXPECT_EQ(a.moe.shared_expert_intermediate_size, b.moe.shared_expert_intermediate_size);
  EXPECT_EQ(a.moe.correction_bias, b.moe.correction_bias);
  EXPECT_EQ(a.mla.q_lora_rank, b.mla.q_lora_rank);
  EXPECT_EQ(a.mla.kv_lora_rank, b.mla.kv_lora_rank);
  EXPECT_EQ(a.mla.qk_nope_head_dim, b.mla.qk_nope_head_dim);
  EXPECT_EQ(a.mla.qk_rope_head_dim, b.mla.qk_rope_head_dim);
  EXPECT_EQ(a.mla.v_head_dim, b.mla.v_head_dim);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  for (int64_t l = 0; l < a.num_layers; ++l) {
    EXPECT_EQ(a.IsMoeLayer(l), b.IsMoeLayer(l)) << "layer " << l;
    EXPECT_EQ(a.Layer(l).sliding_window, b.Layer(l).sliding_window) << "layer " << l;
    EXPECT_NEAR(a.Layer(l).rope_theta, b.Layer(l).rope_theta, 1e-3) << "layer " << l;
    EXPECT_EQ(a.Layer(l).rope_scaling.type, b.Layer(l).rope_scaling.type) << "layer " << l;
    EXPECT_NEAR(a.AttentionScale(l), b.AttentionScale(l), 1e-7) << "layer " << l;
  }
}

TEST(FamiliesTest, Qwen2HasBiasesAndRotatesHalves) {
  const Both b = Read("qwen2");
  EXPECT_EQ(b.gguf.family, "qwen2");
  EXPECT_TRUE(b.gguf.qkv_bias);
  EXPECT_FALSE(b.gguf.qk_norm);
  EXPECT_TRUE(b.gguf.gguf_rope_rotate_half);
  EXPECT_EQ(b.gguf.mlp_activation, Activation::kSilu);
  ExpectSameComputation(b.gguf, b.hf);
}

TEST(FamiliesTest, Qwen2YarnScalesFrequenciesAndTheAttention) {
  const Both b = Read("qwen2_yarn");
  const RopeScaling& r = b.gguf.Layer(0).rope_scaling;
  EXPECT_EQ(r.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(r.factor, 4.0);
  EXPECT_EQ(r.original_max_position_embeddings, 32);
  // q.k scaled by (0.1 ln 4 + 1)^2 on top of 1/sqrt(16).
  const double m = 0.1 * std::log(4.0) + 1.0;
  EXPECT_NEAR(b.gguf.AttentionScale(0), m * m / 4.0, 1e-12);
  ExpectSameComputation(b.gguf, b.hf);
}

TEST(FamiliesTest, Qwen3NormsEachHeadOfQAndK) {
  const Both b = Read("qwen3");
  EXPECT_TRUE(b.gguf.qk_norm);
  EXPECT_FALSE(b.gguf.qkv_bias);
  EXPECT_EQ(b.gguf.head_dim, 32);  // not hidden 64 / 4 heads
  ExpectSameComputation(b.gguf, b.hf);
}

TEST(FamiliesTest, MistralWindowComesFromConfigJsonOnly) {
  const Both b = Read("mistral");
  EXPECT_EQ(b.hf.family, "mistral");
  EXPECT_EQ(b.gguf.family, "llama");  // llama.cpp's conversion: no window
  for (int64_t l = 0; l < b.hf.num_layers; ++l) {
    EXPECT_EQ(b.hf.Layer(l).sliding_window, 8);
    EXPECT_EQ(b.gguf.Layer(l).sliding_window, 0);
  }
}

TEST(FamiliesTest, Gemma2AlternatesLocalAndGlobalWithSoftCaps) {
  const Both b = Read("gemma2");
  EXPECT_EQ(b.gguf.mlp_activation, Activation::kGeluTanh);
  EXPECT_TRUE(b.gguf.sandwich_norms);
  EXPECT_TRUE(b.hf.hf_norm_weight_offset);
  EXPECT_DOUBLE_EQ(b.gguf.embedding_multiplier, 8.0);  // sqrt(64)
  EXPECT_EQ(b.gguf.builtin_chat_format, "gemma");
  EXPECT_EQ(Read("qwen2").gguf.builtin_chat_format, "");
  EXPECT_NEAR(b.gguf.attn_logit_softcap, 5.0, 1e-6);
  EXPECT_NEAR(b.gguf.final_logit_softcap, 15.0, 1e-6);
  EXPECT_EQ(b.gguf.Layer(0).sliding_window, 8);
  EXPECT_EQ(b.gguf.Layer(1).sliding_window, 0);
  EXPECT_EQ(b.gguf.Layer(2).sliding_window, 8);
  ExpectSameComputation(b.gguf, b.hf);
}

TEST(FamiliesTest, Gemma3HasFiveLocalLayersToOneGlobalWithTheirOwnRopeBase) {
  const Both b = Read("gemma3");
  EXPECT_TRUE(b.gguf.qk_norm);
  EXPECT_EQ(b.gguf.attn_logit_softcap, 0.0);
  for (int64_t l = 0; l < 5; ++l) {
    EXPECT_EQ(b.gguf.Layer(l).sliding_window, 8) << l;
    EXPECT_DOUBLE_EQ(b.gguf.Layer(l).rope_theta, 10000.0) << l;
  }
  EXPECT_EQ(b.gguf.Layer(5).sliding_window, 0);
  EXPECT_DOUBLE_EQ(b.gguf.Layer(5).rope_theta, 1e6);
  ExpectSameComputation(b.gguf, b.hf);
}

TEST(FamiliesTest, Gemma2ConfigWithoutCapKeysGetsTransformersDefaults) {
  std::ifstream in(std::string(kDir) + "gemma2_hf/config.json");
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  for (const char* key : {"\"attn_logit_softcapping\"", "\"final_logit_softcapping\""}) {
    const size_t at = json.find(key);
    ASSERT_NE(at, std::string::npos) << key;
    json.replace(at, std::string(key).size(), "\"unused_" + std::string(key + 1));
  }
  auto spec = ModelSpecFromHfJson(json);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->attn_logit_softcap, 50.0);
  EXPECT_EQ(spec->final_logit_softcap, 30.0);
}

// Mixtral (a `llama` GGUF with llama.expert_count) and Qwen3-MoE: 8 experts of 32, softmax
// top-2 renormalized on every layer, from either file; Mixtral's config.json names its
// experts block_sparse_moe.experts.E.w1/w3/w2.
TEST(FamiliesTest, MixtralAndQwen3MoeReadTheirExperts) {
  for (const char* name : {"mixtral", "qwen3moe"}) {
    SCOPED_TRACE(name);
    const Both b = Read(name);
    const ExpertRouting want{.score = RoutingScore::kSoftmax, .num_experts = 8, .top_k = 2,
                             .renormalize = true};
    EXPECT_EQ(b.gguf.moe.routing, want);
    EXPECT_EQ(b.gguf.moe.expert_intermediate_size, 32);
    for (int64_t l = 0; l < b.gguf.num_layers; ++l) EXPECT_TRUE(b.gguf.IsMoeLayer(l)) << l;
    ExpectSameComputation(b.gguf, b.hf);
  }
  const Both mixtral = Read("mixtral");
  EXPECT_EQ(mixtral.gguf.family, "mixtral");
  EXPECT_EQ(mixtral.hf.moe.hf_names, MoeSpec::HfNames::kBlockSparseMoe);
  const Both qwen = Read("qwen3moe");
  EXPECT_TRUE(qwen.gguf.qk_norm);
  EXPECT_EQ(qwen.hf.moe.hf_names, MoeSpec::HfNames::kMlpExperts);
  // Parameters: 8 experts of 3 x 64 x 32 and a router of 8 x 64 per layer; a token uses 2.
  EXPECT_EQ(qwen.gguf.NumParameters() - qwen.gguf.NumActiveParameters(),
            2 * 6 * 3 * 64 * 32);
}

// GLM-4.5's MoE (glm4moe): layer 0 dense, sigmoid scores with a choosing-only correction bias,
// top-2 within the best 2 of 4 groups, renormalized and scaled by 2.5, one shared expert,
// q/k/v biases and QK-norm, from either file; the GGUF's pre-MLP norm is post_attention_norm.
TEST(FamiliesTest, Glm4MoeReadsGroupsBiasSharedExpertAndDenseLayers) {
  const Both b = Read("glm4moe");
  const ExpertRouting want{.score = RoutingScore::kSigmoid, .num_experts = 8, .top_k = 2,
                           .num_groups = 4, .top_groups = 2, .renormalize = true,
                           .scaling = 2.5f};
  for (const ModelSpec* spec : {&b.gguf, &b.hf}) {
    EXPECT_EQ(spec->family, "glm4moe");
    EXPECT_EQ(spec->moe.routing, want);
    EXPECT_EQ(spec->moe.shared_expert_intermediate_size, 32);
    EXPECT_TRUE(spec->moe.correction_bias);
    EXPECT_TRUE(spec->qkv_bias);
    EXPECT_TRUE(spec->qk_norm);
    EXPECT_TRUE(spec->gguf_ffn_norm_is_post_attention);
    EXPECT_FALSE(spec->IsMoeLayer(0));
    EXPECT_TRUE(spec->IsMoeLayer(1));
    EXPECT_TRUE(spec->IsMoeLayer(2));
  }
  ExpectSameComputation(b.gguf, b.hf);
}

// Llama 4 (llama4 / llama4_text): layers 1 and 3 sparse (4 experts, top-1 on the logits, the
// sigmoid weight on the expert's input, a shared expert), 0 and 2 dense of intermediate_size_mlp
// 96; layers 0-2 RoPE with chunked attention and the weightless L2 QK-norm, layer 3 NoPE with
// temperature tuning. The chunk and the temperature are the config.json's (8; floor 4, scale
// 0.5) and llama.cpp's for the GGUF (8192; 8192, 0.1); pairs of neighbours rotate in both.
TEST(FamiliesTest, Llama4ReadsIRopeChunksTemperatureAndInputWeightedExperts) {
  const Both b = Read("llama4");
  const ExpertRouting want{.score = RoutingScore::kSigmoid, .num_experts = 4, .top_k = 1,
                           .select_on_logits = true, .weight_on_input = true};
  for (const ModelSpec* spec : {&b.gguf, &b.hf}) {
    EXPECT_EQ(spec->family, "llama4");
    EXPECT_EQ(spec->moe.routing, want);
    EXPECT_EQ(spec->intermediate_size, 96);
    EXPECT_EQ(spec->moe.expert_intermediate_size, 32);
    EXPECT_EQ(spec->moe.shared_expert_intermediate_size, 32);
    EXPECT_EQ(spec->moe.hf_names, MoeSpec::HfNames::kFusedFeedForward);
    EXPECT_FALSE(spec->qk_norm);  // no weights: the L2 norm is per layer
    EXPECT_FALSE(spec->gguf_rope_rotate_half);
    EXPECT_TRUE(spec->hf_rope_interleaved);
    EXPECT_EQ(spec->hf_mlp_module, "feed_forward");
    for (int64_t l = 0; l < 4; ++l) {
      EXPECT_EQ(spec->IsMoeLayer(l), l % 2 == 1) << l;
      EXPECT_EQ(spec->Layer(l).rope, l != 3) << l;
      EXPECT_EQ(spec->Layer(l).qk_l2_norm, l != 3) << l;
    }
  }
  for (int64_t l = 0; l < 3; ++l) {
    EXPECT_EQ(b.hf.Layer(l).attention_chunk, 8) << l;
    EXPECT_EQ(b.gguf.Layer(l).attention_chunk, 8192) << l;
    EXPECT_EQ(b.hf.Layer(l).temperature_floor, 0) << l;
  }
  EXPECT_EQ(b.hf.Layer(3).attention_chunk, 0);
  EXPECT_EQ(b.hf.Layer(3).temperature_floor, 4);
  EXPECT_DOUBLE_EQ(b.hf.Layer(3).temperature_scale, 0.5);
  EXPECT_EQ(b.gguf.Layer(3).temperature_floor, 8192);
  EXPECT_DOUBLE_EQ(b.gguf.Layer(3).temperature_scale, 0.1);
  ExpectSameComputation(b.gguf, b.hf);
}

// Llama4ForConditionalGeneration's config.json (model_type llama4, as Scout and Maverick are
// published): the text model's keys under text_config, read as llama4_text's; its tensors under
// language_model., the vision tower's and the projector's left unserved.
TEST(FamiliesTest, Llama4MultimodalConfigIsReadAsItsTextConfig) {
  std::ifstream in(std::string(kDir) + "llama4_hf/config.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string wrapped = R"({"architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4", "vision_config": {"hidden_size": 1408}, "text_config": )" +
                              text.str() + "}";
  absl::StatusOr<ModelSpec> spec = ModelSpecFromHfJson(wrapped);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<ModelSpec> plain = ModelSpecFromHfJson(text.str());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(spec->family, "llama4");
  ExpectSameComputation(*spec, *plain);
  EXPECT_EQ(spec->Layer(0).attention_chunk, 8);
  EXPECT_EQ(spec->hf_weight_prefix, "language_model.");
  EXPECT_THAT(spec->hf_unserved_weight_prefixes,
              ::testing::ElementsAre("vision_model.", "multi_modal_projector."));
  EXPECT_EQ(plain->hf_weight_prefix, "");
  EXPECT_TRUE(plain->hf_unserved_weight_prefixes.empty());
  // An expert count that does not fit ExpertRouting's int32 is refused by name, not wrapped.
  std::string huge = text.str();
  const std::string four = "\"num_local_experts\": 4,";
  const size_t at = huge.find(four);
  ASSERT_NE(at, std::string::npos);
  huge.replace(at, four.size(), "\"num_local_experts\": 4294967300,");
  absl::StatusOr<ModelSpec> wrapped_count = ModelSpecFromHfJson(huge);
  ASSERT_FALSE(wrapped_count.ok());
  EXPECT_EQ(wrapped_count.status().message(),
            "config.json key 'num_local_experts' is 4294967300; a count in [0, 2147483647] was "
            "expected");
  absl::StatusOr<ModelSpec> bare = ModelSpecFromHfJson(R"({"model_type": "llama4"})");
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().message(),
            "config.json key 'text_config' is missing or not an object: model_type \"llama4\" "
            "keeps its text model's keys there");
}

// Llama4TextConfig's defaults and lists: no_rope_layers (1: RoPE), moe_layers, layer_types,
// attention_chunk_size null (no chunks), attn_temperature_tuning as the first configs' number.
TEST(FamiliesTest, Llama4ConfigDefaultsListsAndRefusals) {
  const std::string base = R"({"model_type": "llama4_text", "hidden_size": 64,
    "intermediate_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
    "max_position_embeddings": 128)";
  absl::StatusOr<ModelSpec> d = ModelSpecFromHfJson(base + "}");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->intermediate_size, 16384);  // intermediate_size_mlp's default, unused here:
  EXPECT_EQ(d->moe.routing.num_experts, 16);  // every layer sparse (interleave step 1)
  for (int64_t l = 0; l < 4; ++l) EXPECT_TRUE(d->IsMoeLayer(l)) << l;
  EXPECT_EQ(d->Layer(0).attention_chunk, 8192);
  EXPECT_EQ(d->Layer(3).temperature_floor, 8192);
  EXPECT_DOUBLE_EQ(d->Layer(3).temperature_scale, 0.1);
  absl::StatusOr<ModelSpec> s = ModelSpecFromHfJson(
      base + R"(, "no_rope_layers": [1, 0, 1, 1], "moe_layers": [2], "use_qk_norm": false,
      "attention_chunk_size": null, "attn_temperature_tuning": 0, "num_local_experts": 2})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->Layer(1).rope);
  EXPECT_TRUE(s->Layer(3).rope);
  EXPECT_FALSE(s->Layer(0).qk_l2_norm);
  EXPECT_EQ(s->Layer(0).attention_chunk, 0);
  EXPECT_EQ(s->Layer(1).temperature_floor, 0);
  EXPECT_TRUE(s->IsMoeLayer(2));
  EXPECT_FALSE(s->IsMoeLayer(3));
  const std::pair<std::string, std::string> refused[] = {
      {R"(, "no_rope_layers": [1, 2, 1, 0])",
       "config.json key 'no_rope_layers' [1] is 2; 1 (RoPE) or 0 (NoPE) was expected"},
      {R"(, "layer_types": ["sliding_attention", "full_attention", "full_attention",
         "full_attention"])",
       "config.json key 'layer_types[0]' = \"sliding_attention\" is not implemented: Llama 4's "
       "layer kinds are 'chunked_attention' and 'full_attention'"},
      {R"(, "attention_chunk_size": 0)",
       "config.json key 'attention_chunk_size' is 0; it must be positive or null"},
      {R"(, "attention_bias": true)",
       "config.json key 'attention_bias' = true is not implemented: Llama 4's attention "
       "projections carry no bias here"},
  };
  for (const auto& [extra, message] : refused) {
    absl::StatusOr<ModelSpec> r = ModelSpecFromHfJson(base + extra + "}");
    ASSERT_FALSE(r.ok()) << extra;
    EXPECT_EQ(r.status().message(), message);
  }
}

// transformers' Glm4MoeConfig rotates half of each head when partial_rotary_factor is absent,
// and GLM-4.5's checkpoints carry a multi-token-prediction layer: both refused by name.
TEST(FamiliesTest, Glm4MoeRefusesPartialRopeAndMtpLayers) {
  std::ifstream in(std::string(kDir) + "glm4moe_hf/config.json");
  std::stringstream text;
  text << in.rdbuf();
  const std::string config = text.str();
  ASSERT_TRUE(ModelSpecFromHfJson(config).ok());
  auto without = [&](const std::string& key, const std::string& replacement) {
    std::string c = config;
    const size_t at = c.find("\"" + key + "\"");
    EXPECT_NE(at, std::string::npos) << key;
    const size_t end = c.find_first_of(",}", at);
    c.replace(at, end - at, replacement);
    return ModelSpecFromHfJson(c).status();
  };
  absl::Status s = without("partial_rotary_factor", "\"unused_key\": 0");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("partial_rotary_factor"));
  s = without("num_nextn_predict_layers", "\"num_nextn_predict_layers\": 1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("multi-token-prediction layers"));
}

std::string Qwen3MoeConfig(const std::string& extra) {
  return R"({"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "vocab_size": 128, "max_position_embeddings": 128,
    "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32)" +
         extra + "}";
}

// transformers' Qwen3MoeDecoderLayer: layer l is sparse unless listed in mlp_only_layers or
// (l + 1) % decoder_sparse_step != 0; the others keep a dense MLP of intermediate_size.
TEST(FamiliesTest, Qwen3MoeDenseLayersAndRenormalizationFromConfigJson) {
  absl::StatusOr<ModelSpec> spec = ModelSpecFromHfJson(Qwen3MoeConfig(
      R"(, "decoder_sparse_step": 2, "mlp_only_layers": [3], "norm_topk_prob": false)"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->IsMoeLayer(0));
  EXPECT_TRUE(spec->IsMoeLayer(1));
  EXPECT_FALSE(spec->IsMoeLayer(2));
  EXPECT_FALSE(spec->IsMoeLayer(3));
  EXPECT_FALSE(spec->moe.routing.renormalize);
  EXPECT_FALSE(spec->tie_word_embeddings);  // Qwen3MoeConfig's default
  // One sparse layer: its 8 experts and router instead of one 96-wide MLP.
  absl::StatusOr<ModelSpec> dense = ModelSpecFromHfJson(Qwen3MoeConfig(
      R"(, "mlp_only_layers": [0, 1, 2, 3])"));
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(spec->NumParameters() - dense->NumParameters(),
            8 * 3 * 64 * 32 + 8 * 64 - 3 * 64 * 96);
}

TEST(FamiliesTest, MoeKeysThatCannotBeHonouredAreRefusedByName) {
  const std::pair<std::string, std::string> cases[] = {
      {R"(, "mlp_only_layers": [9])",
       "config.json key 'mlp_only_layers' holds 9; a layer index in [0, 4) was expected"},
      {R"(, "decoder_sparse_step": 0)",
       "config.json key 'decoder_sparse_step' is 0; it must be >= 1"},
  };
  for (const auto& [extra, message] : cases) {
    absl::StatusOr<ModelSpec> spec = ModelSpecFromHfJson(Qwen3MoeConfig(extra));
    ASSERT_FALSE(spec.ok()) << extra;
    EXPECT_EQ(spec.status().message(), message);
  }
  std::string too_many = Qwen3MoeConfig("");
  const std::string two = "\"num_experts_per_tok\": 2";
  too_many.replace(too_many.find(two), two.size(), "\"num_experts_per_tok\": 9");
  absl::StatusOr<ModelSpec> spec = ModelSpecFromHfJson(too_many);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            "ModelSpec.moe.routing: top_k 9 is outside [1, num_experts 8]");
}

// The parameter formula counts exactly the elements each golden GGUF holds, whatever the
// family brings (biases, QK-norms, sandwich norms, routers, experts, shared experts,
// correction biases).
// DeepSeek-V3's shape in small: multi-head latent attention with a query latent and YaRN
// (deepseek2), and without either (deepseek2_lite, as DeepSeek-V2-Lite), from llama.cpp's
// deepseek2 GGUF (attn_k_b / attn_v_b, the latent's widths as key/value_length_mla) and from
// the config.json; the same computation from both.
TEST(FamiliesTest, Deepseek2ReadsLatentAttentionYarnAndGroupedExperts) {
  const Both d = Read("deepseek2");
  ExpectSameComputation(d.gguf, d.hf);
  for (const ModelSpec* spec : {&d.gguf, &d.hf}) {
    EXPECT_EQ(spec->family, "deepseek2");
    EXPECT_EQ(spec->mla.q_lora_rank, 32);
    EXPECT_EQ(spec->mla.kv_lora_rank, 32);
    EXPECT_EQ(spec->mla.qk_nope_head_dim, 16);
    EXPECT_EQ(spec->mla.qk_rope_head_dim, 8);
    EXPECT_EQ(spec->mla.v_head_dim, 16);
    EXPECT_EQ(spec->head_dim, 24);
    EXPECT_EQ(spec->num_kv_heads, 4);
    EXPECT_FALSE(spec->gguf_rope_rotate_half);
    EXPECT_EQ(spec->Layer(0).rope_scaling.type, RopeScalingType::kYarn);
    EXPECT_NEAR(spec->Layer(0).rope_scaling.mscale_all_dim, 1.0, 1e-6);
    const double m = 0.1 * std::log(4.0) + 1.0;
    EXPECT_NEAR(spec->AttentionScale(0), m * m / std::sqrt(24.0), 1e-6);
    EXPECT_FALSE(spec->IsMoeLayer(0));
    EXPECT_TRUE(spec->IsMoeLayer(1));
    EXPECT_EQ(spec->moe.routing.num_groups, 4);
    EXPECT_EQ(spec->moe.routing.top_groups, 2);
    EXPECT_EQ(spec->moe.routing.score, RoutingScore::kSigmoid);
    EXPECT_FLOAT_EQ(spec->moe.routing.scaling, 2.5f);
    EXPECT_EQ(spec->moe.shared_expert_intermediate_size, 32);
  }
  const Both lite = Read("deepseek2_lite");
  ExpectSameComputation(lite.gguf, lite.hf);
  EXPECT_EQ(lite.gguf.mla.q_lora_rank, 0);
  EXPECT_EQ(lite.gguf.Layer(0).rope_scaling.type, RopeScalingType::kNone);
  EXPECT_NEAR(lite.gguf.AttentionScale(0), 1.0 / std::sqrt(24.0), 1e-7);
}

TEST(FamiliesTest, ParameterCountIsEveryTensorOfTheGoldenFiles) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/golden/families")) {
    if (entry.path().extension() != ".gguf") continue;
    ++files;
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<ModelSpec> spec = ModelSpecFromGguf(**file);
    ASSERT_TRUE(spec.ok()) << entry.path() << ": " << spec.status();
    int64_t elements = 0;
    for (const std::string& name : (*file)->TensorNames()) {
      elements += (*file)->Find(name)->num_elements();
    }
    EXPECT_EQ(spec->NumParameters(), elements) << entry.path();
  }
  EXPECT_GE(files, 14);
}

TEST(FamiliesTest, EveryFamilyIsNamed) {
  EXPECT_THAT(ModelFamilyNames(),
              ::testing::ElementsAre("deepseek2", "gemma2", "gemma3", "glm4moe", "llama",
                                     "llama4", "mistral", "mixtral", "qwen2", "qwen3",
                                     "qwen3moe"));
}

}  // namespace
}  // namespace tpserve
