// Llama 4 (Scout, Maverick; the text decoder): Llama's blocks with
//   - a mixture of experts on every interleave_moe_layer_step-th layer (Scout every layer,
//     Maverick every second), a dense MLP of intermediate_size_mlp elsewhere: the router's top
//     expert chosen on its logit, its sigmoid weight applied to the expert's INPUT, plus an
//     always-on shared expert of the experts' width;
//   - iRoPE: three layers of RoPE with chunked local attention (attention_chunk_size: a query
//     at p sees [floor(p / C) * C, p]) and a weightless L2 norm of q and k after RoPE
//     (use_qk_norm), then one global layer without RoPE (NoPE) whose queries are scaled by
//     log(floor((p + 1) / floor_scale) + 1) * attn_scale + 1 (attn_temperature_tuning);
//   - RoPE on neighbouring pairs in both forms (transformers rotates complex numbers; llama.cpp's
//     converter leaves the rows as they are and uses its NORM rope).
// llama.cpp fixes the chunk (8192), the NoPE step (4) and the temperature (floor 8192, scale
// 0.1) for every `llama4` file rather than reading them, and leaves QK-norm out of the files
// with 128 experts (Maverick); a GGUF here is read the same way, and a file whose keys say
// otherwise (attention.sliding_window, attention.sliding_window_pattern) is refused rather
// than run as llama.cpp runs it. config.json says each one, with Llama4TextConfig's defaults;
// Llama4ForConditionalGeneration's (model_type "llama4") says them under text_config.
#include <algorithm>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

// llama.cpp's constants for every `llama4` file (src/models/llama4.cpp).
constexpr int64_t kLlamaCppChunk = 8192;
constexpr int64_t kLlamaCppNoRopeStep = 4;
constexpr int64_t kLlamaCppTemperatureFloor = 8192;
constexpr double kLlamaCppTemperatureScale = 0.1;
constexpr int64_t kLlamaCppExpertsWithoutQkNorm = 128;  // its LLM_TYPE_17B_128E

// What differs between Llama 4's layers, as the readers found it.
struct Llama4Layers {
  std::vector<bool> rope;     // false: NoPE
  std::vector<bool> chunked;  // chunked local attention
  int64_t chunk = 0;
  bool qk_norm = false;       // the L2 norm on the RoPE layers
  int64_t temperature_floor = 0;  // 0: no temperature tuning
  double temperature_scale = 0.0;
  double rope_theta = 0.0;    // of the RoPE layers
};

void SetLlama4Layers(const Llama4Layers& l4, ModelSpec& spec) {
  spec.hf_rope_interleaved = true;
  spec.hf_mlp_module = "feed_forward";
  family_internal::UniformLayers(0, spec);
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    LayerSpec& layer = spec.layers[l];
    layer.rope = l4.rope[l];
    layer.rope_theta = l4.rope_theta;
    layer.attention_chunk = l4.chunked[l] ? l4.chunk : 0;
    layer.qk_l2_norm = l4.qk_norm && l4.rope[l];
    if (!l4.rope[l] && l4.temperature_floor > 0) {
      layer.temperature_floor = l4.temperature_floor;
      layer.temperature_scale = l4.temperature_scale;
    }
  }
}

// The experts of layers l with (l + 1) % step == 0, as both readers find them: top-k on the
// logits, the sigmoid weight on the expert's input, a shared expert of the experts' width.
// `experts_key` and `top_k_key` name where the counts were read, for a count that does not fit.
absl::Status SetLlama4Experts(int64_t experts, int64_t top_k, int64_t expert_ff,
                              const std::vector<bool>& moe_layers, const std::string& experts_key,
                              const std::string& top_k_key, ModelSpec& spec) {
  TP_ASSIGN_OR_RETURN(const int32_t num_experts,
                      family_internal::RoutingCount(experts_key, experts));
  TP_ASSIGN_OR_RETURN(const int32_t num_used, family_internal::RoutingCount(top_k_key, top_k));
  spec.moe.routing = {.score = RoutingScore::kSigmoid,
                      .num_experts = num_experts,
                      .top_k = num_used,
                      .select_on_logits = true,
                      .weight_on_input = true};
  spec.moe.expert_intermediate_size = expert_ff;
  spec.moe.shared_expert_intermediate_size = expert_ff;
  spec.moe.hf_names = MoeSpec::HfNames::kFusedFeedForward;
  bool any = false;
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    spec.layers[l].moe = experts > 0 && moe_layers[l];
    any |= spec.layers[l].moe;
  }
  if (!any) spec.moe = MoeSpec{};
  return absl::OkStatus();
}

absl::Status Llama4FromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  using config_internal::GgufInt;
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> window, GgufInt(g, arch + ".attention.sliding_window"));
  if (window) {
    return absl::UnimplementedError(StrCat(
        g.Describe(), ": ", arch, ".attention.sliding_window ", *window,
        ": llama.cpp runs a llama4 file with this key ", *window == 0
            ? "without chunks and with RoPE on all but the last layer"
            : StrCat("with chunks of ", kLlamaCppChunk, " whatever its value"),
        "; tpserve serves the files llama.cpp's converter writes, which have no such key"));
  }
  if (g.HasKey(arch + ".attention.sliding_window_pattern")) {
    return absl::UnimplementedError(StrCat(
        g.Describe(), ": ", arch, ".attention.sliding_window_pattern: llama.cpp would move the "
        "chunked layers but not the NoPE ones; only its default (3 chunked, 1 global) is served"));
  }
  TP_ASSIGN_OR_RETURN(const int64_t step,
                      config_internal::GgufRequiredInt(g, arch + ".interleave_moe_layer_step"));
  TP_ASSIGN_OR_RETURN(std::optional<double> swa_base,
                      config_internal::GgufFloat(g, arch + ".rope.freq_base_swa"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> experts, GgufInt(g, arch + ".expert_count"));
  Llama4Layers l4{.chunk = kLlamaCppChunk,
                  .qk_norm = experts.value_or(0) != kLlamaCppExpertsWithoutQkNorm,
                  .temperature_floor = kLlamaCppTemperatureFloor,
                  .temperature_scale = kLlamaCppTemperatureScale,
                  .rope_theta = swa_base.value_or(spec.rope_theta)};
  std::vector<bool> moe_layers(spec.num_layers);
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    const bool rope = (l + 1) % kLlamaCppNoRopeStep != 0;
    l4.rope.push_back(rope);
    l4.chunked.push_back(rope);  // llama.cpp's swa pattern 4: the same layers
    moe_layers[l] = step > 0 && (l + 1) % step == 0;
  }
  SetLlama4Layers(l4, spec);
  if (experts.value_or(0) == 0) return absl::OkStatus();
  TP_ASSIGN_OR_RETURN(const int64_t used,
                      config_internal::GgufRequiredInt(g, arch + ".expert_used_count"));
  TP_ASSIGN_OR_RETURN(const int64_t expert_ff,
                      config_internal::GgufRequiredInt(g, arch + ".expert_feed_forward_length"));
  TP_RETURN_IF_ERROR(SetLlama4Experts(*experts, used, expert_ff, moe_layers,
                                      StrCat(g.Describe(), ": ", arch, ".expert_count"),
                                      StrCat(g.Describe(), ": ", arch, ".expert_used_count"),
                                      spec));
  return absl::OkStatus();
}

// A per-layer list of config.json (no_rope_layers, moe_layers, layer_types) or nullopt when
// absent or null.
absl::StatusOr<std::optional<Json>> JsonList(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return config_internal::BadKey(key, "must be a list");
  return *it;
}

absl::StatusOr<int64_t> PositiveOr(const Json& j, std::string_view key, int64_t fallback) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> v, config_internal::JsonInt(j, key));
  if (v && *v < 1) return config_internal::BadKey(key, StrCat("is ", *v, "; it must be >= 1"));
  return v.value_or(fallback);
}

// no_rope_layers (1: RoPE, 0: NoPE; at least one entry per layer) or every
// no_rope_layer_interval-th layer NoPE, as Llama4TextConfig decides.
absl::StatusOr<std::vector<bool>> RopeLayers(const Json& j, int64_t num_layers) {
  TP_ASSIGN_OR_RETURN(std::optional<Json> listed, JsonList(j, "no_rope_layers"));
  std::vector<bool> rope(num_layers);
  if (listed && !listed->empty()) {
    if (static_cast<int64_t>(listed->size()) < num_layers) {
      return config_internal::BadKey("no_rope_layers",
                                     StrCat("has ", listed->size(), " entries for ", num_layers,
                                            " layers"));
    }
    for (int64_t l = 0; l < num_layers; ++l) {
      const Json& v = (*listed)[l];
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1)) {
        return config_internal::BadKey("no_rope_layers",
                                       StrCat("[", l, "] is ", v.dump(), "; 1 (RoPE) or 0 (NoPE) "
                                              "was expected"));
      }
      rope[l] = v.get<int64_t>() == 1;
    }
    return rope;
  }
  TP_ASSIGN_OR_RETURN(const int64_t interval, PositiveOr(j, "no_rope_layer_interval", 4));
  for (int64_t l = 0; l < num_layers; ++l) rope[l] = (l + 1) % interval != 0;
  return rope;
}

// layer_types ("chunked_attention" / "full_attention") or, as Llama4TextConfig, the RoPE layers.
absl::StatusOr<std::vector<bool>> ChunkedLayers(const Json& j, const std::vector<bool>& rope) {
  TP_ASSIGN_OR_RETURN(std::optional<Json> listed, JsonList(j, "layer_types"));
  if (!listed) return rope;
  if (listed->size() != rope.size()) {
    return config_internal::BadKey(
        "layer_types", StrCat("must be a list of num_hidden_layers = ", rope.size(), " strings"));
  }
  std::vector<bool> chunked(rope.size());
  for (size_t l = 0; l < rope.size(); ++l) {
    const Json& t = (*listed)[l];
    if (t == "chunked_attention") {
      chunked[l] = true;
    } else if (t != "full_attention") {
      return config_internal::UnimplementedKey(
          StrCat("layer_types[", l, "]"), t,
          "Llama 4's layer kinds are 'chunked_attention' and 'full_attention'");
    }
  }
  return chunked;
}

// moe_layers (indices) or every interleave_moe_layer_step-th layer (l + 1 a multiple of it).
absl::StatusOr<std::vector<bool>> MoeLayers(const Json& j, int64_t num_layers) {
  TP_ASSIGN_OR_RETURN(std::optional<Json> listed, JsonList(j, "moe_layers"));
  std::vector<bool> moe(num_layers, false);
  if (listed) {
    for (const Json& l : *listed) {
      if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= num_layers) {
        return config_internal::BadKey("moe_layers", StrCat("holds ", l.dump(), "; a layer index "
                                                            "in [0, ", num_layers, ") was expected"));
      }
      moe[l.get<int64_t>()] = true;
    }
    return moe;
  }
  TP_ASSIGN_OR_RETURN(const int64_t step, PositiveOr(j, "interleave_moe_layer_step", 1));
  for (int64_t l = step - 1; l < num_layers; l += step) moe[l] = true;
  return moe;
}

// attn_temperature_tuning: a boolean, or (the first released configs) a number, non-zero on.
absl::StatusOr<bool> TemperatureTuning(const Json& j) {
  auto it = j.find("attn_temperature_tuning");
  if (it == j.end() || it->is_null()) return true;  // Llama4TextConfig's default
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number()) return it->get<double>() != 0.0;
  return config_internal::BadKey("attn_temperature_tuning",
                                 StrCat("must be a boolean, got ", it->dump()));
}

absl::Status Llama4FromHf(const Json& j, ModelSpec& spec) {
  using config_internal::JsonBool;
  using config_internal::JsonInt;
  using config_internal::JsonNumber;
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Llama 4's attention projections carry no bias here"));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  // Llama4TextConfig: intermediate_size is the experts' (and the shared expert's) width,
  // intermediate_size_mlp the dense layers'.
  const int64_t expert_ff = spec.intermediate_size;
  TP_ASSIGN_OR_RETURN(spec.intermediate_size, PositiveOr(j, "intermediate_size_mlp", 16384));
  TP_ASSIGN_OR_RETURN(const std::vector<bool> rope, RopeLayers(j, spec.num_layers));
  TP_ASSIGN_OR_RETURN(const std::vector<bool> chunked, ChunkedLayers(j, rope));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> chunk, JsonInt(j, "attention_chunk_size"));
  if (!j.contains("attention_chunk_size")) chunk = 8192;  // the default; null: no chunks
  if (chunk && *chunk < 1) {
    return config_internal::BadKey("attention_chunk_size",
                                   StrCat("is ", *chunk, "; it must be positive or null"));
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> qk_norm, JsonBool(j, "use_qk_norm"));
  TP_ASSIGN_OR_RETURN(const bool tuning, TemperatureTuning(j));
  TP_ASSIGN_OR_RETURN(const int64_t floor_scale, PositiveOr(j, "floor_scale", 8192));
  TP_ASSIGN_OR_RETURN(std::optional<double> attn_scale, JsonNumber(j, "attn_scale"));
  Llama4Layers l4{.rope = rope,
                  .chunked = chunked,
                  .chunk = chunk.value_or(0),
                  .qk_norm = qk_norm.value_or(true),
                  .temperature_floor = tuning ? floor_scale : 0,
                  .temperature_scale = attn_scale.value_or(0.1),
                  .rope_theta = spec.rope_theta};
  if (l4.chunk == 0) l4.chunked.assign(spec.num_layers, false);
  SetLlama4Layers(l4, spec);
  // Llama4TextConfig's defaults: 16 experts, top-1.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> experts, JsonInt(j, "num_local_experts"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> top_k, JsonInt(j, "num_experts_per_tok"));
  TP_ASSIGN_OR_RETURN(const std::vector<bool> moe_layers, MoeLayers(j, spec.num_layers));
  TP_RETURN_IF_ERROR(SetLlama4Experts(experts.value_or(16), top_k.value_or(1), expert_ff,
                                      moe_layers, "config.json key 'num_local_experts'",
                                      "config.json key 'num_experts_per_tok'", spec));
  return absl::OkStatus();
}

}  // namespace

// Llama4ForConditionalGeneration (Scout's and Maverick's published checkpoints): the text model
// under text_config and language_model., the vision tower and its projector not served.
const ModelFamily kLlama4Family = {"llama4",
                                   {"llama4"},
                                   {"llama4_text"},
                                   Llama4FromGguf,
                                   Llama4FromHf,
                                   /*hf_ties_embeddings_by_default=*/false,
                                   /*hf_multimodal_model_types=*/{"llama4"},
                                   /*hf_multimodal_text_prefix=*/"language_model.",
                                   /*hf_multimodal_unserved_prefixes=*/
                                   {"vision_model.", "multi_modal_projector."}};

}  // namespace tpserve
