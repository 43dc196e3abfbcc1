// Typed readers of config.json and GGUF metadata keys, shared by the common readers
// (config_hf.cc, config_gguf.cc) and the families (model/families/). Internal to //model:config.
// Every error names the key (and, for GGUF, the file) and what was wrong with its value.
#ifndef TPSERVE_MODEL_CONFIG_READERS_H_
#define TPSERVE_MODEL_CONFIG_READERS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/gguf.h"
#include "model/config.h"

namespace tpserve::config_internal {

using Json = nlohmann::json;

// ---- config.json: absent and null read as nullopt; a wrong type is INVALID_ARGUMENT ----
absl::Status BadKey(std::string_view key, std::string_view problem);
// UNIMPLEMENTED: the key's value would change the computation in a way tpserve lacks.
absl::Status UnimplementedKey(std::string_view key, const Json& value, std::string_view why);
absl::StatusOr<std::optional<int64_t>> JsonInt(const Json& j, std::string_view key);
absl::StatusOr<int64_t> JsonRequiredInt(const Json& j, std::string_view key);
absl::StatusOr<std::optional<double>> JsonNumber(const Json& j, std::string_view key);
absl::StatusOr<std::optional<bool>> JsonBool(const Json& j, std::string_view key);
absl::StatusOr<std::optional<std::string>> JsonString(const Json& j, std::string_view key);
// rope_scaling: null/absent/"default" none; "llama3", "linear", "yarn" read; others refused.
absl::StatusOr<RopeScaling> JsonRopeScaling(const Json& j);
// Refuses `key` when present and not null/false: a feature the family would compute and
// tpserve does not (attention_bias, mlp_bias, use_sliding_window, ...).
absl::Status RefuseIfSet(const Json& j, std::string_view key, std::string_view why);
// Refuses an activation key (hidden_act, hidden_activation) whose value is not `expected`.
absl::Status ExpectActivation(const Json& j, std::string_view key, std::string_view expected);

// ---- GGUF metadata: getters' NOT_FOUND for a required key becomes INVALID_ARGUMENT ----
absl::Status AsInvalid(const absl::Status& s);
absl::StatusOr<int64_t> GgufRequiredInt(const GgufFile& g, const std::string& key);
absl::StatusOr<std::optional<int64_t>> GgufInt(const GgufFile& g, const std::string& key);
absl::StatusOr<std::optional<double>> GgufFloat(const GgufFile& g, const std::string& key);
absl::StatusOr<std::optional<bool>> GgufBool(const GgufFile& g, const std::string& key);
absl::StatusOr<std::optional<std::string>> GgufString(const GgufFile& g, const std::string& key);

}  // namespace tpserve::config_internal

#endif  // TPSERVE_MODEL_CONFIG_READERS_H_
