#include "model/config.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModelSpecPresetTest, Llama31_8BHasThePublishedShapes) {
  absl::StatusOr<ModelSpec> c = ModelSpecPreset("llama-3.1-8b");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 14336);
  EXPECT_EQ(c->num_layers, 32);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->max_context_tokens, 131072);
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_TRUE(c->rope_scaling.enabled());
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_id, 128001);
  EXPECT_THAT(c->extra_eos_token_ids, ElementsAre(128008, 128009));
  EXPECT_TRUE(c->Validate().ok());
}

TEST(ModelSpecPresetTest, BiggerLlamasShareVocabContextAndRope) {
  absl::StatusOr<ModelSpec> b70 = ModelSpecPreset("70b");
  ASSERT_TRUE(b70.ok()) << b70.status();
  EXPECT_EQ(b70->name, "llama-3.1-70b");
  EXPECT_EQ(b70->hidden_size, 8192);
  EXPECT_EQ(b70->intermediate_size, 28672);
  EXPECT_EQ(b70->num_layers, 80);
  EXPECT_EQ(b70->num_heads, 64);
  EXPECT_EQ(b70->num_kv_heads, 8);
  absl::StatusOr<ModelSpec> b405 = ModelSpecPreset("Llama-3.1-405B");
  ASSERT_TRUE(b405.ok()) << b405.status();
  EXPECT_EQ(b405->hidden_size, 16384);
  EXPECT_EQ(b405->intermediate_size, 53248);
  EXPECT_EQ(b405->num_layers, 126);
  EXPECT_EQ(b405->num_heads, 128);
  EXPECT_EQ(b405->num_kv_heads, 8);
  for (const ModelSpec* c : {&*b70, &*b405}) {
    EXPECT_EQ(c->vocab_size, 128256);
    EXPECT_EQ(c->max_context_tokens, 131072);
    EXPECT_EQ(c->rope_theta, 500000.0);
    EXPECT_TRUE(c->rope_scaling.enabled());
    EXPECT_TRUE(c->Validate().ok());
  }
}

TEST(ModelSpecPresetTest, SmolLM2IsTiedWithSmallGqa) {
  absl::StatusOr<ModelSpec> c = ModelSpecPreset("smollm2");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "smollm2-135m");
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_context_tokens, 8192);
  EXPECT_EQ(c->rope_theta, 100000.0);
  EXPECT_FALSE(c->rope_scaling.enabled());
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
  EXPECT_TRUE(c->Validate().ok());
}

TEST(ModelSpecPresetTest, UnknownNameListsTheKnownOnes) {
  absl::Status s = ModelSpecPreset("gpt-2").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no model preset 'gpt-2'"));
  EXPECT_THAT(s.message(), HasSubstr("llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, smollm2-135m"));
  EXPECT_THAT(ModelSpecPresetNames(),
              ElementsAre("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "smollm2-135m",
                          "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "llama4-scout",
                          "llama4-maverick", "deepseek-v3", "kimi-k2"));
}

// Expected counts worked by hand (head_dim 128 for the Llamas, 64 for SmolLM2):
//   per layer = q (h*h) + k, v (2*h*kv*hd) + o (h*h) + MLP (3*h*inter) + 2 norms (2*h)
//   total     = layers * per_layer + vocab*h (embedding) [+ vocab*h LM head] + h (final norm)
TEST(ModelSpecTest, NumParametersMatchesHandCounts) {
  // 8B: per layer 16777216 + 8388608 + 16777216 + 176160768 + 8192 = 218112000;
  //     32 * 218112000 + 2 * 525336576 + 4096 = 8030261248.
  EXPECT_EQ(ModelSpecPreset("8b")->NumParameters(), 8030261248);
  // 70B: per layer 67108864 + 16777216 + 67108864 + 704643072 + 16384 = 855654400;
  //      80 * 855654400 + 2 * 1050673152 + 8192 = 70553706496.
  EXPECT_EQ(ModelSpecPreset("70b")->NumParameters(), 70553706496);
  // 405B: per layer 268435456 + 33554432 + 268435456 + 2617245696 + 32768 = 3187703808;
  //       126 * 3187703808 + 2 * 2101346304 + 16384 = 405853388800.
  EXPECT_EQ(ModelSpecPreset("405b")->NumParameters(), 405853388800);
  // SmolLM2 (tied): per layer 331776 + 221184 + 331776 + 2654208 + 1152 = 3540096;
  //                 30 * 3540096 + 28311552 + 576 = 134515008.
  EXPECT_EQ(ModelSpecPreset("smollm2")->NumParameters(), 134515008);
}

// The mixtures of experts against their names (Qwen3-235B-A22B: 235B in all, 22B active;
// Mixtral 8x22B: 141B and 39B as Mistral publishes them), worked by hand:
//   Qwen3-235B per layer: attention 4096*8192 + 2*4096*512 + 8192*4096 + QK-norms 2*128
//     = 71303424; experts 128 * 3*4096*1536 + router 128*4096 = 2416443392; norms 8192
//     -> 2487755008; 94 layers + 2 * 151936*4096 + 4096 = 235093634560.
//     Active: less 120 idle experts * 18874368 * 94 = 212902871040 -> 22190763520.
//   Mixtral 8x22B per layer: attention 2*6144*6144 + 2*6144*1024 = 88080384; experts
//     8 * 3*6144*16384 + 8*6144 = 2415968256; norms 12288 -> 2504060928; 56 layers
//     + 2 * 32000*6144 + 6144 = 140620634112. Active: less 6 * 301989888 * 56 -> 39152031744.
TEST(ModelSpecTest, MoePresetsCountEveryExpertAndTheActiveOnes) {
  absl::StatusOr<ModelSpec> qwen = ModelSpecPreset("qwen3-235b-a22b");
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->family, "qwen3moe");
  EXPECT_EQ(qwen->NumParameters(), 235093634560);
  EXPECT_EQ(qwen->NumActiveParameters(), 22190763520);
  absl::StatusOr<ModelSpec> mixtral = ModelSpecPreset("mixtral-8x22b");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status();
  EXPECT_EQ(mixtral->NumParameters(), 140620634112);
  EXPECT_EQ(mixtral->NumActiveParameters(), 39152031744);
  // A dense model's active parameters are all of them.
  EXPECT_EQ(ModelSpecPreset("8b")->NumActiveParameters(), 8030261248);
}

// Llama 4's text decoders (Meta: Scout 109B with the vision tower, 17B active; Maverick 400B,
// 17B active), worked by hand. hidden 5120, 40 heads of 128, 8 KV heads, vocab 202048 untied,
// experts and the shared expert 8192 wide, dense MLPs 16384; the L2 QK-norm has no weights:
//   attention 5120*5120 + 2*5120*1024 + 5120*5120 = 62914560; norms 10240;
//   a sparse layer's feed-forward E * 3*5120*8192 + router E*5120 + shared 3*5120*8192;
//   embedding + LM head + final norm 2*202048*5120 + 5120 = 2068976640.
//   Scout: 48 sparse layers of E = 16: 62914560 + 10240 + 2139176960 = 2202101760
//     -> 48 * 2202101760 + 2068976640 = 107769861120; active: less 15 idle experts *
//     125829120 * 48 = 90596966400 -> 17172894720.
//   Maverick: 24 dense layers of 62914560 + 10240 + 3*5120*16384 = 314583040 and 24 sparse of
//     E = 128: 62914560 + 10240 + 16106127360 + 655360 + 125829120 = 16295536640
//     -> 398642872320 + 2068976640 = 400711848960; active: less 127 * 125829120 * 24
//     = 383527157760 -> 17184691200.
TEST(ModelSpecTest, Llama4PresetsCountEveryExpertAndTheActiveOnes) {
  absl::StatusOr<ModelSpec> scout = ModelSpecPreset("llama4-scout");
  ASSERT_TRUE(scout.ok()) << scout.status();
  EXPECT_EQ(scout->family, "llama4");
  EXPECT_EQ(scout->NumParameters(), 107769861120);
  EXPECT_EQ(scout->NumActiveParameters(), 17172894720);
  EXPECT_EQ(scout->Layer(0).rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(scout->Layer(0).rope_scaling.factor, 16.0);
  EXPECT_EQ(scout->Layer(0).rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(scout->Layer(0).rope_scaling.high_freq_factor, 1.0);
  EXPECT_EQ(scout->max_context_tokens, 10485760);  // the Instruct checkpoint's 10M
  EXPECT_TRUE(scout->Layer(0).qk_l2_norm);
  absl::StatusOr<ModelSpec> maverick = ModelSpecPreset("llama4-maverick");
  ASSERT_TRUE(maverick.ok()) << maverick.status();
  EXPECT_EQ(maverick->NumParameters(), 400711848960);
  EXPECT_EQ(maverick->NumActiveParameters(), 17184691200);
  EXPECT_EQ(maverick->max_context_tokens, 1048576);
  EXPECT_EQ(maverick->Layer(0).rope_scaling.type, RopeScalingType::kNone);
  EXPECT_FALSE(maverick->IsMoeLayer(0));
  EXPECT_TRUE(maverick->IsMoeLayer(1));
  EXPECT_FALSE(maverick->Layer(0).qk_l2_norm);
  for (const ModelSpec* spec : {&*scout, &*maverick}) {
    EXPECT_EQ(spec->Layer(2).attention_chunk, 8192);
    EXPECT_FALSE(spec->Layer(3).rope);
    EXPECT_EQ(spec->Layer(3).temperature_floor, 8192);
    EXPECT_EQ(spec->extra_eos_token_ids, (std::vector<int64_t>{200007, 200008}));
  }
}

// DeepSeek-V3 (published: 671B, 37B activated; its 14B multi-token-prediction layer not served
// or counted) and Kimi K2 (1T, 32B activated), worked by hand. hidden 7168, q_lora 1536,
// kv_lora 512, heads of nope 128 + rope 64 and values 128, experts 2048 wide, dense MLPs 18432:
//   attention q_a 7168*1536 + q_b 1536*H*192 + kv_a 7168*576 + kv_b 512*H*256 + o H*128*7168
//     + its norms 1536 + 512: V3 (H = 128) 187107328, K2 (H = 64) 101124096;
//   layer norms 14336; a dense MLP 396361728; a sparse layer E * 44040192 + router E * 7168
//     + bias E + shared 44040192.
//   V3: 3 dense layers of 583483392, 58 sparse of E = 256: 11507286272, embedding + LM head +
//     final norm 2*129280*7168 + 7168 = 1853365248 -> 671026419200; active: less
//     248 * 44040192 * 58 = 633474121728 -> 37552297472.
//   K2: 1 dense layer of 497500160, 60 sparse of E = 384: 17059365248, 2*163840*7168 + 7168
//     = 2348817408 -> 1026408232448; active: less 376 * 44040192 * 60 -> 32861500928.
// The latent cache: 61 layers * (512 + 64) values, 70272 bytes a token in bf16 (GQA of 128
// heads of 192 would be 61 * 2 * 128 * 192 * 2 = 5996544).
TEST(ModelSpecTest, DeepseekPresetsCountTheLatentAttentionAndEveryExpert) {
  absl::StatusOr<ModelSpec> v3 = ModelSpecPreset("deepseek-v3");
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_EQ(v3->family, "deepseek2");
  EXPECT_EQ(v3->mla.q_lora_rank, 1536);
  EXPECT_EQ(v3->mla.kv_lora_rank, 512);
  EXPECT_EQ(v3->mla.latent_dim(), 576);
  EXPECT_EQ(v3->head_dim, 192);
  EXPECT_EQ(v3->ValueHeadDim(), 128);
  EXPECT_EQ(v3->RopeDim(), 64);
  EXPECT_EQ(v3->num_kv_heads, 128);
  EXPECT_EQ(v3->NumParameters(), 671026419200);
  EXPECT_EQ(v3->NumActiveParameters(), 37552297472);
  EXPECT_FALSE(v3->IsMoeLayer(2));
  EXPECT_TRUE(v3->IsMoeLayer(3));
  EXPECT_EQ(v3->moe.routing, (ExpertRouting{.score = RoutingScore::kSigmoid,
                                            .num_experts = 256,
                                            .top_k = 8,
                                            .num_groups = 8,
                                            .top_groups = 4,
                                            .renormalize = true,
                                            .scaling = 2.5f}));
  EXPECT_EQ(v3->moe.shared_expert_intermediate_size, 2048);
  EXPECT_TRUE(v3->moe.correction_bias);
  // YaRN factor 40 with mscale_all_dim 1: scores scaled by (0.1 ln 40 + 1)^2 / sqrt(192).
  const double m = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(v3->AttentionScale(0), m * m / std::sqrt(192.0), 1e-12);
  EXPECT_EQ(v3->hf_unserved_weight_prefixes, std::vector<std::string>{"model.layers.61."});
  absl::StatusOr<ModelSpec> k2 = ModelSpecPreset("kimi-k2");
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_EQ(k2->family, "deepseek2");
  EXPECT_EQ(k2->NumParameters(), 1026408232448);
  EXPECT_EQ(k2->NumActiveParameters(), 32861500928);
  EXPECT_EQ(k2->moe.routing.num_groups, 1);
  EXPECT_FLOAT_EQ(k2->moe.routing.scaling, 2.827f);
  EXPECT_FALSE(k2->IsMoeLayer(0));
  EXPECT_TRUE(k2->IsMoeLayer(1));
  EXPECT_TRUE(k2->hf_unserved_weight_prefixes.empty());
}

TEST(ModelSpecTest, MlaShapesAreValidatedByName) {
  ModelSpec v3 = *ModelSpecPreset("deepseek-v3");
  ModelSpec c = v3;
  c.head_dim = 128;
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("ModelSpec.head_dim 128 must be mla.qk_nope_head_dim 128 + "
                        "mla.qk_rope_head_dim 64 = 192"));
  c = v3;
  c.mla.qk_rope_head_dim = 63;
  c.mla.qk_nope_head_dim = 129;
  EXPECT_THAT(c.Validate().message(), HasSubstr("mla.qk_rope_head_dim 63 must be even"));
  c = v3;
  c.mla.v_head_dim = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("ModelSpec.mla.v_head_dim is 0"));
  c = v3;
  c.num_kv_heads = 1;
  EXPECT_THAT(c.Validate().message(), HasSubstr("num_kv_heads 1 must equal num_heads 128"));
  c = v3;
  for (LayerSpec& l : c.layers) l.rope_scaling.mscale = 0.707;
  const absl::Status s = c.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("mscale 0.707 and mscale_all_dim 1 differ"));
}

TEST(ModelSpecTest, ValidateNamesTheFieldAndBound) {
  ModelSpec c = *ModelSpecPreset("8b");
  c.num_kv_heads = 5;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.Validate().message(), "ModelSpec.num_kv_heads 5 must divide num_heads 32");
  c = *ModelSpecPreset("8b");
  c.hidden_size = 0;
  EXPECT_EQ(c.Validate().message(), "ModelSpec.hidden_size is 0; it must be positive");
  c = *ModelSpecPreset("8b");
  c.head_dim = 127;
  EXPECT_THAT(c.Validate().message(), HasSubstr("head_dim 127 must be even"));
  c = *ModelSpecPreset("8b");
  c.rms_norm_eps = 0;
  EXPECT_THAT(c.Validate().message(), HasSubstr("rms_norm_eps 0 must be positive"));
  c = *ModelSpecPreset("8b");
  c.rope_scaling.high_freq_factor = 0.5;
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("rope_scaling.high_freq_factor 0.5 must not be below low_freq_factor 1"));
  c.rope_scaling.high_freq_factor = 1.0;  // Llama 4 Scout's: no band between the two bounds
  EXPECT_TRUE(c.Validate().ok());
  c = *ModelSpecPreset("8b");
  c.eos_token_id = 128256;
  EXPECT_THAT(c.Validate().message(),
              HasSubstr("eos_token_id is 128256; it must be in [-1 (unset), 0, 128256)"));
  c = *ModelSpecPreset("8b");
  c.extra_eos_token_ids.push_back(-1);
  EXPECT_THAT(c.Validate().message(), HasSubstr("extra_eos_token_ids is -1"));
}

// The published config.json of meta-llama/Llama-3.1-8B-Instruct (as input text).
constexpr char kLlama31_8BJson[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.42.3", "use_cache": true, "vocab_size": 128256})";

TEST(ModelSpecFromHfJsonTest, Llama31ConfigMatchesThePreset) {
  absl::StatusOr<ModelSpec> c = ModelSpecFromHfJson(kLlama31_8BJson);
  ASSERT_TRUE(c.ok()) << c.status();
  const ModelSpec preset = *ModelSpecPreset("8b");
  EXPECT_EQ(c->name, "hf-config");
  EXPECT_EQ(c->vocab_size, preset.vocab_size);
  EXPECT_EQ(c->hidden_size, preset.hidden_size);
  EXPECT_EQ(c->intermediate_size, preset.intermediate_size);
  EXPECT_EQ(c->num_layers, preset.num_layers);
  EXPECT_EQ(c->num_heads, preset.num_heads);
  EXPECT_EQ(c->num_kv_heads, preset.num_kv_heads);
  EXPECT_EQ(c->head_dim, preset.head_dim);
  EXPECT_EQ(c->max_context_tokens, preset.max_context_tokens);
  EXPECT_EQ(c->rope_theta, preset.rope_theta);
  EXPECT_TRUE(c->rope_scaling.enabled());
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->rms_norm_eps, 1e-5);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_id, 128001);
  EXPECT_THAT(c->extra_eos_token_ids, ElementsAre(128008, 128009));
  EXPECT_EQ(c->NumParameters(), preset.NumParameters());
}

TEST(ModelSpecFromHfJsonTest, DefaultsForOptionalKeys) {
  // The older "type" spelling of rope_scaling, an int eos, no kv heads, head_dim or eps.
  absl::StatusOr<ModelSpec> c = ModelSpecFromHfJson(R"({
      "_name_or_path": "tiny", "hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
      "max_position_embeddings": 2048, "eos_token_id": 7, "tie_word_embeddings": true,
      "rope_scaling": {"type": "llama3", "factor": 4}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->name, "tiny");
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->rope_scaling.factor, 4.0);
  EXPECT_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_EQ(c->eos_token_id, 7);
  EXPECT_TRUE(c->extra_eos_token_ids.empty());
}

TEST(ModelSpecFromHfJsonTest, ErrorsNameTheKey) {
  const std::string base = R"("hidden_size": 256, "intermediate_size": 512,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
      "max_position_embeddings": 2048)";
  struct Case {
    std::string json;
    absl::StatusCode code;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"{", absl::StatusCode::kInvalidArgument, "config.json is not valid JSON"},
      {"[]", absl::StatusCode::kInvalidArgument, "config.json is not a JSON object"},
      {R"({"hidden_size": 256})", absl::StatusCode::kInvalidArgument,
       "config.json key 'intermediate_size' is missing"},
      {"{" + base + R"(, "num_key_value_heads": "8"})", absl::StatusCode::kInvalidArgument,
       "config.json key 'num_key_value_heads' must be an integer, got \"8\""},
      {"{" + base + R"(, "num_key_value_heads": 3})", absl::StatusCode::kInvalidArgument,
       "ModelSpec.num_kv_heads 3 must divide num_heads 4"},
      {"{" + base + R"(, "rope_scaling": {"rope_type": "longrope", "factor": 4}})",
       absl::StatusCode::kUnimplemented,
       "rope_scaling type 'longrope' is not implemented (supported: 'default', 'llama3', "
       "'linear', 'yarn')"},
      {"{" + base + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4}})",
       absl::StatusCode::kInvalidArgument,
       "config.json key 'rope_scaling.original_max_position_embeddings' is missing (yarn)"},
      {"{" + base + R"(, "model_type": "qwen2", "use_sliding_window": true})",
       absl::StatusCode::kUnimplemented,
       "config.json key 'use_sliding_window' = true is not implemented"},
      {"{" + base + R"(, "attention_bias": true})", absl::StatusCode::kUnimplemented,
       "config.json key 'attention_bias' = true is not implemented"},
      {"{" + base + R"(, "hidden_act": "gelu"})", absl::StatusCode::kUnimplemented,
       "config.json key 'hidden_act' = \"gelu\" is not implemented: this family's MLP computes "
       "'silu'"},
      {"{" + base + R"(, "partial_rotary_factor": 0.5})", absl::StatusCode::kUnimplemented,
       "config.json key 'partial_rotary_factor' = 0.5 is not implemented"},
      {"{" + base + R"(, "model_type": "gemma3_text", "sliding_window": 8,
           "layer_types": ["full_attention", "chunked_attention"]})",
       absl::StatusCode::kUnimplemented,
       "config.json key 'layer_types[1]' = \"chunked_attention\" is not implemented"},
      {"{" + base + R"(, "rope_scaling": {"rope_type": "llama3"}})",
       absl::StatusCode::kInvalidArgument, "config.json key 'rope_scaling.factor' is missing"},
      {"{" + base + R"(, "eos_token_id": []})", absl::StatusCode::kInvalidArgument,
       "config.json key 'eos_token_id' must be an integer or a non-empty list"},
      {"{" + base + R"(, "tie_word_embeddings": 1})", absl::StatusCode::kInvalidArgument,
       "config.json key 'tie_word_embeddings' must be a boolean"},
      {"{" + base + R"(, "hidden_size": 255})", absl::StatusCode::kInvalidArgument,
       "config.json has duplicate key 'hidden_size'"},
      {R"({"hidden_size": 250, "intermediate_size": 512, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 1000, "max_position_embeddings": 2048})",
       absl::StatusCode::kInvalidArgument,
       "config.json key 'num_attention_heads' 4 must divide hidden_size 250"},
      {"{" + base + R"(, "model_type": "phi3"})", absl::StatusCode::kUnimplemented,
       "config.json model_type = \"phi3\" is not implemented (supported: \"deepseek_v3\", "
       "\"kimi_k2\", \"gemma2\", \"gemma3_text\", \"glm4_moe\", \"llama\", "
       "\"llama4_text\", \"llama4\", \"mistral\", \"mixtral\", \"qwen2\", \"qwen3\", "
       "\"qwen3_moe\")"},
      {"{" + base + R"(, "model_type": 7})", absl::StatusCode::kInvalidArgument,
       "config.json key 'model_type' must be a string, got 7"},
  };
  for (const Case& c : cases) {
    absl::Status s = ModelSpecFromHfJson(c.json).status();
    EXPECT_EQ(s.code(), c.code) << c.json << "\n" << s;
    EXPECT_THAT(s.message(), HasSubstr(c.fragment)) << c.json;
  }
}

}  // namespace
}  // namespace tpserve
