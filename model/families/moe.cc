// The mixture-of-experts families: Mixtral (Llama's graph with 8 experts of the whole MLP width,
// softmax top-2 renormalized; llama.cpp converts it to the `llama` architecture with
// llama.expert_count set) and Qwen3-MoE (Qwen3's attention, softmax top-k renormalized when
// norm_topk_prob, which llama.cpp always applies to its `qwen3moe` files). What the experts are
// is data (ModelSpec::moe, LayerSpec::moe); this file only reads it.
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

// Qwen3-MoE's attention (qk_norm, NEOX RoPE) with every layer's MLP replaced by experts.
absl::Status Qwen3MoeFromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  spec.qk_norm = true;
  spec.gguf_rope_rotate_half = true;
  family_internal::UniformLayers(0, spec);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> expert_ff,
                      config_internal::GgufInt(g, arch + ".expert_feed_forward_length"));
  if (!expert_ff) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch,
                                             ".expert_feed_forward_length is missing"));
  }
  ExpertRouting routing{.score = RoutingScore::kSoftmax, .renormalize = true};
  TP_RETURN_IF_ERROR(family_internal::ReadGgufExperts(g, arch, routing, *expert_ff, spec));
  if (!spec.moe.enabled()) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch,
                                             ".expert_count is missing or 0"));
  }
  return absl::OkStatus();
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
  spec.moe.routing = {.score = RoutingScore::kSoftmax,
                      .num_experts = static_cast<int32_t>(experts),
                      .top_k = static_cast<int32_t>(top_k),
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
  spec.moe.routing = {.score = RoutingScore::kSoftmax,
                      .num_experts = static_cast<int32_t>(experts),
                      .top_k = static_cast<int32_t>(top_k),
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

}  // namespace

namespace family_internal {

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
  routing.num_experts = static_cast<int32_t>(*experts);
  routing.top_k = static_cast<int32_t>(*used);
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

}  // namespace tpserve
