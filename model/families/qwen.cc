// Qwen2 / Qwen2.5 (biases on q, k and v; YaRN when configured) and Qwen3 dense (RMSNorm over
// each head of q and k before RoPE, no biases). llama.cpp runs both with NEOX RoPE (halves of
// each head rotate together), which its converter keeps from the Hugging Face layout.
#include "base/status_macros.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

absl::Status QwenGguf(ModelSpec& spec) {
  spec.gguf_rope_rotate_half = true;
  family_internal::UniformLayers(0, spec);
  return absl::OkStatus();
}

absl::Status Qwen2FromGguf(const GgufFile&, const std::string&, ModelSpec& spec) {
  spec.qkv_bias = true;
  return QwenGguf(spec);
}

absl::Status Qwen3FromGguf(const GgufFile&, const std::string&, ModelSpec& spec) {
  spec.qk_norm = true;
  return QwenGguf(spec);
}

// Qwen configs carry a sliding_window that applies only with use_sliding_window (off in every
// published Qwen2.5 / Qwen3 dense model), so the window is read only when it is on: refused.
absl::Status QwenHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "use_sliding_window", "Qwen's sliding window on the layers past max_window_layers"));
  TP_RETURN_IF_ERROR(config_internal::ExpectActivation(j, "hidden_act", "silu"));
  spec.gguf_rope_rotate_half = true;
  family_internal::UniformLayers(0, spec);
  return absl::OkStatus();
}

absl::Status Qwen2FromHf(const Json& j, ModelSpec& spec) {
  spec.qkv_bias = true;  // Qwen2's attention always has them (no attention_bias key)
  return QwenHf(j, spec);
}

absl::Status Qwen3FromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Qwen3's attention projections carry no bias here"));
  spec.qk_norm = true;
  return QwenHf(j, spec);
}

}  // namespace

const ModelFamily kQwen2Family = {"qwen2", {"qwen2"}, {"qwen2"}, Qwen2FromGguf, Qwen2FromHf};
const ModelFamily kQwen3Family = {"qwen3", {"qwen3"}, {"qwen3"}, Qwen3FromGguf, Qwen3FromHf};

}  // namespace tpserve
