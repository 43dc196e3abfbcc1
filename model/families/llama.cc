// Llama (Llama 2/3/3.1, SmolLM2 and the many models that share its graph) and Mistral, which is
// Llama with an optional sliding window over every layer (Mistral 7B v0.1: 4096 tokens).
// llama.cpp converts Mistral to the `llama` architecture and runs it without a window, so a
// Mistral GGUF is a Llama here too; the window comes only from a config.json.
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "model/families/family.h"

namespace tpserve {
namespace {

using config_internal::Json;

// A `llama` file with llama.expert_count set is a Mixtral: every layer's MLP is that many
// experts of feed_forward_length, softmax top-k renormalized (llama.cpp's graph for it).
absl::Status LlamaFromGguf(const GgufFile& g, const std::string& arch, ModelSpec& spec) {
  family_internal::UniformLayers(0, spec);
  TP_RETURN_IF_ERROR(family_internal::ReadGgufExperts(
      g, arch, {.score = RoutingScore::kSoftmax, .renormalize = true}, spec.intermediate_size,
      spec));
  if (spec.moe.enabled()) spec.family = "mixtral";
  return absl::OkStatus();
}

// What Llama's and Mistral's config.json may say that would change the graph.
absl::Status RefuseLlamaKeys(const Json& j) {
  TP_RETURN_IF_ERROR(family_internal::RefuseUnimplementedCommonKeys(j));
  TP_RETURN_IF_ERROR(config_internal::RefuseIfSet(
      j, "attention_bias", "Llama's attention projections carry no bias here"));
  return config_internal::ExpectActivation(j, "hidden_act", "silu");
}

absl::Status LlamaFromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(RefuseLlamaKeys(j));
  family_internal::UniformLayers(0, spec);
  return absl::OkStatus();
}

absl::Status MistralFromHf(const Json& j, ModelSpec& spec) {
  TP_RETURN_IF_ERROR(RefuseLlamaKeys(j));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> window, config_internal::JsonInt(j, "sliding_window"));
  if (window && *window <= 0) {
    return config_internal::BadKey("sliding_window", StrCat("is ", *window, "; it must be "
                                                            "positive or null"));
  }
  family_internal::UniformLayers(window.value_or(0), spec);
  return absl::OkStatus();
}

}  // namespace

const ModelFamily kLlamaFamily = {"llama", {"llama"}, {"llama"}, LlamaFromGguf, LlamaFromHf};
const ModelFamily kMistralFamily = {"mistral", {}, {"mistral"}, LlamaFromGguf, MistralFromHf};

}  // namespace tpserve
