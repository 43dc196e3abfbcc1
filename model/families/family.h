// The model families: for each, the GGUF architectures and Hugging Face model types it reads,
// and what it sets in the ModelSpec beyond the fields every family shares (shapes, RoPE base,
// norm epsilon, special tokens, which config_gguf.cc and config_hf.cc read first). The one place
// that knows a family by name, as llama.cpp's architecture table and vLLM's model registry are.
// Internal to //model:config.
#ifndef TPSERVE_MODEL_FAMILIES_FAMILY_H_
#define TPSERVE_MODEL_FAMILIES_FAMILY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/config_readers.h"

namespace tpserve {

struct ModelFamily {
  std::string_view name;
  std::vector<std::string_view> gguf_architectures;  // general.architecture values
  std::vector<std::string_view> hf_model_types;      // config.json model_type values
  // What the family sets from a GGUF file's "<arch>.*" keys, the common fields already read.
  absl::Status (*from_gguf)(const GgufFile& gguf, const std::string& arch, ModelSpec& spec);
  // The same from a config.json, which also refuses the keys the family would honour but
  // tpserve does not implement.
  absl::Status (*from_hf)(const config_internal::Json& json, ModelSpec& spec);
  // tie_word_embeddings when a config.json omits it: the default of the family's transformers
  // config class (true for Gemma's; Llama's, Mistral's, Mixtral's and Qwen's say false).
  bool hf_ties_embeddings_by_default = false;
  // config.json model_type values of the family's multimodal checkpoints
  // (Llama4ForConditionalGeneration: "llama4"), which keep the text model's keys under
  // text_config and its weights under hf_multimodal_text_prefix, beside other towers' weights
  // (hf_multimodal_unserved_prefixes) that tpserve does not serve: read as the text model.
  std::vector<std::string_view> hf_multimodal_model_types = {};
  std::string_view hf_multimodal_text_prefix = "";
  std::vector<std::string_view> hf_multimodal_unserved_prefixes = {};
};

// Every family, by name.
const std::vector<const ModelFamily*>& ModelFamilies();
// nullptr when no family reads it (FamilyForHfModelType: as a text model's or a multimodal
// checkpoint's model_type).
const ModelFamily* FamilyForGgufArchitecture(std::string_view architecture);
const ModelFamily* FamilyForHfModelType(std::string_view model_type);

// Defined by the family files (model/families/*.cc).
extern const ModelFamily kLlamaFamily;
extern const ModelFamily kLlama4Family;
extern const ModelFamily kMistralFamily;
extern const ModelFamily kQwen2Family;
extern const ModelFamily kQwen3Family;
extern const ModelFamily kGemma2Family;
extern const ModelFamily kGemma3Family;
extern const ModelFamily kMixtralFamily;
extern const ModelFamily kQwen3MoeFamily;
extern const ModelFamily kGlm4MoeFamily;
extern const ModelFamily kDeepseek2Family;

// Pieces several families share.
namespace family_internal {
// Every layer global with the model-wide RoPE, or every one windowed (Mistral).
void UniformLayers(int64_t sliding_window, ModelSpec& spec);
// ExpertRouting holds its counts as int32: a count that does not fit (or a negative one) is
// refused naming where it was read (`where`: "config.json key 'num_experts'", "<file>:
// qwen3moe.expert_count"), never wrapped into another number (2^32 + 8 experts read as 8).
absl::StatusOr<int32_t> RoutingCount(std::string_view where, int64_t value);
// Every layer's feed-forward the experts of `routing` (its score and weighting; the counts come
// from "<arch>.expert_count" and "<arch>.expert_used_count") when the file has experts; nothing
// when <arch>.expert_count is absent or 0. INVALID_ARGUMENT names the keys of a bad count.
absl::Status ReadGgufExperts(const GgufFile& g, const std::string& arch, ExpertRouting routing,
                             int64_t expert_intermediate_size, ModelSpec& spec);
// The grouped sigmoid routing of GLM-4.5 and DeepSeek-V3 from GGUF keys (llama.cpp's
// expert_gating_func, expert_weights_norm and _scale, expert_group_count and _used_count).
absl::StatusOr<ExpertRouting> ReadGgufGroupedRouting(const GgufFile& g, const std::string& arch);
// Their whole MoE from GGUF: that routing (`default_score` where the file has no
// expert_gating_func), the experts, leading_dense_block_count dense layers first, the shared
// experts and the correction bias where the file has them.
absl::Status ReadGgufGroupedMoe(const GgufFile& g, const std::string& arch,
                                RoutingScore default_score, ModelSpec& spec);
// The same from config.json (n_routed_experts, num_experts_per_tok, moe_intermediate_size,
// n_shared_experts, n_group, topk_group, norm_topk_prob, routed_scaling_factor,
// first_k_dense_replace), with the family's config class's defaults for the optional keys.
struct HfGroupedMoeDefaults {
  int64_t shared_experts = 1;
  int64_t groups = 1;
  int64_t top_groups = 1;
  double scaling = 1.0;
  int64_t dense_layers = 1;
};
absl::Status ReadHfGroupedMoe(const config_internal::Json& j,
                              const HfGroupedMoeDefaults& defaults, ModelSpec& spec);
// Refuses the common config.json keys no family here implements (attention sinks, partial
// rotary embeddings, biases on the MLP).
absl::Status RefuseUnimplementedCommonKeys(const config_internal::Json& json);
}  // namespace family_internal

}  // namespace tpserve

#endif  // TPSERVE_MODEL_FAMILIES_FAMILY_H_
