#include "checkpoint/quant_scheme.h"

#include "formats/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpserve {

std::string_view QuantMethodName(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kFbgemmFp8:
      return "fbgemm_fp8";
    case QuantMethod::kCompressedFp8:
      return "compressed-tensors";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kGptq:
      return "gptq";
  }
  return "?";
}

bool QuantScheme::Quantizes(std::string_view module) const {
  if (method == QuantMethod::kNone) return false;
  for (const std::string& prefix : unquantized_modules) {
    if (module == prefix || module.ends_with("." + prefix) ||
        (module.starts_with(prefix) && module.size() > prefix.size() &&
         module[prefix.size()] == '.')) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<QuantScheme> ParseQuantizationConfig(std::string_view config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError("config.json is not a JSON object");
  }
  QuantScheme scheme;
  if (!config.contains("quantization_config")) return scheme;
  const nlohmann::json& q = config["quantization_config"];
  const std::string method = q.is_object() && q.contains("quant_method") &&
                                     q["quant_method"].is_string()
                                 ? q["quant_method"].get<std::string>()
                                 : "";
  return absl::UnimplementedError(StrCat("quantization_config.quant_method = \"", method,
                                         "\" is not implemented"));
}

}  // namespace tpserve
