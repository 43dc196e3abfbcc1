// ModelSpec: parameter count, validation and the published presets. The readers for
// Hugging Face config.json and GGUF metadata live in config_hf.cc and config_gguf.cc.
#include "model/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "base/str_cat.h"
#include "kernels/rope_table.h"

namespace tpserve {
namespace {

absl::Status NotPositive(std::string_view field, int64_t value) {
  return absl::InvalidArgumentError(
      StrCat("ModelSpec.", field, " is ", value, "; it must be positive"));
}

// Token ids are optional (-1) but, when set, must name a vocabulary entry.
absl::Status CheckTokenId(std::string_view field, int64_t id, int64_t vocab_size,
                          bool allow_unset) {
  if (allow_unset && id == -1) return absl::OkStatus();
  if (id >= 0 && id < vocab_size) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat("ModelSpec.", field, " is ", id, "; it must be in [",
                                           allow_unset ? "-1 (unset), " : "", "0, ", vocab_size,
                                           ")"));
}

absl::Status ValidateRopeScaling(const RopeScaling& s) {
  if (!s.enabled()) return absl::OkStatus();
  if (!(s.factor > 0)) {
    return absl::InvalidArgumentError(
        StrCat("ModelSpec.rope_scaling.factor ", s.factor, " must be positive"));
  }
  if (s.original_max_position_embeddings <= 0) {
    return NotPositive("rope_scaling.original_max_position_embeddings",
                       s.original_max_position_embeddings);
  }
  if (s.type != RopeScalingType::kLlama3) return absl::OkStatus();
  if (!(s.low_freq_factor > 0)) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.rope_scaling factor ", s.factor,
                                             " and low_freq_factor ", s.low_freq_factor,
                                             " must be positive"));
  }
  // The llama3 rule interpolates between the two wavelength bounds; equal factors (Llama 4
  // Scout's 1 and 1) leave no band between them (kernels/rope_table.h).
  if (!(s.high_freq_factor >= s.low_freq_factor)) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.rope_scaling.high_freq_factor ",
                                             s.high_freq_factor,
                                             " must not be below low_freq_factor ",
                                             s.low_freq_factor));
  }
  if (s.original_max_position_embeddings <= 0) {
    return NotPositive("rope_scaling.original_max_position_embeddings",
                       s.original_max_position_embeddings);
  }
  return absl::OkStatus();
}

// MLA's widths (MlaSpec) and what they imply of the rest of the description.
absl::Status ValidateMla(const ModelSpec& c) {
  const MlaSpec& m = c.mla;
  const std::pair<std::string_view, int64_t> positive[] = {
      {"mla.kv_lora_rank", m.kv_lora_rank},
      {"mla.qk_nope_head_dim", m.qk_nope_head_dim},
      {"mla.qk_rope_head_dim", m.qk_rope_head_dim},
      {"mla.v_head_dim", m.v_head_dim}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) return NotPositive(field, value);
  }
  if (m.q_lora_rank < 0) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.mla.q_lora_rank is ", m.q_lora_rank,
                                             "; it must be >= 0 (0: no query latent)"));
  }
  if (m.qk_rope_head_dim % 2 != 0) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.mla.qk_rope_head_dim ",
                                             m.qk_rope_head_dim,
                                             " must be even (RoPE rotates pairs)"));
  }
  if (c.head_dim != m.qk_nope_head_dim + m.qk_rope_head_dim) {
    return absl::InvalidArgumentError(StrCat(
        "ModelSpec.head_dim ", c.head_dim, " must be mla.qk_nope_head_dim ", m.qk_nope_head_dim,
        " + mla.qk_rope_head_dim ", m.qk_rope_head_dim, " = ",
        m.qk_nope_head_dim + m.qk_rope_head_dim, " (a query head's width)"));
  }
  if (c.num_kv_heads != c.num_heads) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.num_kv_heads ", c.num_kv_heads,
                                             " must equal num_heads ", c.num_heads,
                                             " with MLA (every head expands its own key)"));
  }
  if (c.qkv_bias || c.qk_norm || c.sandwich_norms) {
    return absl::UnimplementedError(
        "ModelSpec: MLA with q/k/v biases, QK-norm or sandwich norms is not implemented");
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerSpec layer = c.Layer(l);
    if (!layer.rope || layer.sliding_window > 0 || layer.attention_chunk > 0 ||
        layer.qk_l2_norm || layer.temperature_floor > 0) {
      return absl::UnimplementedError(StrCat(
          "ModelSpec.layers[", l, "]: MLA with NoPE, a window, chunks, L2 QK-norm or "
          "temperature tuning is not implemented"));
    }
    const RopeScaling& r = layer.rope_scaling;
    // The rotated dims' own factor m(mscale) / m(mscale_all_dim) would scale q_rope.k_rope
    // apart from q_nope.k_nope: not a factor of the whole score.
    if (r.type == RopeScalingType::kYarn &&
        YarnMscale(r.factor, r.mscale) != YarnMscale(r.factor, r.mscale_all_dim)) {
      return absl::UnimplementedError(StrCat(
          "ModelSpec.rope_scaling: mscale ", r.mscale, " and mscale_all_dim ", r.mscale_all_dim,
          " differ; with MLA a YaRN factor on the RoPE dims alone is not implemented (DeepSeek-V3 "
          "and Kimi K2 set both to 1)"));
    }
  }
  return absl::OkStatus();
}

ModelSpec Llama31Base() {
  ModelSpec c;
  c.vocab_size = 128256;
  c.max_context_tokens = 131072;
  c.rope_theta = 500000.0;
  c.rope_scaling = RopeScaling{RopeScalingType::kLlama3, 8.0, 1.0, 4.0, 8192};
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = false;
  c.bos_token_id = 128000;
  c.eos_token_id = 128001;
  c.extra_eos_token_ids = {128008, 128009};  // <|eom_id|>, <|eot_id|>
  c.num_kv_heads = 8;
  c.head_dim = 128;
  return c;
}

ModelSpec Llama31(std::string name, int64_t hidden, int64_t inter, int64_t layers,
                    int64_t heads) {
  ModelSpec c = Llama31Base();
  c.name = std::move(name);
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  return c;
}

ModelSpec SmolLM2_135M() {
  ModelSpec c;
  c.name = "smollm2-135m";
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.max_context_tokens = 8192;
  c.rope_theta = 100000.0;
  c.rms_norm_eps = 1e-5;
  c.tie_word_embeddings = true;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

}  // namespace

std::string_view RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone: return "none";
    case RopeScalingType::kLlama3: return "llama3";
    case RopeScalingType::kLinear: return "linear";
    case RopeScalingType::kYarn: return "yarn";
  }
  return "?";
}

LayerSpec ModelSpec::Layer(int64_t layer) const {
  if (layers.empty()) return LayerSpec{0, rope_theta, rope_scaling};
  return layers[layer];
}

double ModelSpec::AttentionScale(int64_t layer) const {
  double scale = query_scale > 0 ? query_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  const RopeScaling& rope = Layer(layer).rope_scaling;
  if (rope.type == RopeScalingType::kYarn) {
    // With MLA only the RoPE dims are rotated: the factor on the whole score is
    // m(mscale_all_dim) (Validate holds the rotated dims' own factor at 1). Otherwise every
    // dim is rotated and the factor on cos and sin, m(mscale) / m(mscale_all_dim), and the
    // scale's m(mscale_all_dim) multiply to m(mscale) on q and on k: squared in q.k.
    const double m = YarnMscale(rope.factor, mla.enabled() ? rope.mscale_all_dim : rope.mscale);
    scale *= m * m;
  }
  return scale;
}

bool ModelSpec::IsMoeLayer(int64_t layer) const {
  return !layers.empty() && layers[layer].moe;
}

namespace {

// One layer's attention projections as [rows, cols] pairs (MLA's q_a or q, q_b, kv_a, kv_b and
// o; otherwise q, k, v and o): the weights a token multiplies, all of them.
int64_t AttentionProjectionParameters(const ModelSpec& c) {
  const int64_t q_width = c.num_heads * c.head_dim;
  if (!c.mla.enabled()) return 2 * c.hidden_size * q_width + 2 * c.hidden_size * c.num_kv_heads * c.head_dim;
  const MlaSpec& m = c.mla;
  const int64_t q = m.q_lora_rank > 0 ? c.hidden_size * m.q_lora_rank + m.q_lora_rank * q_width
                                      : c.hidden_size * q_width;
  return q + c.hidden_size * m.latent_dim()                                           // kv_a
         + m.kv_lora_rank * c.num_heads * (m.qk_nope_head_dim + m.v_head_dim)       // kv_b
         + c.num_heads * m.v_head_dim * c.hidden_size;                               // o
}

}  // namespace

int64_t ModelSpec::NumParameters() const {
  const int64_t q_width = num_heads * head_dim;
  const int64_t kv_width = num_kv_heads * head_dim;
  const int64_t attention = AttentionProjectionParameters(*this)
                            + (qkv_bias ? q_width + 2 * kv_width : 0)
                            + (qk_norm ? 2 * head_dim : 0)
                            + (mla.enabled() ? mla.q_lora_rank + mla.kv_lora_rank : 0);  // norms
  const int64_t mlp = 3 * hidden_size * intermediate_size;  // gate, up, down
  const int64_t experts = moe.routing.num_experts * 3 * hidden_size *
                              moe.expert_intermediate_size +
                          moe.routing.num_experts * hidden_size +  // the router
                          (moe.correction_bias ? moe.routing.num_experts : 0) +
                          3 * hidden_size * moe.shared_expert_intermediate_size;
  // Attention and MLP RMSNorm, and after each of them too with sandwich norms.
  const int64_t norms = (sandwich_norms ? 4 : 2) * hidden_size;
  const int64_t embedding = vocab_size * hidden_size;
  const int64_t lm_head = tie_word_embeddings ? 0 : vocab_size * hidden_size;
  int64_t layers_total = 0;
  for (int64_t l = 0; l < num_layers; ++l) {
    layers_total += attention + norms + (IsMoeLayer(l) ? experts : mlp);
  }
  return layers_total + embedding + lm_head + hidden_size;
}

int64_t ModelSpec::NumActiveLinearParameters() const {
  const int64_t attention = AttentionProjectionParameters(*this);
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t experts = moe.routing.num_experts * hidden_size +  // the router
                          moe.routing.top_k * 3 * hidden_size * moe.expert_intermediate_size +
                          3 * hidden_size * moe.shared_expert_intermediate_size;
  int64_t total = 0;
  for (int64_t l = 0; l < num_layers; ++l) total += attention + (IsMoeLayer(l) ? experts : mlp);
  return total;
}

double ModelSpec::ExpertReadFraction(int64_t tokens) const {
  if (!moe.enabled()) return 1.0;
  const double chosen = static_cast<double>(moe.routing.top_k) / moe.routing.num_experts;
  return 1.0 - std::pow(1.0 - chosen, static_cast<double>(tokens));
}

int64_t ModelSpec::NumActiveParameters() const {
  const int64_t idle_experts = moe.routing.num_experts - moe.routing.top_k;
  const int64_t idle_per_layer = idle_experts * 3 * hidden_size * moe.expert_intermediate_size;
  int64_t idle = 0;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (IsMoeLayer(l)) idle += idle_per_layer;
  }
  return NumParameters() - idle;
}

absl::Status ModelSpec::Validate() const {
  const std::pair<std::string_view, int64_t> positive[] = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_layers", num_layers},
      {"num_heads", num_heads},
      {"num_kv_heads", num_kv_heads},
      {"head_dim", head_dim},
      {"max_context_tokens", max_context_tokens},
  };
  for (const auto& [field, value] : positive) {
    if (value <= 0) return NotPositive(field, value);
  }
  if (num_heads % num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        StrCat("ModelSpec.num_kv_heads ", num_kv_heads, " must divide num_heads ", num_heads));
  }
  if (head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        StrCat("ModelSpec.head_dim ", head_dim, " must be even (RoPE rotates pairs)"));
  }
  if (mla.enabled()) {
    if (absl::Status s = ValidateMla(*this); !s.ok()) return s;
  }
  if (!(rope_theta > 0)) {
    return absl::InvalidArgumentError(
        StrCat("ModelSpec.rope_theta ", rope_theta, " must be positive"));
  }
  if (!(rms_norm_eps > 0)) {
    return absl::InvalidArgumentError(
        StrCat("ModelSpec.rms_norm_eps ", rms_norm_eps, " must be positive"));
  }
  if (absl::Status s = ValidateRopeScaling(rope_scaling); !s.ok()) return s;
  if (!layers.empty() && static_cast<int64_t>(layers.size()) != num_layers) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.layers describes ", layers.size(),
                                             " layers; num_layers is ", num_layers));
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].sliding_window < 0 || !(layers[l].rope_theta > 0)) {
      return absl::InvalidArgumentError(StrCat(
          "ModelSpec.layers[", l, "]: sliding_window ", layers[l].sliding_window,
          " must be >= 0 and rope_theta ", layers[l].rope_theta, " positive"));
    }
    if (absl::Status s = ValidateRopeScaling(layers[l].rope_scaling); !s.ok()) return s;
    if (layers[l].attention_chunk < 0 || layers[l].temperature_floor < 0 ||
        !(layers[l].temperature_scale >= 0) || std::isinf(layers[l].temperature_scale)) {
      return absl::InvalidArgumentError(StrCat(
          "ModelSpec.layers[", l, "]: attention_chunk ", layers[l].attention_chunk,
          ", temperature_floor ", layers[l].temperature_floor, " and temperature_scale ",
          layers[l].temperature_scale, " must be >= 0 (0: none) and finite"));
    }
  }
  const std::pair<std::string_view, double> non_negative[] = {
      {"query_scale", query_scale},
      {"attn_logit_softcap", attn_logit_softcap},
      {"final_logit_softcap", final_logit_softcap}};
  for (const auto& [field, value] : non_negative) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(
          StrCat("ModelSpec.", field, " is ", value, "; it must be >= 0 (0: none)"));
    }
  }
  if (!(embedding_multiplier > 0)) {
    return absl::InvalidArgumentError(StrCat("ModelSpec.embedding_multiplier is ",
                                             embedding_multiplier, "; it must be positive"));
  }
  bool any_moe = false;
  for (const LayerSpec& layer : layers) any_moe |= layer.moe;
  if (any_moe || moe.enabled()) {
    if (!any_moe) {
      return absl::InvalidArgumentError("ModelSpec.moe describes experts but no layer is moe");
    }
    if (const std::string problem = ExpertRoutingProblem(moe.routing); !problem.empty()) {
      return absl::InvalidArgumentError(StrCat("ModelSpec.moe.routing: ", problem));
    }
    if (moe.expert_intermediate_size <= 0) {
      return NotPositive("moe.expert_intermediate_size", moe.expert_intermediate_size);
    }
  }
  if (absl::Status s = CheckTokenId("bos_token_id", bos_token_id, vocab_size, true); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTokenId("eos_token_id", eos_token_id, vocab_size, true); !s.ok()) {
    return s;
  }
  for (int64_t id : extra_eos_token_ids) {
    if (absl::Status s = CheckTokenId("extra_eos_token_ids", id, vocab_size, false); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Mixtures of experts: their published config.json (the keys that shape the model), read by
// the family's own reader as a checkpoint's would be.
constexpr char kQwen3_235bA22b[] = R"({"model_type": "qwen3_moe",
  "_name_or_path": "qwen3-235b-a22b", "hidden_size": 4096, "intermediate_size": 12288,
  "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
  "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "attention_bias": false,
  "use_sliding_window": false, "num_experts": 128, "num_experts_per_tok": 8,
  "moe_intermediate_size": 1536, "norm_topk_prob": true, "decoder_sparse_step": 1,
  "mlp_only_layers": []})";
constexpr char kQwen3_30bA3b[] = R"({"model_type": "qwen3_moe",
  "_name_or_path": "qwen3-30b-a3b", "hidden_size": 2048, "intermediate_size": 6144,
  "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
  "vocab_size": 151936, "max_position_embeddings": 40960, "rope_theta": 1000000.0,
  "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "hidden_act": "silu", "attention_bias": false,
  "use_sliding_window": false, "num_experts": 128, "num_experts_per_tok": 8,
  "moe_intermediate_size": 768, "norm_topk_prob": true, "decoder_sparse_step": 1,
  "mlp_only_layers": []})";
constexpr char kMixtral8x22b[] = R"({"model_type": "mixtral",
  "_name_or_path": "mixtral-8x22b", "hidden_size": 6144, "intermediate_size": 16384,
  "num_hidden_layers": 56, "num_attention_heads": 48, "num_key_value_heads": 8,
  "vocab_size": 32000, "max_position_embeddings": 65536, "rope_theta": 1000000,
  "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "sliding_window": null, "num_local_experts": 8,
  "num_experts_per_tok": 2})";

// Llama 4's text decoders: the text_config of the published config.json of
// Llama-4-Scout-17B-16E-Instruct and Llama-4-Maverick-17B-128E-Instruct (the checkpoints served,
// the FP8 one among them; Llama4ForConditionalGeneration, the vision tower not served). Scout:
// every layer sparse, 16 experts, llama3 RoPE scaling; Maverick: every second layer sparse (the
// others a dense MLP of intermediate_size_mlp), 128 experts, no QK-norm, no RoPE scaling. The
// base checkpoints' max_position_embeddings is 262144 for both.
// Checked on 2026-12-06 against copies of the published files (the Hub itself was out of reach):
// Maverick's as TensorRT-LLM's Llama 4 unit test copies it (2 layers instead of 48 and a
// no_rope_layer_interval of 2 added, as it says); Scout's as transformers 4.51.0 printed it on
// release and as AMD-AGI/Primus pull request 165 quotes it (August 2025); max_position_embeddings
// as transformers' Llama 4 conversion sets it (256K base, 1M 128E instruct, 10M 16E instruct).
// Scout's rope_scaling is the later one, factor 16 and high_freq_factor 1 (the first upload had
// 8 and 4, the converter's defaults), the values of Meta's reference code (the llama4 ModelArgs
// of meta-llama/llama-models: "Only Llama-4-Scout uses scaled rope"). An empty or absent
// no_rope_layers means every fourth layer NoPE, as listed here for Scout.
constexpr char kLlama4Scout[] = R"({"model_type": "llama4_text",
  "_name_or_path": "llama4-scout", "attention_bias": false, "attention_chunk_size": 8192,
  "attn_scale": 0.1, "attn_temperature_tuning": 4, "bos_token_id": 200000,
  "eos_token_id": [200001, 200007, 200008], "floor_scale": 8192, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 1,
  "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760,
  "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0,
                     1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0],
  "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
  "num_key_value_heads": 8, "num_local_experts": 16, "pad_token_id": 200018,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0,
  "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "use_qk_norm": true,
  "vocab_size": 202048})";
constexpr char kLlama4Maverick[] = R"({"model_type": "llama4_text",
  "_name_or_path": "llama4-maverick", "attention_bias": false, "attention_chunk_size": 8192,
  "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008], "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 2,
  "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576,
  "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
  "num_key_value_heads": 8, "num_local_experts": 128, "pad_token_id": 200018,
  "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "use_qk_norm": false, "vocab_size": 202048})";

// DeepSeek-V3 and Kimi K2: the published config.json of deepseek-ai/DeepSeek-V3 (V3-0324 and
// R1 share it) and moonshotai/Kimi-K2-Instruct (model_type kimi_k2, DeepseekV3ForCausalLM),
// the keys that shape the model (quantization_config aside: the FP8 checkpoints' 128x128 block
// weights are a weight format, --weights=fp8-block). V3's one multi-token-prediction layer
// (model.layers.61) is not served yet and not counted.
constexpr char kDeepseekV3[] = R"({"model_type": "deepseek_v3",
  "_name_or_path": "deepseek-v3", "architectures": ["DeepseekV3ForCausalLM"],
  "attention_bias": false, "bos_token_id": 0, "eos_token_id": 1, "first_k_dense_replace": 3,
  "hidden_act": "silu", "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
  "max_position_embeddings": 163840, "moe_intermediate_size": 2048, "moe_layer_freq": 1,
  "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": true,
  "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
  "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
  "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 4, "topk_method": "noaux_tc", "v_head_dim": 128,
  "vocab_size": 129280})";
constexpr char kKimiK2[] = R"({"model_type": "kimi_k2",
  "_name_or_path": "kimi-k2", "architectures": ["DeepseekV3ForCausalLM"],
  "attention_bias": false, "bos_token_id": 163584, "eos_token_id": 163585,
  "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 7168,
  "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 131072,
  "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 384,
  "n_shared_experts": 1, "norm_topk_prob": true, "num_attention_heads": 64,
  "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 64,
  "num_nextn_predict_layers": 0, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
  "rope_scaling": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 32.0, "mscale": 1.0,
  "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "type": "yarn"},
  "rope_theta": 50000.0, "routed_scaling_factor": 2.827, "scoring_func": "sigmoid",
  "tie_word_embeddings": false, "topk_group": 1, "topk_method": "noaux_tc", "v_head_dim": 128,
  "vocab_size": 163840})";

std::vector<std::string> ModelSpecPresetNames() {
  return {"llama-3.1-8b",  "llama-3.1-70b", "llama-3.1-405b",  "smollm2-135m",
          "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "llama4-scout",
          "llama4-maverick", "deepseek-v3",   "kimi-k2"};
}

absl::StatusOr<ModelSpec> MtpDraftSpec(const ModelSpec& target) {
  if (target.num_mtp_layers < 1 || target.num_layers < 1) {
    return absl::FailedPreconditionError(StrCat(
        "--speculative=mtp: ", target.name, " has no multi-token-prediction layer (its "
        "num_nextn_predict_layers is ", target.num_mtp_layers, "); draft with "
        "--speculative=ngram or --speculative=draft instead"));
  }
  ModelSpec d = target;
  const int64_t layer = target.num_layers;  // the first MTP layer, after the decoder's
  d.name = StrCat(target.name, "-mtp");
  d.num_layers = 1;
  d.num_mtp_layers = 0;
  d.mtp_checkpoint_layer = layer;
  LayerSpec spec = target.Layer(layer - 1);  // the decoder's attention; experts, as V3's is
  spec.moe = target.moe.enabled();
  d.layers = {spec};
  // Everything but the MTP layer is the target's: its decoder layers and final norm, the
  // other MTP layers, and the MTP layer's copies of the embedding and LM head (the target's
  // are read instead).
  const std::string own = StrCat("model.layers.", layer, ".");
  std::erase(d.hf_unserved_weight_prefixes, own);  // the target leaves it unread
  for (int64_t l = 0; l < target.num_layers + target.num_mtp_layers; ++l) {
    if (l != layer) d.hf_unserved_weight_prefixes.push_back(StrCat("model.layers.", l, "."));
  }
  d.hf_unserved_weight_prefixes.push_back("model.norm.");
  d.hf_unserved_weight_prefixes.push_back(StrCat("model.layers.", layer, ".embed_tokens."));
  d.hf_unserved_weight_prefixes.push_back(StrCat("model.layers.", layer, ".shared_head.head."));
  return d;
}

absl::StatusOr<ModelSpec> ModelSpecPreset(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Shapes from each model's published Hugging Face config.json.
  if (key == "llama-3.1-8b" || key == "8b") return Llama31("llama-3.1-8b", 4096, 14336, 32, 32);
  if (key == "llama-3.1-70b" || key == "70b") {
    return Llama31("llama-3.1-70b", 8192, 28672, 80, 64);
  }
  if (key == "llama-3.1-405b" || key == "405b") {
    return Llama31("llama-3.1-405b", 16384, 53248, 126, 128);
  }
  if (key == "smollm2-135m" || key == "smollm2") return SmolLM2_135M();
  if (key == "mixtral-8x22b") return ModelSpecFromHfJson(kMixtral8x22b);
  if (key == "qwen3-30b-a3b") return ModelSpecFromHfJson(kQwen3_30bA3b);
  if (key == "qwen3-235b-a22b") return ModelSpecFromHfJson(kQwen3_235bA22b);
  if (key == "llama4-scout") return ModelSpecFromHfJson(kLlama4Scout);
  if (key == "llama4-maverick") return ModelSpecFromHfJson(kLlama4Maverick);
  if (key == "deepseek-v3") return ModelSpecFromHfJson(kDeepseekV3);
  if (key == "kimi-k2") return ModelSpecFromHfJson(kKimiK2);
  return absl::NotFoundError(StrCat("no model preset '", name,
                                    "'; known: ", absl::StrJoin(ModelSpecPresetNames(), ", "),
                                    " (aliases 8b, 70b, 405b, smollm2)"));
}

}  // namespace tpserve
