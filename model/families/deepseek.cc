// DeepSeek-V3 / R1 and Kimi K2 (llama.cpp's `deepseek2`; config.json model_type "deepseek_v3",
// "kimi_k2"): multi-head latent attention (ModelSpec::mla), RoPE on adjacent
// pairs of the last qk_rope_head_dim values of each head, YaRN with DeepSeek's mscale factors,
// and GLM-4.5's grouped sigmoid routing with shared experts after leading dense layers. What
// the attention is stays data (MlaSpec); this file only reads it.
#include <algorithm>
#include <cstdint>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::GgufFloat;
using config_internal::GgufInt;
using config_internal::Json;
using config_internal::JsonInt;
using config_internal::JsonRequiredInt;

// The shapes every reader sets the same way once the MLA widths are known: a head's query/key
// is qk_nope + qk_rope wide and every head expands its own key.
void SetMlaHeads(ModelSpec& spec) {
  spec.head_dim = spec.mla.qk_nope_head_dim + spec.mla.qk_rope_head_dim;
  spec.num_kv_heads = spec.num_heads;
  spec.hf_rope_interleaved = true;   // DeepSeek's apply_rotary_pos_emb(_interleave)
  spec.gguf_rope_rotate_half = false;  // llama.cpp's deepseek2 rotates adjacent pairs
}

absl::Status Deepseek2FromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  const auto where = [&](std::string_view key) { return StrCat(g.Describe(), ": ", arch, key); };
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> kv_lora, GgufInt(g, arch + ".attention.kv_lora_rank"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> q_lora, GgufInt(g, arch + ".attention.q_lora_rank"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> rope, GgufInt(g, arch + ".rope.dimension_count"));
  if (!kv_lora || *kv_lora <= 0 || !rope || *rope <= 0) {
    return absl::InvalidArgumentError(StrCat(where(".attention.kv_lora_rank"), " and ", arch,
                                             ".rope.dimension_count must be present and positive "
                                             "(multi-head latent attention)"));
  }
  // llama.cpp's converter writes the expanded head widths as key/value_length_mla and the
  // latent's (kv_lora_rank + rope, kv_lora_rank) as key/value_length; older files only the
  // expanded ones, as key/value_length.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> k_mla, GgufInt(g, arch + ".attention.key_length_mla"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> v_mla,
                      GgufInt(g, arch + ".attention.value_length_mla"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> k_len, GgufInt(g, arch + ".attention.key_length"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> v_len, GgufInt(g, arch + ".attention.value_length"));
  const std::optional<int64_t> key = k_mla ? k_mla : k_len;
  const std::optional<int64_t> value = v_mla ? v_mla : v_len;
  if (!key || !value || *key <= *rope) {
    return absl::InvalidArgumentError(StrCat(
        where(".attention.key_length_mla"), " (or key_length) and value_length_mla (or "
        "value_length) must be present, the key wider than ", arch, ".rope.dimension_count ",
        *rope));
  }
  spec.mla = {.q_lora_rank = q_lora.value_or(0),
              .kv_lora_rank = *kv_lora,
              .qk_nope_head_dim = *key - *rope,
              .qk_rope_head_dim = *rope,
              .v_head_dim = *value};
  SetMlaHeads(spec);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> nextn, GgufInt(g, arch + ".nextn_predict_layers"));
  if (nextn.value_or(0) > 0) {
    return absl::UnimplementedError(StrCat(
        where(".nextn_predict_layers "), *nextn,
        ": multi-token-prediction layers in a GGUF are not read yet (llama.cpp's converter leaves "
        "them out of DeepSeek files; the Hugging Face form's draft with --speculative=mtp)"));
  }
  TP_ASSIGN_OR_RETURN(std::optional<double> temp, GgufFloat(g, arch + ".attention.temperature_scale"));
  if (temp && *temp != 0.0) {
    return absl::UnimplementedError(StrCat(where(".attention.temperature_scale "), *temp,
                                           ": attention temperature tuning with MLA"));
  }
  // YaRN: the converter writes 0.1 * mscale_all_dim as yarn_log_multiplier; llama.cpp puts no
  // factor of its own on the rotated dims (mscale = mscale_all_dim).
  if (spec.rope_scaling.type == RopeScalingType::kYarn) {
    TP_ASSIGN_OR_RETURN(std::optional<double> log_mul,
                        GgufFloat(g, arch + ".rope.scaling.yarn_log_multiplier"));
    spec.rope_scaling.mscale_all_dim = log_mul.value_or(0.0) / 0.1;
    spec.rope_scaling.mscale = spec.rope_scaling.mscale_all_dim;
  }
  family_internal::UniformLayers(0, spec);
  // llama.cpp reads DeepSeek-V2's files, which lack expert_gating_func, as softmax.
  return family_internal::ReadGgufGroupedMoe(g, arch, RoutingScore::kSoftmax, spec);
}

absl::Status Deepseek2FromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "DeepSeek's attention projections carry no bias here"));
  auto scoring = j.find("scoring_func");
  if (scoring != j.end() && !scoring->is_null() && *scoring != "sigmoid") {
    return config_internal::UnimplementedKey("scoring_func", *scoring,
                                             "only DeepSeek-V3's sigmoid scores are");
  }
  auto method = j.find("topk_method");
  if (method != j.end() && !method->is_null() && *method != "noaux_tc") {
    return config_internal::UnimplementedKey(
        "topk_method", *method, "only DeepSeek-V3's noaux_tc (group-limited, bias-corrected) is");
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> freq, JsonInt(j, "moe_layer_freq"));
  if (freq.value_or(1) != 1) {
    return config_internal::UnimplementedKey("moe_layer_freq", Json(*freq),
                                             "every layer past the dense ones is MoE here");
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> q_lora, JsonInt(j, "q_lora_rank"));
  TP_ASSIGN_OR_RETURN(const int64_t kv_lora, JsonRequiredInt(j, "kv_lora_rank"));
  TP_ASSIGN_OR_RETURN(const int64_t nope, JsonRequiredInt(j, "qk_nope_head_dim"));
  TP_ASSIGN_OR_RETURN(const int64_t rope, JsonRequiredInt(j, "qk_rope_head_dim"));
  TP_ASSIGN_OR_RETURN(const int64_t v_head, JsonRequiredInt(j, "v_head_dim"));
  spec.mla = {.q_lora_rank = q_lora.value_or(0),
              .kv_lora_rank = kv_lora,
              .qk_nope_head_dim = nope,
              .qk_rope_head_dim = rope,
              .v_head_dim = v_head};
  SetMlaHeads(spec);
  // The checkpoint's multi-token-prediction layers (model.layers.<num_hidden_layers>...) are
  // not part of the forward pass: the loader leaves them unread
  // (ModelSpec::hf_unserved_weight_prefixes); MtpDraftSpec serves the first as a draft.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> nextn, JsonInt(j, "num_nextn_predict_layers"));
  if (nextn && *nextn < 0) {
    return config_internal::BadKey("num_nextn_predict_layers", StrCat("is ", *nextn,
                                                                      "; it must be >= 0"));
  }
  spec.num_mtp_layers = nextn.value_or(0);
  for (int64_t i = 0; i < nextn.value_or(0); ++i) {
    spec.hf_unserved_weight_prefixes.push_back(
        StrCat("model.layers.", spec.num_layers + i, "."));
  }
  family_internal::UniformLayers(0, spec);
  // The defaults are transformers' DeepseekV3Config's.
  return family_internal::ReadHfGroupedMoe(
      j, {.shared_experts = 1, .groups = 8, .top_groups = 4, .scaling = 2.5, .dense_layers = 3},
      spec);
}

}  // namespace

const ModelFamily kDeepseek2Family = {"deepseek2", {"deepseek2"},
                                      {"deepseek_v3", "kimi_k2"},
                                      Deepseek2FromGguf, Deepseek2FromHf};

}  // namespace tpserve
