// ModelSpecFromHfJson: a Hugging Face config.json. The keys every family shares are read here;
// model/families/ reads the rest and refuses what it would compute and tpserve does not.
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "formats/json_strict.h"
#include "base/str_cat.h"
#include "model/config.h"
#include "model/config_readers.h"
#include "model/families/family.h"
#include "absl/strings/str_join.h"

namespace tpserve {
namespace {

using config_internal::BadKey;
using config_internal::Json;
using config_internal::JsonInt;
using config_internal::JsonNumber;
using config_internal::JsonRequiredInt;

// eos_token_id is an int or a list of ints; the first is primary.
absl::Status ParseEos(const Json& j, ModelSpec& c) {
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (it->is_number_integer()) {
    c.eos_token_id = it->get<int64_t>();
    return absl::OkStatus();
  }
  if (!it->is_array() || it->empty()) {
    return BadKey("eos_token_id",
                  StrCat("must be an integer or a non-empty list, got ", it->dump()));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_number_integer()) {
      return BadKey("eos_token_id", StrCat("element ", i, " is not an integer"));
    }
    const int64_t id = (*it)[i].get<int64_t>();
    if (i == 0) {
      c.eos_token_id = id;
    } else {
      c.extra_eos_token_ids.push_back(id);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseShapes(const Json& j, ModelSpec& c) {
  TP_ASSIGN_OR_RETURN(c.hidden_size, JsonRequiredInt(j, "hidden_size"));
  TP_ASSIGN_OR_RETURN(c.intermediate_size, JsonRequiredInt(j, "intermediate_size"));
  TP_ASSIGN_OR_RETURN(c.num_layers, JsonRequiredInt(j, "num_hidden_layers"));
  TP_ASSIGN_OR_RETURN(c.num_heads, JsonRequiredInt(j, "num_attention_heads"));
  TP_ASSIGN_OR_RETURN(c.vocab_size, JsonRequiredInt(j, "vocab_size"));
  TP_ASSIGN_OR_RETURN(c.max_context_tokens, JsonRequiredInt(j, "max_position_embeddings"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads, JsonInt(j, "num_key_value_heads"));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, JsonInt(j, "head_dim"));
  if (head_dim) {
    c.head_dim = *head_dim;
  } else {
    if (c.num_heads <= 0 || c.hidden_size % c.num_heads != 0) {
      return BadKey("num_attention_heads", StrCat(c.num_heads, " must divide hidden_size ",
                                                  c.hidden_size, " when head_dim is absent"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  return absl::OkStatus();
}

std::string SupportedModelTypes() {
  std::vector<std::string> types;
  for (const ModelFamily* f : ModelFamilies()) {
    for (std::string_view t : f->hf_model_types) types.push_back(StrCat("\"", t, "\""));
    for (std::string_view t : f->hf_multimodal_model_types) {
      types.push_back(StrCat("\"", t, "\""));
    }
  }
  return absl::StrJoin(types, ", ");
}

// The family that reads this config. An absent model_type is read as Llama: hand-written
// configs, as in tests, often leave it out.
absl::StatusOr<const ModelFamily*> FamilyOf(const Json& j) {
  auto it = j.find("model_type");
  if (it == j.end() || it->is_null()) return &kLlamaFamily;
  if (!it->is_string()) return BadKey("model_type", StrCat("must be a string, got ", it->dump()));
  const ModelFamily* family = FamilyForHfModelType(it->get<std::string>());
  if (family == nullptr) {
    return absl::UnimplementedError(StrCat("config.json model_type = ", it->dump(),
                                           " is not implemented (supported: ",
                                           SupportedModelTypes(), ")"));
  }
  return family;
}

// The text model's keys: `j` itself, or the text_config of a family's multimodal checkpoint,
// whose weight prefixes `c` then records.
absl::StatusOr<const Json*> TextConfigOf(const Json& j, const ModelFamily& family, ModelSpec& c) {
  auto type = j.find("model_type");
  if (type == j.end() || !type->is_string()) return &j;
  const std::string model_type = type->get<std::string>();
  bool multimodal = false;
  for (std::string_view t : family.hf_multimodal_model_types) multimodal |= t == model_type;
  if (!multimodal) return &j;
  auto text = j.find("text_config");
  if (text == j.end() || !text->is_object()) {
    return BadKey("text_config", StrCat("is missing or not an object: model_type \"", model_type,
                                        "\" keeps its text model's keys there"));
  }
  c.hf_weight_prefix = std::string(family.hf_multimodal_text_prefix);
  for (std::string_view p : family.hf_multimodal_unserved_prefixes) {
    c.hf_unserved_weight_prefixes.emplace_back(p);
  }
  return &*text;
}

}  // namespace

absl::StatusOr<ModelSpec> ModelSpecFromHfJson(std::string_view json_text) {
  TP_ASSIGN_OR_RETURN(Json top, ParseJsonStrict(json_text, "config.json"));
  if (!top.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  TP_ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(top));
  ModelSpec c;
  c.family = std::string(family->name);
  auto name = top.find("_name_or_path");
  c.name = (name != top.end() && name->is_string()) ? name->get<std::string>() : "hf-config";
  TP_ASSIGN_OR_RETURN(const Json* text, TextConfigOf(top, *family, c));
  const Json& j = *text;
  TP_RETURN_IF_ERROR(ParseShapes(j, c));
  TP_ASSIGN_OR_RETURN(std::optional<double> theta, JsonNumber(j, "rope_theta"));
  c.rope_theta = theta.value_or(10000.0);  // the transformers default
  TP_ASSIGN_OR_RETURN(c.rope_scaling, config_internal::JsonRopeScaling(j));
  TP_ASSIGN_OR_RETURN(std::optional<double> eps, JsonNumber(j, "rms_norm_eps"));
  c.rms_norm_eps = eps.value_or(1e-6);  // the transformers default
  TP_ASSIGN_OR_RETURN(std::optional<bool> tied, config_internal::JsonBool(j, "tie_word_embeddings"));
  c.tie_word_embeddings = tied.value_or(family->hf_ties_embeddings_by_default);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bos, JsonInt(j, "bos_token_id"));
  c.bos_token_id = bos.value_or(-1);
  TP_RETURN_IF_ERROR(ParseEos(j, c));
  TP_RETURN_IF_ERROR(family->from_hf(j, c));
  TP_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tpserve
