#include "checkpoint/stored_formats.h"

#include "base/status_macros.h"
#include "checkpoint/stored_matrix.h"
#include "base/str_cat.h"
#include "model/sharding.h"

namespace tpserve {

absl::StatusOr<WeightFormats> StoredWeightFormats(const WeightSource& source,
                                                  const QuantScheme& scheme,
                                                  const ModelSpec& config) {
  WeightFormats formats;
  formats.preset = "checkpoint";
  TensorUse scratch;  // opening to look, not to load
  for (TensorRole role : kAllTensorRoles) {
    if (!HasRole(config, role)) {
      formats[role] = TensorFormat::Of(FormatKind::kF32);  // never loaded
      continue;
    }
    if (IsVectorRole(role)) {  // the first layer that has one (GLM's first layers are dense)
      int64_t layer = 0;
      while (IsPerLayerRole(role) && RoleTensorsInLayer(config, role, layer) == 0) ++layer;
      const std::string name = TensorName(config, source.format(), role, layer);
      TP_ASSIGN_OR_RETURN(TensorView t, source.Find(name));
      formats[role] = FormatOfDType(t.dtype);
      continue;
    }
    if (IsMlaUpRole(role)) {
      // Held in float: the stored one, or f32 for a quantized kv_b_proj, widened exactly
      // (bf16 would round fp8 * scale: 2.6e-2 of max|logit| on deepseek2_fp8_hf).
      TP_ASSIGN_OR_RETURN(StoredMatrix m, StoredMatrix::OpenRole(source, scheme, config,
                                                                 TensorRole::kKB, 0, 0, &scratch));
      const FormatKind kind = m.format().kind;
      formats[role] = kind == FormatKind::kF32 || kind == FormatKind::kF16 ||
                              kind == FormatKind::kBF16
                          ? m.format()
                          : TensorFormat::Of(FormatKind::kF32);
      continue;
    }
    if (role == TensorRole::kLmHead) {
      const std::string head = ModuleName(config, source.format(), role, 0);
      if (!source.Find(head + ".weight").ok() && !source.Find(head + ".qweight").ok()) {
        formats[role] = formats[TensorRole::kEmbedding];  // tied
        continue;
      }
    }
    // The first layer's format is the role's; layers stored otherwise (Q4_K_M) become
    // overrides. Expert 0 speaks for its layer's experts (GGUF stacks them in one tensor).
    const int64_t layers = IsPerLayerRole(role) ? config.num_layers : 1;
    bool first = true;
    for (int64_t l = 0; l < layers; ++l) {
      if (RoleTensorsInLayer(config, role, l) == 0) continue;
      TP_ASSIGN_OR_RETURN(StoredMatrix m,
                          StoredMatrix::OpenRole(source, scheme, config, role, l, 0, &scratch));
      if (first) {
        formats[role] = m.format();
        first = false;
      } else if (!(m.format() == formats[role])) {
        formats.layer_overrides[{role, l}] = m.format();
      }
    }
  }
  return formats;
}

absl::StatusOr<WeightFormats> ResolveWeightFormats(const WeightFormats& stored,
                                                   std::string_view preset,
                                                   const ModelSpec& config, int tp) {
  if (preset.empty() || preset == "checkpoint") return stored;
  TP_ASSIGN_OR_RETURN(WeightFormats formats, WeightFormatsPreset(preset));
  FitInt4Groups(config, tp, &formats);
  return formats;
}

}  // namespace tpserve
