// The mixture-of-experts families: Mixtral (Llama's graph with 8 experts of the whole MLP width,
// softmax top-2 renormalized; llama.cpp converts it to the `llama` architecture with
// llama.expert_count set) and Qwen3-MoE (Qwen3's attention, softmax top-k renormalized when
// norm_topk_prob, which llama.cpp always applies to its `qwen3moe` files), and GLM-4.5 (sigmoid
// scores, a correction bias, groups, shared experts, leading dense layers). What the experts are
// is data (ModelSpec::moe, LayerSpec::moe); this file only reads it.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

using family_internal::RoutingCount;

absl::StatusOr<int32_t> HfRoutingCount(std::string_view key, int64_t value) {
  return RoutingCount(StrCat("config.json key '", key, "'"), value);
}

// Every layer's experts (routed by `routing`) for a family whose files always have them, of
// <arch>.expert_feed_forward_length: that key and a non-zero <arch>.expert_count required.
absl::Status ReadRequiredGgufExperts(const GgufFile& g, const std::string& arch,
                                     const ExpertRouting& routing, ModelSpec& spec) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> expert_ff,
                      config_internal::GgufInt(g, arch + ".expert_feed_forward_length"));
  if (!expert_ff) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch,
                                             ".expert_feed_forward_length is missing"));
  }
  TP_RETURN_IF_ERROR(family_internal::ReadGgufExperts(g, arch, routing, *expert_ff, spec));
  if (!spec.moe.enabled()) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch,
                                             ".expert_count is missing or 0"));
  }
  return absl::OkStatus();
}

// Qwen3-MoE's attention (qk_norm, NEOX RoPE) with every layer's MLP replaced by experts.
absl::Status Qwen3MoeFromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  spec.qk_norm = true;
  spec.gguf_rope_rotate_half = true;
  family_internal::UniformLayers(0, spec);
  return ReadRequiredGgufExperts(g, arch, {.score = RoutingScore::kSoftmax, .renormalize = true},
                                 spec);
}

absl::Status MixtralFromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Mixtral's attention projections carry no bias here"));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> window, config_internal::JsonInt(j, "sliding_window"));
  if (window && *window <= 0) {
    return config_internal::BadKey("sliding_window", StrCat("is ", *window, "; it must be "
                                                            "positive or null"));
  }
  family_internal::UniformLayers(window.value_or(0), spec);
  TP_ASSIGN_OR_RETURN(const int64_t experts, config_internal::JsonRequiredInt(j, "num_local_experts"));
  TP_ASSIGN_OR_RETURN(const int64_t top_k, config_internal::JsonRequiredInt(j, "num_experts_per_tok"));
  TP_ASSIGN_OR_RETURN(const int32_t num_experts, HfRoutingCount("num_local_experts", experts));
  TP_ASSIGN_OR_RETURN(const int32_t num_used, HfRoutingCount("num_experts_per_tok", top_k));
  spec.moe.routing = {.score = RoutingScore::kSoftmax,
                      .num_experts = num_experts,
                      .top_k = num_used,
                      .renormalize = true};
  spec.moe.expert_intermediate_size = spec.intermediate_size;  // each expert is a whole MLP
  spec.moe.hf_names = MoeSpec::HfNames::kBlockSparseMoe;
  for (LayerSpec& layer : spec.layers) layer.moe = true;
  return absl::OkStatus();
}

// Qwen3-MoE: layer l is MoE unless listed in mlp_only_layers or (l + 1) is not a multiple of
// decoder_sparse_step, as transformers' Qwen3MoeDecoderLayer decides; the other layers keep a
// dense MLP of intermediate_size.
absl::Status Qwen3MoeFromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Qwen3's attention projections carry no bias here"));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "use_sliding_window", "Qwen's sliding window on the layers past max_window_layers"));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  spec.qk_norm = true;
  spec.gguf_rope_rotate_half = true;
  family_internal::UniformLayers(0, spec);
  TP_ASSIGN_OR_RETURN(const int64_t experts, config_internal::JsonRequiredInt(j, "num_experts"));
  TP_ASSIGN_OR_RETURN(const int64_t top_k, config_internal::JsonRequiredInt(j, "num_experts_per_tok"));
  TP_ASSIGN_OR_RETURN(const int64_t expert_ff,
                      config_internal::JsonRequiredInt(j, "moe_intermediate_size"));
  TP_ASSIGN_OR_RETURN(std::optional<bool> norm, config_internal::JsonBool(j, "norm_topk_prob"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> step,
                      config_internal::JsonInt(j, "decoder_sparse_step"));
  if (step && *step < 1) {
    return config_internal::BadKey("decoder_sparse_step", StrCat("is ", *step, "; it must be >= 1"));
  }
  std::vector<bool> dense_only(spec.num_layers, false);
  if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) {
      return config_internal::BadKey("mlp_only_layers", "must be a list of layer indices");
    }
    for (const Json& l : *it) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= spec.num_layers) {
        return config_internal::BadKey(
            "mlp_only_layers", StrCat("holds ", l.dump(), "; a layer index in [0, ",
                                      spec.num_layers, ") was expected"));
      }
      dense_only[l.get<int64_t>()] = true;
    }
  }
  TP_ASSIGN_OR_RETURN(const int32_t num_experts, HfRoutingCount("num_experts", experts));
  TP_ASSIGN_OR_RETURN(const int32_t num_used, HfRoutingCount("num_experts_per_tok", top_k));
  spec.moe.routing = {.score = RoutingScore::kSoftmax,
                      .num_experts = num_experts,
                      .top_k = num_used,
                      .renormalize = norm.value_or(false)};
  spec.moe.expert_intermediate_size = expert_ff;
  bool any = false;
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    spec.layers[l].moe = experts > 0 && !dense_only[l] && (l + 1) % step.value_or(1) == 0;
    any |= spec.layers[l].moe;
  }
  if (!any) spec.moe = MoeSpec{};  // every layer dense: a dense Qwen3 in effect
  return absl::OkStatus();
}

// GLM-4.5's MoE (llama.cpp's `glm4moe`): q/k/v biases, optional QK-norm, the first
// leading_dense_block_count layers dense, sigmoid scores with a choosing-only correction bias,
// group-limited top-k, the chosen weights renormalized (expert_weights_norm) and scaled
// (expert_weights_scale), and shared experts. GLM-4.5 rotates half of each head
// (partial_rotary_factor 0.5), which tpserve does not implement yet: such files are refused.
absl::Status Glm4MoeFromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  using config_internal::GgufFloat;
  using config_internal::GgufInt;
  spec.qkv_bias = g.HasTensor("blk.0.attn_q.bias");
  spec.qk_norm = g.HasTensor("blk.0.attn_q_norm.weight");
  spec.gguf_rope_rotate_half = true;
  spec.gguf_ffn_norm_is_post_attention = true;
  family_internal::UniformLayers(0, spec);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> nextn, GgufInt(g, arch + ".nextn_predict_layers"));
  if (nextn.value_or(0) > 0) {
    return absl::UnimplementedError(StrCat(
        g.Describe(), ": ", arch, ".nextn_predict_layers ", *nextn,
        ": multi-token-prediction layers are not served yet (a file without them is)"));
  }
  // llama.cpp's default for glm4moe files without expert_gating_func: sigmoid.
  return family_internal::ReadGgufGroupedMoe(g, arch, RoutingScore::kSigmoid, spec);
}

absl::Status Glm4MoeFromHf(const Json& j, ModelSpec& spec) {
  using config_internal::JsonBool;
  using config_internal::JsonInt;
  using config_internal::JsonNumber;
  using config_internal::JsonRequiredInt;
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  // transformers' Glm4MoeConfig rotates half of each head unless told otherwise.
  if (j.find("partial_rotary_factor") == j.end()) {
    return config_internal::UnimplementedKey(
        "partial_rotary_factor", Json(0.5),
        "absent, so GLM's default 0.5; RoPE rotates every dimension of a head here");
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> nextn, JsonInt(j, "num_nextn_predict_layers"));
  if (nextn.value_or(0) > 0) {
    return config_internal::UnimplementedKey("num_nextn_predict_layers", Json(*nextn),
                                             "multi-token-prediction layers are not served yet");
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> bias, JsonBool(j, "attention_bias"));
  TP_ASSIGN_OR_RETURN(std::optional<bool> qk_norm, JsonBool(j, "use_qk_norm"));
  spec.qkv_bias = bias.value_or(false);
  spec.qk_norm = qk_norm.value_or(false);
  spec.gguf_rope_rotate_half = true;
  spec.gguf_ffn_norm_is_post_attention = true;
  family_internal::UniformLayers(0, spec);
  // The defaults are Glm4MoeConfig's.
  return family_internal::ReadHfGroupedMoe(
      j, {.shared_experts = 1, .groups = 1, .top_groups = 1, .scaling = 1.0, .dense_layers = 1},
      spec);
}

}  // namespace

namespace family_internal {

absl::Status ReadGgufGroupedMoe(const GgufFile& g, const std::string& arch,
                                RoutingScore default_score, ModelSpec& spec) {
  using config_internal::GgufInt;
  TP_ASSIGN_OR_RETURN(ExpertRouting routing, ReadGgufGroupedRouting(g, arch));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> gating, GgufInt(g, arch + ".expert_gating_func"));
  if (!gating) routing.score = default_score;
  TP_RETURN_IF_ERROR(ReadRequiredGgufExperts(g, arch, routing, spec));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> dense, GgufInt(g, arch + ".leading_dense_block_count"));
  for (int64_t l = 0; l < spec.num_layers; ++l) spec.layers[l].moe = l >= dense.value_or(0);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> shared, GgufInt(g, arch + ".expert_shared_count"));
  spec.moe.shared_expert_intermediate_size =
      shared.value_or(0) * spec.moe.expert_intermediate_size;
  spec.moe.correction_bias =
      g.HasTensor(StrCat("blk.", dense.value_or(0), ".exp_probs_b.bias"));
  return absl::OkStatus();
}

absl::Status ReadHfGroupedMoe(const Json& j, const HfGroupedMoeDefaults& defaults,
                              ModelSpec& spec) {
  using config_internal::JsonBool;
  using config_internal::JsonInt;
  using config_internal::JsonNumber;
  using config_internal::JsonRequiredInt;
  TP_ASSIGN_OR_RETURN(const int64_t experts, JsonRequiredInt(j, "n_routed_experts"));
  TP_ASSIGN_OR_RETURN(const int64_t top_k, JsonRequiredInt(j, "num_experts_per_tok"));
  TP_ASSIGN_OR_RETURN(const int64_t expert_ff, JsonRequiredInt(j, "moe_intermediate_size"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> shared, JsonInt(j, "n_shared_experts"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> groups, JsonInt(j, "n_group"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> top_groups, JsonInt(j, "topk_group"));
  TP_ASSIGN_OR_RETURN(std::optional<bool> norm, JsonBool(j, "norm_topk_prob"));
  TP_ASSIGN_OR_RETURN(std::optional<double> scale, JsonNumber(j, "routed_scaling_factor"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> dense, JsonInt(j, "first_k_dense_replace"));
  TP_ASSIGN_OR_RETURN(const int32_t num_experts, HfRoutingCount("n_routed_experts", experts));
  TP_ASSIGN_OR_RETURN(const int32_t num_used, HfRoutingCount("num_experts_per_tok", top_k));
  TP_ASSIGN_OR_RETURN(const int32_t num_groups,
                      HfRoutingCount("n_group", groups.value_or(defaults.groups)));
  TP_ASSIGN_OR_RETURN(const int32_t num_top_groups,
                      HfRoutingCount("topk_group", top_groups.value_or(defaults.top_groups)));
  spec.moe.routing = {.score = RoutingScore::kSigmoid,
                      .num_experts = num_experts,
                      .top_k = num_used,
                      .num_groups = num_groups,
                      .top_groups = num_top_groups,
                      .renormalize = norm.value_or(true),
                      .scaling = static_cast<float>(scale.value_or(defaults.scaling))};
  spec.moe.expert_intermediate_size = expert_ff;
  spec.moe.shared_expert_intermediate_size =
      shared.value_or(defaults.shared_experts) * expert_ff;
  spec.moe.correction_bias = true;  // their routers always have e_score_correction_bias
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    spec.layers[l].moe = l >= dense.value_or(defaults.dense_layers);
  }
  return absl::OkStatus();
}

absl::StatusOr<ExpertRouting> ReadGgufGroupedRouting(const GgufFile& g, const std::string& arch) {
  using config_internal::GgufFloat;
  using config_internal::GgufInt;
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> gating, GgufInt(g, arch + ".expert_gating_func"));
  if (gating && *gating != 1 && *gating != 2) {  // llama.cpp: 1 softmax, 2 sigmoid
    return absl::UnimplementedError(StrCat(g.Describe(), ": ", arch, ".expert_gating_func ",
                                           *gating, " (1 softmax and 2 sigmoid are implemented)"));
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> norm,
                      config_internal::GgufBool(g, arch + ".expert_weights_norm"));
  TP_ASSIGN_OR_RETURN(std::optional<double> scale, GgufFloat(g, arch + ".expert_weights_scale"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> groups, GgufInt(g, arch + ".expert_group_count"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> groups_used,
                      GgufInt(g, arch + ".expert_group_used_count"));
  TP_ASSIGN_OR_RETURN(const int32_t num_groups,
                      RoutingCount(StrCat(g.Describe(), ": ", arch, ".expert_group_count"),
                                   std::max<int64_t>(1, groups.value_or(1))));
  TP_ASSIGN_OR_RETURN(const int32_t top_groups,
                      RoutingCount(StrCat(g.Describe(), ": ", arch, ".expert_group_used_count"),
                                   std::max<int64_t>(1, groups_used.value_or(1))));
  return ExpertRouting{
      .score = gating.value_or(2) == 1 ? RoutingScore::kSoftmax : RoutingScore::kSigmoid,
      .num_groups = num_groups,
      .top_groups = top_groups,
      .renormalize = norm.value_or(false),  // llama.cpp's default for glm4moe
      // llama.cpp applies the scale only when it is neither 0 nor 1.
      .scaling = scale && *scale != 0.0 ? static_cast<float>(*scale) : 1.0f};
}

absl::Status ReadGgufExperts(const GgufFile& g, const std::string& arch, ExpertRouting routing,
                             int64_t expert_intermediate_size, ModelSpec& spec) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> experts,
                      config_internal::GgufInt(g, arch + ".expert_count"));
  if (!experts || *experts == 0) return absl::OkStatus();
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> used,
                      config_internal::GgufInt(g, arch + ".expert_used_count"));
  if (!used) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch, ".expert_count is ",
                                             *experts, " but ", arch,
                                             ".expert_used_count is missing"));
  }
  TP_ASSIGN_OR_RETURN(routing.num_experts,
                      RoutingCount(StrCat(g.Describe(), ": ", arch, ".expert_count"), *experts));
  TP_ASSIGN_OR_RETURN(routing.top_k,
                      RoutingCount(StrCat(g.Describe(), ": ", arch, ".expert_used_count"), *used));
  if (const std::string problem = ExpertRoutingProblem(routing); !problem.empty()) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch, ".expert_count ",
                                             *experts, " and ", arch, ".expert_used_count ",
                                             *used, ": ", problem));
  }
  spec.moe.routing = routing;
  spec.moe.expert_intermediate_size = expert_intermediate_size;
  for (LayerSpec& layer : spec.layers) layer.moe = true;
  return absl::OkStatus();
}

}  // namespace family_internal

const ModelFamily kMixtralFamily = {"mixtral", {}, {"mixtral"}, nullptr, MixtralFromHf};
const ModelFamily kQwen3MoeFamily = {"qwen3moe", {"qwen3moe"}, {"qwen3_moe"}, Qwen3MoeFromGguf,
                                     Qwen3MoeFromHf};
const ModelFamily kGlm4MoeFamily = {"glm4moe", {"glm4moe"}, {"glm4_moe"}, Glm4MoeFromGguf,
                                    Glm4MoeFromHf};

namespace family_internal {

absl::StatusOr<int32_t> RoutingCount(std::string_view where, int64_t value) {
  if (value < 0 || value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(StrCat(where, " is ", value, "; a count in [0, ",
                                             std::numeric_limits<int32_t>::max(),
                                             "] was expected"));
  }
  return static_cast<int32_t>(value);
}

}  // namespace family_internal
}  // namespace tpserve
