#include "model/weight_formats.h"

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

struct RoleNames {
  TensorRole role;
  std::string_view name;       // ours
  std::string_view gguf_stem;  // llama.cpp's, without "blk.N." and ".weight"
};

constexpr std::array<RoleNames, kNumTensorRoles> kRoleNames = {{
    {TensorRole::kEmbedding, "embedding", "token_embd"},
    {TensorRole::kAttnNorm, "attn_norm", "attn_norm"},
    {TensorRole::kQ, "q", "attn_q"},
    {TensorRole::kK, "k", "attn_k"},
    {TensorRole::kV, "v", "attn_v"},
    {TensorRole::kO, "o", "attn_output"},
    {TensorRole::kFfnNorm, "ffn_norm", "ffn_norm"},
    {TensorRole::kGate, "gate", "ffn_gate"},
    {TensorRole::kUp, "up", "ffn_up"},
    {TensorRole::kDown, "down", "ffn_down"},
    {TensorRole::kFinalNorm, "final_norm", "output_norm"},
    {TensorRole::kLmHead, "lm_head", "output"},
    {TensorRole::kQBias, "q_bias", "attn_q"},  // ".bias" rather than ".weight"
    {TensorRole::kKBias, "k_bias", "attn_k"},
    {TensorRole::kVBias, "v_bias", "attn_v"},
    {TensorRole::kQNorm, "q_norm", "attn_q_norm"},
    {TensorRole::kKNorm, "k_norm", "attn_k_norm"},
    {TensorRole::kPostAttnNorm, "post_attn_norm", "post_attention_norm"},
    {TensorRole::kPostFfnNorm, "post_ffn_norm", "post_ffw_norm"},
    {TensorRole::kRouter, "router", "ffn_gate_inp"},
    {TensorRole::kExpertGate, "expert_gate", "ffn_gate_exps"},
    {TensorRole::kExpertUp, "expert_up", "ffn_up_exps"},
    {TensorRole::kExpertDown, "expert_down", "ffn_down_exps"},
    {TensorRole::kExpertBias, "expert_bias", "exp_probs_b"},  // ".bias"
    {TensorRole::kSharedGate, "shared_gate", "ffn_gate_shexp"},
    {TensorRole::kSharedUp, "shared_up", "ffn_up_shexp"},
    {TensorRole::kSharedDown, "shared_down", "ffn_down_shexp"},
    {TensorRole::kQA, "q_a", "attn_q_a"},
    {TensorRole::kQANorm, "q_a_norm", "attn_q_a_norm"},
    {TensorRole::kQB, "q_b", "attn_q_b"},
    {TensorRole::kKvA, "kv_a", "attn_kv_a_mqa"},
    {TensorRole::kKvANorm, "kv_a_norm", "attn_kv_a_norm"},
    {TensorRole::kKvB, "kv_b", "attn_kv_b"},
    {TensorRole::kKB, "k_b", "attn_k_b"},
    {TensorRole::kVB, "v_b", "attn_v_b"},
    {TensorRole::kMtpENorm, "mtp_enorm", "nextn.enorm"},
    {TensorRole::kMtpHNorm, "mtp_hnorm", "nextn.hnorm"},
    {TensorRole::kMtpEhProj, "mtp_eh_proj", "nextn.eh_proj"},
}};

// Formats for (embedding + LM head, projections, norms).
WeightFormats Uniform(std::string_view preset, TensorFormat embed, TensorFormat proj,
                      TensorFormat norm) {
  WeightFormats f;
  f.preset = std::string(preset);
  for (TensorRole role : kAllTensorRoles) {
    if (IsVectorRole(role) || role == TensorRole::kRouter || IsMlaUpRole(role)) {
      // Routers stay in float as checkpoints keep them (llama-quantize too); so do MLA's
      // up-projections, whose forms are cut and transposed from one another per head.
      f[role] = norm;
    } else if (role == TensorRole::kEmbedding || role == TensorRole::kLmHead) {
      f[role] = embed;
    } else {
      f[role] = proj;
    }
  }
  return f;
}

}  // namespace

std::string_view TensorRoleName(TensorRole role) { return kRoleNames[static_cast<int>(role)].name; }

bool IsNormRole(TensorRole role) {
  return role == TensorRole::kAttnNorm || role == TensorRole::kFfnNorm ||
         role == TensorRole::kFinalNorm || role == TensorRole::kQNorm ||
         role == TensorRole::kKNorm || role == TensorRole::kPostAttnNorm ||
         role == TensorRole::kPostFfnNorm || role == TensorRole::kQANorm ||
         role == TensorRole::kKvANorm || role == TensorRole::kMtpENorm ||
         role == TensorRole::kMtpHNorm;
}

bool IsMlaUpRole(TensorRole role) {
  return role == TensorRole::kKvB || role == TensorRole::kKB || role == TensorRole::kVB;
}

bool IsAttentionRole(TensorRole role) {
  switch (role) {
    case TensorRole::kQ:
    case TensorRole::kK:
    case TensorRole::kV:
    case TensorRole::kO:
    case TensorRole::kQBias:
    case TensorRole::kKBias:
    case TensorRole::kVBias:
    case TensorRole::kQNorm:
    case TensorRole::kKNorm:
    case TensorRole::kQA:
    case TensorRole::kQANorm:
    case TensorRole::kQB:
    case TensorRole::kKvA:
    case TensorRole::kKvANorm:
    case TensorRole::kKvB:
    case TensorRole::kKB:
    case TensorRole::kVB:
      return true;
    default:
      return false;
  }
}

bool IsBiasRole(TensorRole role) {
  return role == TensorRole::kQBias || role == TensorRole::kKBias || role == TensorRole::kVBias;
}

bool IsGgufBiasTensor(TensorRole role) {
  return IsBiasRole(role) || role == TensorRole::kExpertBias;
}

bool IsVectorRole(TensorRole role) {
  return IsNormRole(role) || IsBiasRole(role) || role == TensorRole::kExpertBias;
}

bool IsExpertRole(TensorRole role) {
  return role == TensorRole::kExpertGate || role == TensorRole::kExpertUp ||
         role == TensorRole::kExpertDown;
}

bool IsSharedExpertRole(TensorRole role) {
  return role == TensorRole::kSharedGate || role == TensorRole::kSharedUp ||
         role == TensorRole::kSharedDown;
}

bool IsPerLayerRole(TensorRole role) {
  return role != TensorRole::kEmbedding && role != TensorRole::kFinalNorm &&
         role != TensorRole::kLmHead && !IsMtpInputRole(role);
}

bool IsMtpInputRole(TensorRole role) {
  return role == TensorRole::kMtpENorm || role == TensorRole::kMtpHNorm ||
         role == TensorRole::kMtpEhProj;
}

std::optional<TensorRole> TensorRoleFromGgufName(std::string_view tensor_name) {
  std::string_view stem = tensor_name;
  bool bias = false;
  if (stem.ends_with(".weight")) {
    stem.remove_suffix(7);
  } else if (stem.ends_with(".bias")) {
    stem.remove_suffix(5);
    bias = true;
  } else {
    return std::nullopt;
  }
  bool per_layer = false;
  if (stem.starts_with("blk.")) {
    stem.remove_prefix(4);
    const size_t dot = stem.find('.');
    if (dot == std::string_view::npos || dot == 0) return std::nullopt;
    for (char c : stem.substr(0, dot)) {
      if (c < '0' || c > '9') return std::nullopt;
    }
    stem.remove_prefix(dot + 1);
    per_layer = true;
  }
  for (const RoleNames& r : kRoleNames) {
    if (r.gguf_stem == stem && IsPerLayerRole(r.role) == per_layer &&
        IsGgufBiasTensor(r.role) == bias) {
      return r.role;
    }
  }
  return std::nullopt;
}

const TensorFormat& WeightFormats::At(TensorRole role, int64_t layer) const {
  const auto it = layer_overrides.find({role, layer});
  return it == layer_overrides.end() ? (*this)[role] : it->second;
}

std::vector<TensorFormat> WeightFormats::AllOf(TensorRole role) const {
  std::vector<TensorFormat> out = {(*this)[role]};
  for (const auto& [key, format] : layer_overrides) {
    if (key.first == role && std::find(out.begin(), out.end(), format) == out.end()) {
      out.push_back(format);
    }
  }
  return out;
}

void WeightFormats::Set(TensorRole role, const TensorFormat& format) {
  (*this)[role] = format;
  std::erase_if(layer_overrides, [role](const auto& entry) { return entry.first.first == role; });
}

absl::Status WeightFormats::Validate() const {
  for (const auto& [key, f] : layer_overrides) {
    if (IsVectorRole(key.first) || !IsPerLayerRole(key.first)) {
      return absl::InvalidArgumentError(StrCat("weight format override of ",
                                               TensorRoleName(key.first), " in layer ",
                                               key.second, ": only per-layer matrices can vary"));
    }
  }
  for (TensorRole role : kAllTensorRoles) {
    const TensorFormat& f = (*this)[role];
    if (IsVectorRole(role) && !(f.kind == FormatKind::kF32 || f.kind == FormatKind::kF16 ||
                                f.kind == FormatKind::kBF16)) {
      return absl::InvalidArgumentError(StrCat("weight format of ", TensorRoleName(role), " is ",
                                               TensorFormatName(f),
                                               "; norms and biases must be f32, f16 or bf16"));
    }
    if (f.kind == FormatKind::kInt4Group && f.group_size <= 0) {
      return absl::InvalidArgumentError(StrCat("weight format of ", TensorRoleName(role),
                                               ": int4 group size ", f.group_size, " must be > 0"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WeightFormats> WeightFormatsPreset(std::string_view name) {
  const TensorFormat f32 = TensorFormat::Of(FormatKind::kF32);
  const TensorFormat f16 = TensorFormat::Of(FormatKind::kF16);
  const TensorFormat bf16 = TensorFormat::Of(FormatKind::kBF16);
  if (name == "f32") return Uniform(name, f32, f32, f32);
  if (name == "fp16" || name == "f16") return Uniform("fp16", f16, f16, f16);
  if (name == "bf16") return Uniform(name, bf16, bf16, bf16);
  if (name == "fp8") return Uniform(name, bf16, TensorFormat::Of(FormatKind::kFp8PerChannel), bf16);
  if (name == "fp8-block") {
    return Uniform(name, bf16, TensorFormat::Of(FormatKind::kFp8Block128), bf16);
  }
  if (name == "q8_0" || name == "q4_0" || name == "q4_1" || name == "q4_k" || name == "q5_k" ||
      name == "q6_k") {
    TP_ASSIGN_OR_RETURN(TensorFormat ggml, ParseTensorFormat(name));
    return Uniform(name, ggml, ggml, f32);
  }
  if (name == "int4" || name.starts_with("int4-g")) {
    TP_ASSIGN_OR_RETURN(TensorFormat int4, ParseTensorFormat(name));
    // Plain "int4" keeps its name: FitInt4Groups (model/sharding.h) may pick a smaller group.
    return Uniform(name == "int4" ? "int4" : TensorFormatName(int4), f16, int4, f16);
  }
  return absl::InvalidArgumentError(StrCat("unknown weight format \"", name, "\"; accepted: ",
                                           absl::StrJoin(WeightFormatsPresetNames(), ", ")));
}

std::vector<std::string> WeightFormatsPresetNames() {
  return {"f32",  "fp16", "bf16", "fp8",  "fp8-block", "int4", "int4-g<N>",
          "q8_0", "q4_0", "q4_1", "q4_k", "q5_k",      "q6_k"};
}

absl::StatusOr<WeightFormats> WeightFormatsFromTensorTypes(
    const std::vector<NamedTensorType>& tensors, bool tied_embeddings) {
  WeightFormats formats;
  formats.preset = "gguf";
  // Per role: the format of each layer, and how many layers use each format.
  std::array<std::map<int64_t, TensorFormat>, kNumTensorRoles> by_layer;
  for (const NamedTensorType& t : tensors) {
    const std::optional<TensorRole> role = TensorRoleFromGgufName(t.name);
    if (!role.has_value()) continue;
    absl::StatusOr<TensorFormat> format = ParseTensorFormat(absl::AsciiStrToLower(t.type_name));
    if (!format.ok() || format->kind == FormatKind::kFp8PerChannel) {
      return absl::UnimplementedError(StrCat("tensor ", t.name, " is stored as ", t.type_name,
                                             ", which the planner cannot size"));
    }
    int64_t layer = 0;
    if (IsPerLayerRole(*role)) {
      const std::string_view digits = std::string_view(t.name).substr(4);
      layer = std::stoll(std::string(digits.substr(0, digits.find('.'))));
    }
    by_layer[static_cast<int>(*role)][layer] = *format;
  }
  for (TensorRole role : kAllTensorRoles) {
    const std::map<int64_t, TensorFormat>& layers = by_layer[static_cast<int>(role)];
    if (layers.empty()) {
      if (role == TensorRole::kLmHead && tied_embeddings) {
        formats[role] = formats[TensorRole::kEmbedding];
        continue;
      }
      // The roles of other families than Llama's, the dense MLP of a model whose every layer is
      // experts, and norms a family names otherwise (GLM's pre-MLP norm; norms are held in f32
      // whatever their file type): absent from a model without them (which HasRole of the model's
      // description says; the loader names a tensor a model needs and lacks), f32 as llama.cpp
      // stores them when present.
      if (role >= TensorRole::kQBias || role == TensorRole::kGate || role == TensorRole::kUp ||
          role == TensorRole::kDown || IsNormRole(role)) {
        formats[role] = TensorFormat::Of(FormatKind::kF32);
        continue;
      }
      return absl::InvalidArgumentError(
          StrCat("no tensor for role ", TensorRoleName(role), " in the checkpoint"));
    }
    // The most common format is the role's; the other layers are overrides.
    std::vector<std::pair<TensorFormat, int>> counts;
    for (const auto& entry : layers) {
      const TensorFormat& f = entry.second;  // not a structured binding: clang 14 (the fuzz
                                             // build) cannot capture one in a lambda
      auto it = std::find_if(counts.begin(), counts.end(),
                             [&](const auto& c) { return c.first == f; });
      if (it == counts.end()) {
        counts.push_back({f, 1});
      } else {
        ++it->second;
      }
    }
    const auto most = std::max_element(counts.begin(), counts.end(),
                                       [](const auto& a, const auto& b) {
                                         return a.second < b.second;
                                       });
    formats[role] = most->first;
    for (const auto& [layer, f] : layers) {
      if (!(f == most->first)) formats.layer_overrides[{role, layer}] = f;
    }
  }
  return formats;
}

}  // namespace tpserve
