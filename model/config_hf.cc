// LlamaConfigFromHfJson: a Hugging Face config.json (LlamaConfig / LlamaForCausalLM).
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "formats/json_strict.h"
#include "base/str_cat.h"
#include "model/config.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

absl::Status BadKey(std::string_view key, std::string_view problem) {
  return absl::InvalidArgumentError(StrCat("config.json key '", key, "' ", problem));
}

// nullopt when absent or null; an error when present with the wrong type.
absl::StatusOr<std::optional<int64_t>> OptionalInt(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return BadKey(key, StrCat("must be an integer, got ", it->dump()));
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return BadKey(key, StrCat("value ", it->dump(), " does not fit int64"));
  }
  return it->get<int64_t>();
}

absl::StatusOr<int64_t> RequiredInt(const Json& j, std::string_view key) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> value, OptionalInt(j, key));
  if (!value) return BadKey(key, "is missing");
  return *value;
}

absl::StatusOr<std::optional<double>> OptionalNumber(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return BadKey(key, StrCat("must be a number, got ", it->dump()));
  return it->get<double>();
}

absl::StatusOr<RopeScaling> ParseRopeScaling(const Json& j) {
  RopeScaling s;
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return s;
  if (!it->is_object()) return BadKey("rope_scaling", "must be an object or null");
  // Newer configs say "rope_type", older ones "type".
  auto type = it->find("rope_type");
  if (type == it->end()) type = it->find("type");
  if (type == it->end() || !type->is_string()) {
    return BadKey("rope_scaling", "has no string 'rope_type' (or 'type')");
  }
  const std::string kind = type->get<std::string>();
  if (kind == "default") return s;
  if (kind != "llama3") {
    return absl::UnimplementedError(
        StrCat("config.json rope_scaling type '", kind, "' is not supported (only 'llama3')"));
  }
  s.enabled = true;
  TP_ASSIGN_OR_RETURN(std::optional<double> factor, OptionalNumber(*it, "factor"));
  if (!factor) return BadKey("rope_scaling.factor", "is missing");
  s.factor = *factor;
  TP_ASSIGN_OR_RETURN(std::optional<double> low, OptionalNumber(*it, "low_freq_factor"));
  TP_ASSIGN_OR_RETURN(std::optional<double> high, OptionalNumber(*it, "high_freq_factor"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> original,
                      OptionalInt(*it, "original_max_position_embeddings"));
  if (low) s.low_freq_factor = *low;
  if (high) s.high_freq_factor = *high;
  if (original) s.original_max_position_embeddings = *original;
  return s;
}

// eos_token_id is an int or a list of ints; the first is primary.
absl::Status ParseEos(const Json& j, LlamaConfig& c) {
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

absl::Status ParseShapes(const Json& j, LlamaConfig& c) {
  TP_ASSIGN_OR_RETURN(c.hidden_size, RequiredInt(j, "hidden_size"));
  TP_ASSIGN_OR_RETURN(c.intermediate_size, RequiredInt(j, "intermediate_size"));
  TP_ASSIGN_OR_RETURN(c.num_layers, RequiredInt(j, "num_hidden_layers"));
  TP_ASSIGN_OR_RETURN(c.num_heads, RequiredInt(j, "num_attention_heads"));
  TP_ASSIGN_OR_RETURN(c.vocab_size, RequiredInt(j, "vocab_size"));
  TP_ASSIGN_OR_RETURN(c.max_context_tokens, RequiredInt(j, "max_position_embeddings"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads, OptionalInt(j, "num_key_value_heads"));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, OptionalInt(j, "head_dim"));
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

// Only the Llama architecture is implemented. Look-alikes (mistral's sliding window, qwen2's
// QKV biases, gemma's norms) would load but compute something else. An absent model_type is
// accepted: hand-written configs, as in tests, often leave it out.
absl::Status CheckModelType(const Json& j) {
  auto it = j.find("model_type");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return BadKey("model_type", StrCat("must be a string, got ", it->dump()));
  if (it->get<std::string>() != "llama") {
    return absl::UnimplementedError(StrCat("config.json model_type = ", it->dump(),
                                           " is not implemented (supported: \"llama\")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfigFromHfJson(std::string_view json_text) {
  TP_ASSIGN_OR_RETURN(Json j, ParseJsonStrict(json_text, "config.json"));
  if (!j.is_object()) return absl::InvalidArgumentError("config.json is not a JSON object");
  TP_RETURN_IF_ERROR(CheckModelType(j));
  LlamaConfig c;
  auto name = j.find("_name_or_path");
  c.name = (name != j.end() && name->is_string()) ? name->get<std::string>() : "hf-config";
  TP_RETURN_IF_ERROR(ParseShapes(j, c));
  TP_ASSIGN_OR_RETURN(std::optional<double> theta, OptionalNumber(j, "rope_theta"));
  c.rope_theta = theta.value_or(10000.0);  // the transformers default
  TP_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(j));
  TP_ASSIGN_OR_RETURN(std::optional<double> eps, OptionalNumber(j, "rms_norm_eps"));
  c.rms_norm_eps = eps.value_or(1e-6);  // the transformers default
  auto tied = j.find("tie_word_embeddings");
  if (tied != j.end() && !tied->is_null()) {
    if (!tied->is_boolean()) return BadKey("tie_word_embeddings", "must be a boolean");
    c.tie_word_embeddings = tied->get<bool>();
  }
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bos, OptionalInt(j, "bos_token_id"));
  c.bos_token_id = bos.value_or(-1);
  TP_RETURN_IF_ERROR(ParseEos(j, c));
  TP_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tpserve
