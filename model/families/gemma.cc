// Gemma 2 and Gemma 3 (text): embeddings times sqrt(hidden), RMSNorm by (1 + w) (Hugging Face
// files store w - 1; llama.cpp's converter adds the 1), norms before and after attention and
// MLP, GeGLU with tanh GELU, NEOX RoPE, and interleaved local (sliding-window) and global layers:
//   Gemma 2: layers alternate, even ones local; soft-caps on attention scores and final logits.
//   Gemma 3: five local layers to one global (layer l is global when l % 6 == 5), local RoPE
//            base 10k (GGUF does not store it: llama.cpp fixes it at 10k), QK-norm, no caps.
// The query scale: config.json's query_pre_attn_scalar^-1/2; a GGUF file does not store it,
// and llama.cpp uses 1/sqrt(head_dim) except for the 27B models (1/sqrt(hidden / heads)),
// which it recognises by their layer count (46 for Gemma 2, 62 for Gemma 3): so do we.
#include <cmath>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

constexpr double kGemma3LocalRopeBase = 10000.0;

void GemmaCommon(ModelSpec& spec) {
  spec.mlp_activation = Activation::kGeluTanh;
  spec.sandwich_norms = true;
  spec.embedding_multiplier = std::sqrt(static_cast<double>(spec.hidden_size));
  spec.hf_norm_weight_offset = true;
  spec.gguf_rope_rotate_half = true;
  spec.builtin_chat_format = "gemma";
}

// `local(l)` says whether layer l slides; local layers use `local_theta` unscaled.
template <typename IsLocal>
void GemmaLayers(ModelSpec& spec, int64_t window, double local_theta, IsLocal local) {
  spec.layers.clear();
  for (int64_t l = 0; l < spec.num_layers; ++l) {
    if (local(l)) {
      spec.layers.push_back(LayerSpec{window, local_theta, RopeScaling{}});
    } else {
      spec.layers.push_back(LayerSpec{0, spec.rope_theta, spec.rope_scaling});
    }
  }
}

// llama.cpp's rule for the query scale of a GGUF Gemma (see the file comment).
void LlamaCppQueryScale(ModelSpec& spec, int64_t layers_of_27b) {
  const double width = spec.num_layers == layers_of_27b
                           ? static_cast<double>(spec.hidden_size / spec.num_heads)
                           : static_cast<double>(spec.head_dim);
  spec.query_scale = 1.0 / std::sqrt(width);
}

absl::StatusOr<int64_t> GgufWindow(const GgufFile& g, const std::string& arch) {
  TP_ASSIGN_OR_RETURN(int64_t window,
                      config_internal::GgufRequiredInt(g, arch + ".attention.sliding_window"));
  if (window <= 0) {
    return absl::InvalidArgumentError(StrCat(g.Describe(), ": ", arch,
                                             ".attention.sliding_window is ", window,
                                             "; it must be positive"));
  }
  return window;
}

absl::Status Gemma2FromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  GemmaCommon(spec);
  TP_ASSIGN_OR_RETURN(int64_t window, GgufWindow(g, arch));
  TP_ASSIGN_OR_RETURN(std::optional<double> attn_cap,
                      config_internal::GgufFloat(g, arch + ".attn_logit_softcapping"));
  TP_ASSIGN_OR_RETURN(std::optional<double> final_cap,
                      config_internal::GgufFloat(g, arch + ".final_logit_softcapping"));
  spec.attn_logit_softcap = attn_cap.value_or(50.0);  // llama.cpp's defaults
  spec.final_logit_softcap = final_cap.value_or(30.0);
  LlamaCppQueryScale(spec, 46);
  GemmaLayers(spec, window, spec.rope_theta, [](int64_t l) { return l % 2 == 0; });
  return absl::OkStatus();
}

absl::Status Gemma3FromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  GemmaCommon(spec);
  spec.qk_norm = true;
  TP_ASSIGN_OR_RETURN(int64_t window, GgufWindow(g, arch));
  LlamaCppQueryScale(spec, 62);
  GemmaLayers(spec, window, kGemma3LocalRopeBase, [](int64_t l) { return l % 6 != 5; });
  return absl::OkStatus();
}

// The soft-caps, the query scale and the window, as config.json says them.
absl::Status GemmaHfCommon(const Json& j, ModelSpec& spec, int64_t* window) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Gemma's attention projections carry no bias here"));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "use_bidirectional_attention", "attention is causal here (EmbeddingGemma is not)"));
  // Gemma configs name the activation twice; hidden_activation is the one transformers uses.
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_activation",
                                                       "gelu_pytorch_tanh"));
  if (!j.contains("hidden_activation") || j["hidden_activation"].is_null()) {
    TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "gelu_pytorch_tanh"));
  }
  GemmaCommon(spec);
  TP_ASSIGN_OR_RETURN(std::optional<double> attn_cap,
                      config_internal::JsonNumber(j, "attn_logit_softcapping"));
  TP_ASSIGN_OR_RETURN(std::optional<double> final_cap,
                      config_internal::JsonNumber(j, "final_logit_softcapping"));
  spec.attn_logit_softcap = attn_cap.value_or(0.0);
  spec.final_logit_softcap = final_cap.value_or(0.0);
  TP_ASSIGN_OR_RETURN(std::optional<double> scalar,
                      config_internal::JsonNumber(j, "query_pre_attn_scalar"));
  if (scalar) {
    if (!(*scalar > 0)) return config_internal::BadKey("query_pre_attn_scalar", "must be > 0");
    spec.query_scale = 1.0 / std::sqrt(*scalar);
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> w, config_internal::JsonInt(j, "sliding_window"));
  if (!w || *w <= 0) return config_internal::BadKey("sliding_window", "must be a positive integer");
  *window = *w;
  return absl::OkStatus();
}

// layer_types (newer configs) says which layers slide; otherwise `fallback(l)` does.
template <typename Fallback>
absl::StatusOr<std::vector<bool>> LocalLayers(const Json& j, int64_t num_layers,
                                              Fallback fallback) {
  std::vector<bool> local(num_layers);
  auto it = j.find("layer_types");
  if (it == j.end() || it->is_null()) {
    for (int64_t l = 0; l < num_layers; ++l) local[l] = fallback(l);
    return local;
  }
  if (!it->is_array() || static_cast<int64_t>(it->size()) != num_layers) {
    return config_internal::BadKey(
        "layer_types", StrCat("must be a list of num_hidden_layers = ", num_layers, " strings"));
  }
  for (int64_t l = 0; l < num_layers; ++l) {
    const Json& t = (*it)[l];
    if (t == "sliding_attention") {
      local[l] = true;
    } else if (t == "full_attention") {
      local[l] = false;
    } else {
      return config_internal::UnimplementedKey(
          StrCat("layer_types[", l, "]"), t,
          "layer kinds are 'full_attention' and 'sliding_attention'");
    }
  }
  return local;
}

absl::Status Gemma2FromHf(const Json& j, ModelSpec& spec) {
  int64_t window = 0;
  TP_RETURN_IF_ERROR(GemmaHfCommon(j, spec, &window));
  // Gemma2Config's defaults when the keys are absent altogether (null means no cap).
  if (!j.contains("attn_logit_softcapping")) spec.attn_logit_softcap = 50.0;
  if (!j.contains("final_logit_softcapping")) spec.final_logit_softcap = 30.0;
  TP_ASSIGN_OR_RETURN(std::vector<bool> local,
                      LocalLayers(j, spec.num_layers, [](int64_t l) { return l % 2 == 0; }));
  GemmaLayers(spec, window, spec.rope_theta, [&](int64_t l) { return local[l]; });
  return absl::OkStatus();
}

absl::Status Gemma3FromHf(const Json& j, ModelSpec& spec) {
  int64_t window = 0;
  TP_RETURN_IF_ERROR(GemmaHfCommon(j, spec, &window));
  spec.qk_norm = true;
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> pattern,
                      config_internal::JsonInt(j, "sliding_window_pattern"));
  const int64_t every = pattern.value_or(6);
  if (every <= 0) return config_internal::BadKey("sliding_window_pattern", "must be positive");
  TP_ASSIGN_OR_RETURN(std::vector<bool> local,
                      LocalLayers(j, spec.num_layers,
                                  [every](int64_t l) { return (l + 1) % every != 0; }));
  TP_ASSIGN_OR_RETURN(std::optional<double> local_base,
                      config_internal::JsonNumber(j, "rope_local_base_freq"));
  GemmaLayers(spec, window, local_base.value_or(kGemma3LocalRopeBase),
              [&](int64_t l) { return local[l]; });
  return absl::OkStatus();
}

}  // namespace

const ModelFamily kGemma2Family = {"gemma2", {"gemma2"}, {"gemma2"}, Gemma2FromGguf, Gemma2FromHf,
                                   /*hf_ties_embeddings_by_default=*/true};
const ModelFamily kGemma3Family = {"gemma3", {"gemma3"}, {"gemma3_text"}, Gemma3FromGguf,
                                   Gemma3FromHf, /*hf_ties_embeddings_by_default=*/true};

}  // namespace tpserve
