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
};

// Every family, by name.
const std::vector<const ModelFamily*>& ModelFamilies();
// nullptr when no family reads it.
const ModelFamily* FamilyForGgufArchitecture(std::string_view architecture);
const ModelFamily* FamilyForHfModelType(std::string_view model_type);

// Defined by the family files (model/families/*.cc).
extern const ModelFamily kLlamaFamily;
extern const ModelFamily kMistralFamily;
extern const ModelFamily kQwen2Family;
extern const ModelFamily kQwen3Family;
extern const ModelFamily kGemma2Family;
extern const ModelFamily kGemma3Family;

// Pieces several families share.
namespace family_internal {
// Every layer global with the model-wide RoPE, or every one windowed (Mistral).
void UniformLayers(int64_t sliding_window, ModelSpec& spec);
// Refuses the common config.json keys no family here implements (attention sinks, partial
// rotary embeddings, biases on the MLP).
absl::Status RefuseUnimplementedCommonKeys(const config_internal::Json& json);
}  // namespace family_internal

}  // namespace tpserve

#endif  // TPSERVE_MODEL_FAMILIES_FAMILY_H_
