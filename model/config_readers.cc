#include "model/config_readers.h"

#include <cmath>
#include <limits>

#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve::config_internal {

absl::Status BadKey(std::string_view key, std::string_view problem) {
  return absl::InvalidArgumentError(StrCat("config.json key '", key, "' ", problem));
}

absl::Status UnimplementedKey(std::string_view key, const Json& value, std::string_view why) {
  return absl::UnimplementedError(
      StrCat("config.json key '", key, "' = ", value.dump(), " is not implemented: ", why));
}

absl::StatusOr<std::optional<int64_t>> JsonInt(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) return BadKey(key, StrCat("must be an integer, got ", it->dump()));
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return BadKey(key, StrCat("value ", it->dump(), " does not fit int64"));
  }
  return it->get<int64_t>();
}

absl::StatusOr<int64_t> JsonRequiredInt(const Json& j, std::string_view key) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> value, JsonInt(j, key));
  if (!value) return BadKey(key, "is missing");
  return *value;
}

absl::StatusOr<std::optional<double>> JsonNumber(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return BadKey(key, StrCat("must be a number, got ", it->dump()));
  return it->get<double>();
}

absl::StatusOr<std::optional<bool>> JsonBool(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return BadKey(key, StrCat("must be a boolean, got ", it->dump()));
  return it->get<bool>();
}

absl::StatusOr<std::optional<std::string>> JsonString(const Json& j, std::string_view key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return BadKey(key, StrCat("must be a string, got ", it->dump()));
  return it->get<std::string>();
}

absl::StatusOr<RopeScaling> JsonRopeScaling(const Json& j) {
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
  if (kind == "llama3") {
    s.type = RopeScalingType::kLlama3;
  } else if (kind == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (kind == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else {
    return absl::UnimplementedError(
        StrCat("config.json rope_scaling type '", kind,
               "' is not implemented (supported: 'default', 'llama3', 'linear', 'yarn')"));
  }
  TP_ASSIGN_OR_RETURN(std::optional<double> factor, JsonNumber(*it, "factor"));
  if (!factor) return BadKey("rope_scaling.factor", "is missing");
  s.factor = *factor;
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> original,
                      JsonInt(*it, "original_max_position_embeddings"));
  if (original) s.original_max_position_embeddings = *original;
  if (s.type == RopeScalingType::kLlama3) {
    TP_ASSIGN_OR_RETURN(std::optional<double> low, JsonNumber(*it, "low_freq_factor"));
    TP_ASSIGN_OR_RETURN(std::optional<double> high, JsonNumber(*it, "high_freq_factor"));
    if (low) s.low_freq_factor = *low;
    if (high) s.high_freq_factor = *high;
  }
  if (s.type == RopeScalingType::kYarn) {
    if (!original) {
      // transformers falls back to max_position_embeddings / factor's source; be explicit.
      return BadKey("rope_scaling.original_max_position_embeddings", "is missing (yarn)");
    }
    TP_ASSIGN_OR_RETURN(std::optional<double> fast, JsonNumber(*it, "beta_fast"));
    TP_ASSIGN_OR_RETURN(std::optional<double> slow, JsonNumber(*it, "beta_slow"));
    if (fast) s.beta_fast = *fast;
    if (slow) s.beta_slow = *slow;
    TP_ASSIGN_OR_RETURN(std::optional<double> mscale, JsonNumber(*it, "mscale"));
    TP_ASSIGN_OR_RETURN(std::optional<double> mscale_all, JsonNumber(*it, "mscale_all_dim"));
    if (mscale) s.mscale = *mscale;
    if (mscale_all) s.mscale_all_dim = *mscale_all;
    if (!(s.mscale >= 0) || !(s.mscale_all_dim >= 0) || std::isinf(s.mscale) ||
        std::isinf(s.mscale_all_dim)) {
      return BadKey("rope_scaling.mscale", StrCat("is ", s.mscale, " and mscale_all_dim ",
                                                  s.mscale_all_dim,
                                                  "; both must be finite and >= 0"));
    }
    auto extra = it->find("attention_factor");
    if (extra != it->end() && !extra->is_null()) {
      return UnimplementedKey("rope_scaling.attention_factor", *extra,
                              "only YaRN's factors from mscale and mscale_all_dim are");
    }
  }
  return s;
}

absl::Status RefuseIfSet(const Json& j, std::string_view key, std::string_view why) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) {
    return absl::OkStatus();
  }
  return UnimplementedKey(key, *it, why);
}

absl::Status ExpectActivation(const Json& j, std::string_view key, std::string_view expected) {
  TP_ASSIGN_OR_RETURN(std::optional<std::string> act, JsonString(j, key));
  if (!act || *act == expected) return absl::OkStatus();
  return UnimplementedKey(key, j.at(std::string(key)),
                          StrCat("this family's MLP computes '", expected, "'"));
}

absl::Status AsInvalid(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kNotFound) return s;
  return absl::InvalidArgumentError(s.message());
}

absl::StatusOr<int64_t> GgufRequiredInt(const GgufFile& g, const std::string& key) {
  absl::StatusOr<int64_t> v = g.GetI64(key);
  if (!v.ok()) return AsInvalid(v.status());
  return *v;
}

absl::StatusOr<std::optional<int64_t>> GgufInt(const GgufFile& g, const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(int64_t v, g.GetI64(key));
  return v;
}

absl::StatusOr<std::optional<bool>> GgufBool(const GgufFile& g, const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(bool v, g.GetBool(key));
  return v;
}

absl::StatusOr<std::optional<double>> GgufFloat(const GgufFile& g, const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(float v, g.GetF32(key));
  return static_cast<double>(v);
}

absl::StatusOr<std::optional<std::string>> GgufString(const GgufFile& g,
                                                      const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(std::string v, g.GetString(key));
  return v;
}

}  // namespace tpserve::config_internal
