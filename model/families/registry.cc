#include "model/families/family.h"

#include "base/status_macros.h"

namespace tpserve {

const std::vector<const ModelFamily*>& ModelFamilies() {
  static const std::vector<const ModelFamily*> kAll = {
      &kDeepseek2Family, &kGemma2Family,  &kGemma3Family, &kGlm4MoeFamily,
      &kLlamaFamily,     &kLlama4Family,  &kMistralFamily, &kMixtralFamily,
      &kQwen2Family,     &kQwen3Family,   &kQwen3MoeFamily};
  return kAll;
}

std::vector<std::string> ModelFamilyNames() {
  std::vector<std::string> names;
  for (const ModelFamily* f : ModelFamilies()) names.emplace_back(f->name);
  return names;
}

const ModelFamily* FamilyForGgufArchitecture(std::string_view architecture) {
  for (const ModelFamily* f : ModelFamilies()) {
    for (std::string_view a : f->gguf_architectures) {
      if (a == architecture) return f;
    }
  }
  return nullptr;
}

const ModelFamily* FamilyForHfModelType(std::string_view model_type) {
  for (const ModelFamily* f : ModelFamilies()) {
    for (std::string_view t : f->hf_model_types) {
      if (t == model_type) return f;
    }
    for (std::string_view t : f->hf_multimodal_model_types) {
      if (t == model_type) return f;
    }
  }
  return nullptr;
}

namespace family_internal {

void UniformLayers(int64_t sliding_window, ModelSpec& spec) {
  spec.layers.assign(spec.num_layers,
                     LayerSpec{sliding_window, spec.rope_theta, spec.rope_scaling});
}

absl::Status RefuseUnimplementedCommonKeys(const config_internal::Json& json) {
  using config_internal::RefuseIfSet;
  TP_RETURN_IF_ERROR(RefuseIfSet(json, "mlp_bias", "the MLP projections carry no bias here"));
  TP_RETURN_IF_ERROR(RefuseIfSet(json, "attention_sink", "attention sinks"));
  TP_RETURN_IF_ERROR(RefuseIfSet(json, "sinks", "attention sinks"));
  auto partial = json.find("partial_rotary_factor");
  if (partial != json.end() && !partial->is_null() &&
      !(partial->is_number() && partial->get<double>() == 1.0)) {
    return config_internal::UnimplementedKey("partial_rotary_factor", *partial,
                                             "RoPE rotates every dimension of a head here");
  }
  return absl::OkStatus();
}

}  // namespace family_internal
}  // namespace tpserve
