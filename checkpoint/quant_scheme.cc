#include "checkpoint/quant_scheme.h"

#include <cmath>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

using Json = nlohmann::json;

// The engine's int4 groups are whole 32-column chunks (kernels/weight_matrix.h).
constexpr int64_t kInt4GroupQuantum = 32;

// A field of a JSON object, or nullptr when absent or null.
const Json* Get(const Json& object, std::string_view key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string Path(std::string_view prefix, std::string_view key) { return StrCat(prefix, ".", key); }

absl::Status NotImplemented(const std::string& path, const Json& value,
                            std::string_view supported) {
  return absl::UnimplementedError(
      StrCat(path, " = ", value.dump(), " is not implemented (supported: ", supported, ")"));
}

absl::Status Malformed(const std::string& path, const Json& value, std::string_view expected) {
  return absl::InvalidArgumentError(StrCat(path, " = ", value.dump(), ": expected ", expected));
}

// An optional value as JSON for messages (null when absent).
template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v.has_value() ? Json(*v) : Json();
}

absl::StatusOr<std::optional<int64_t>> GetInt(const Json& object, std::string_view prefix,
                                              std::string_view key) {
  const Json* v = Get(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return Malformed(Path(prefix, key), *v, "an integer");
  return v->get<int64_t>();
}

absl::StatusOr<std::optional<bool>> GetBool(const Json& object, std::string_view prefix,
                                            std::string_view key) {
  const Json* v = Get(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return Malformed(Path(prefix, key), *v, "true or false");
  return v->get<bool>();
}

absl::StatusOr<std::optional<std::string>> GetString(const Json& object, std::string_view prefix,
                                                     std::string_view key) {
  const Json* v = Get(object, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return Malformed(Path(prefix, key), *v, "a string");
  return v->get<std::string>();
}

// Appends a list of module names (modules_to_not_convert, ignore) to `out`. Regular
// expressions ("re:...") are refused rather than matched approximately.
absl::Status AppendModuleNames(const Json& object, std::string_view prefix, std::string_view key,
                               std::vector<std::string>* out) {
  const Json* v = Get(object, key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array()) return Malformed(Path(prefix, key), *v, "a list of module names");
  for (const Json& name : *v) {
    if (!name.is_string()) return Malformed(Path(prefix, key), *v, "a list of module names");
    const std::string s = name.get<std::string>();
    if (s.starts_with("re:")) {
      return NotImplemented(Path(prefix, key), name, "plain module names, not \"re:\" patterns");
    }
    out->push_back(s);
  }
  return absl::OkStatus();
}

// bits 4 and a group size that is a whole number of the engine's 32-column chunks.
absl::Status ParseInt4Shape(const Json& q, QuantScheme* scheme) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bits, GetInt(q, "quantization_config", "bits"));
  if (!bits.has_value()) return absl::InvalidArgumentError("quantization_config.bits is missing");
  if (*bits != 4) return NotImplemented("quantization_config.bits", *bits, "4");
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> group, GetInt(q, "quantization_config", "group_size"));
  if (!group.has_value()) {
    return absl::InvalidArgumentError("quantization_config.group_size is missing");
  }
  if (*group == -1 || (*group > 0 && *group % kInt4GroupQuantum != 0)) {
    return NotImplemented("quantization_config.group_size", *group,
                          "positive multiples of 32; -1, one group per row, is not");
  }
  if (*group <= 0) {
    return Malformed("quantization_config.group_size", *group, "a positive integer or -1");
  }
  scheme->bits = 4;
  scheme->group_size = *group;
  return absl::OkStatus();
}

// AutoAWQ GEMM: qweight I32 [in, out/8] (interleaved), qzeros I32 [in/g, out/8], scales F16.
absl::Status ParseAwq(const Json& q, QuantScheme* scheme) {
  TP_RETURN_IF_ERROR(ParseInt4Shape(q, scheme));
  TP_ASSIGN_OR_RETURN(std::optional<bool> zero_point,
                      GetBool(q, "quantization_config", "zero_point"));
  // AutoAWQ's GEMM packer requires zero points; without them there is no layout to read.
  if (!zero_point.value_or(true)) {
    return NotImplemented("quantization_config.zero_point", false, "true");
  }
  TP_ASSIGN_OR_RETURN(std::optional<std::string> version,
                      GetString(q, "quantization_config", "version"));
  if (absl::AsciiStrToLower(version.value_or("gemm")) != "gemm") {
    return NotImplemented("quantization_config.version", *version, "\"gemm\"");
  }
  // llm-awq packs differently from AutoAWQ.
  TP_ASSIGN_OR_RETURN(std::optional<std::string> backend,
                      GetString(q, "quantization_config", "backend"));
  if (backend.has_value() && *backend != "autoawq") {
    return NotImplemented("quantization_config.backend", *backend, "\"autoawq\"");
  }
  scheme->symmetric = false;
  return AppendModuleNames(q, "quantization_config", "modules_to_not_convert",
                           &scheme->unquantized_modules);
}

// GPTQ v1 (AutoGPTQ / optimum): qweight I32 [in/8, out], qzeros (z - 1), scales F16, g_idx.
absl::Status ParseGptq(const Json& q, QuantScheme* scheme) {
  TP_RETURN_IF_ERROR(ParseInt4Shape(q, scheme));
  TP_ASSIGN_OR_RETURN(std::optional<bool> desc_act, GetBool(q, "quantization_config", "desc_act"));
  TP_ASSIGN_OR_RETURN(std::optional<bool> sym, GetBool(q, "quantization_config", "sym"));
  scheme->desc_act = desc_act.value_or(false);
  scheme->symmetric = sym.value_or(true);
  // v2 stores zero points without the "- 1"; marlin, bitblas and others repack the codes.
  for (std::string_view key : {"checkpoint_format", "format"}) {
    TP_ASSIGN_OR_RETURN(std::optional<std::string> format,
                        GetString(q, "quantization_config", key));
    if (format.has_value() && *format != "gptq") {
      return NotImplemented(Path("quantization_config", key), *format, "\"gptq\" (v1)");
    }
  }
  TP_ASSIGN_OR_RETURN(std::optional<std::string> pack,
                      GetString(q, "quantization_config", "pack_dtype"));
  if (pack.has_value() && *pack != "int32") {
    return NotImplemented("quantization_config.pack_dtype", *pack, "\"int32\"");
  }
  TP_ASSIGN_OR_RETURN(std::optional<bool> lm_head, GetBool(q, "quantization_config", "lm_head"));
  if (lm_head.value_or(false)) {
    return NotImplemented("quantization_config.lm_head", true, "false: a float LM head");
  }
  // Options that quantize only some linears, or some with other bits or groups.
  for (std::string_view key : {"modules_in_block_to_quantize", "dynamic"}) {
    const Json* v = Get(q, key);
    if (v != nullptr && !v->empty()) {
      return NotImplemented(Path("quantization_config", key), *v,
                            "null: every decoder linear quantized alike");
    }
  }
  return absl::OkStatus();
}

// Meta's Llama 3.1 FP8: weight F8_E4M3 [out, in] + weight_scale [out, 1]; FFN only, usually.
absl::Status ParseFbgemm(const Json& q, QuantScheme* scheme) {
  scheme->bits = 8;
  scheme->activation_scale_ub = 1200.0f;  // transformers' FbgemmFp8Config default
  if (const Json* ub = Get(q, "activation_scale_ub"); ub != nullptr) {
    if (!ub->is_number() || !std::isfinite(ub->get<double>()) || ub->get<double>() <= 0) {
      return Malformed("quantization_config.activation_scale_ub", *ub, "a positive number");
    }
    scheme->activation_scale_ub = ub->get<float>();
  }
  return AppendModuleNames(q, "quantization_config", "modules_to_not_convert",
                           &scheme->unquantized_modules);
}

// transformers' FineGrainedFP8Config as DeepSeek-V3 writes it: e4m3 weights in 128x128 tiles
// with weight_scale_inv, activations quantized on the fly.
absl::Status ParseFineGrainedFp8(const Json& q, QuantScheme* scheme) {
  scheme->bits = 8;
  scheme->fp8_block = true;
  TP_ASSIGN_OR_RETURN(std::optional<std::string> fmt, GetString(q, "quantization_config", "fmt"));
  if (fmt.has_value() && *fmt != "e4m3") {
    return NotImplemented("quantization_config.fmt", *fmt, "\"e4m3\"");
  }
  TP_ASSIGN_OR_RETURN(std::optional<std::string> act,
                      GetString(q, "quantization_config", "activation_scheme"));
  if (act.has_value() && *act != "dynamic") {
    return NotImplemented("quantization_config.activation_scheme", *act,
                          "\"dynamic\" (no stored input scales)");
  }
  const Json* block = Get(q, "weight_block_size");
  if (block == nullptr || *block != Json::array({128, 128})) {
    return NotImplemented("quantization_config.weight_block_size", block ? *block : Json(),
                          "[128, 128]");
  }
  return AppendModuleNames(q, "quantization_config", "modules_to_not_convert",
                           &scheme->unquantized_modules);
}

// The weights of one compressed-tensors config group: 8-bit float, symmetric, static scales
// per output channel or per 128x128 block.
absl::Status ParseCtWeights(const Json& w, const std::string& prefix, QuantScheme* scheme) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bits, GetInt(w, prefix, "num_bits"));
  if (bits != 8) return NotImplemented(Path(prefix, "num_bits"), OrNull(bits), "8");
  TP_ASSIGN_OR_RETURN(std::optional<std::string> type, GetString(w, prefix, "type"));
  if (type != "float") return NotImplemented(Path(prefix, "type"), OrNull(type), "\"float\"");
  TP_ASSIGN_OR_RETURN(std::optional<bool> symmetric, GetBool(w, prefix, "symmetric"));
  if (!symmetric.value_or(true)) return NotImplemented(Path(prefix, "symmetric"), false, "true");
  TP_ASSIGN_OR_RETURN(std::optional<bool> dynamic, GetBool(w, prefix, "dynamic"));
  if (dynamic.value_or(false)) return NotImplemented(Path(prefix, "dynamic"), true, "false");
  for (std::string_view key : {"actorder", "group_size"}) {
    const Json* v = Get(w, key);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>())) {
      return NotImplemented(Path(prefix, key), *v, "null");
    }
  }
  TP_ASSIGN_OR_RETURN(std::optional<std::string> strategy, GetString(w, prefix, "strategy"));
  const Json* block = Get(w, "block_structure");
  if (strategy == "channel" && block == nullptr) {
    scheme->fp8_block = false;
  } else if (strategy == "block") {
    if (block == nullptr || *block != Json::array({128, 128})) {
      return NotImplemented(Path(prefix, "block_structure"), block ? *block : Json(), "[128, 128]");
    }
    scheme->fp8_block = true;
  } else {
    return NotImplemented(Path(prefix, "strategy"), OrNull(strategy),
                          "\"channel\", or \"block\" with block_structure [128, 128]");
  }
  scheme->bits = 8;
  return absl::OkStatus();
}

// One config group: targets every Linear; weights as above; activations quantized on the fly
// (dynamic) or not at all, since static activation scales would be tensors nobody applies.
absl::Status ParseCtGroup(const Json& group, const std::string& prefix, QuantScheme* scheme) {
  if (!group.is_object()) return Malformed(prefix, group, "an object");
  const Json* targets = Get(group, "targets");
  if (targets == nullptr || *targets != Json::array({"Linear"})) {
    return NotImplemented(Path(prefix, "targets"), targets ? *targets : Json(), "[\"Linear\"]");
  }
  TP_ASSIGN_OR_RETURN(std::optional<std::string> format, GetString(group, prefix, "format"));
  if (format.has_value() && *format != "float-quantized") {
    return NotImplemented(Path(prefix, "format"), *format, "\"float-quantized\"");
  }
  const Json* weights = Get(group, "weights");
  if (weights == nullptr || !weights->is_object()) {
    return absl::InvalidArgumentError(StrCat(prefix, ".weights is missing"));
  }
  TP_RETURN_IF_ERROR(ParseCtWeights(*weights, Path(prefix, "weights"), scheme));
  if (const Json* in = Get(group, "input_activations"); in != nullptr) {
    const std::string in_prefix = Path(prefix, "input_activations");
    TP_ASSIGN_OR_RETURN(std::optional<bool> dynamic, GetBool(*in, in_prefix, "dynamic"));
    if (!dynamic.value_or(false)) {
      return NotImplemented(Path(in_prefix, "dynamic"), false, "true (no stored input scales)");
    }
  }
  if (const Json* out = Get(group, "output_activations"); out != nullptr) {
    return NotImplemented(Path(prefix, "output_activations"), *out, "null");
  }
  return absl::OkStatus();
}

// compressed-tensors "float-quantized" FP8 (llm-compressor's FP8_DYNAMIC and FP8_BLOCK).
absl::Status ParseCompressedTensors(const Json& q, QuantScheme* scheme) {
  TP_ASSIGN_OR_RETURN(std::optional<std::string> format,
                      GetString(q, "quantization_config", "format"));
  if (format.has_value() && *format != "float-quantized") {
    return NotImplemented("quantization_config.format", *format, "\"float-quantized\"");
  }
  const Json* groups = Get(q, "config_groups");
  if (groups == nullptr || !groups->is_object() || groups->size() != 1) {
    return NotImplemented("quantization_config.config_groups", groups ? *groups : Json(),
                          "exactly one group");
  }
  TP_RETURN_IF_ERROR(
      ParseCtGroup(groups->begin().value(),
                   StrCat("quantization_config.config_groups.", groups->begin().key()), scheme));
  // KV-cache scales, sparsity masks and rotations would all change the math.
  for (std::string_view key : {"kv_cache_scheme", "sparsity_config", "transform_config"}) {
    const Json* v = Get(q, key);
    if (v != nullptr && !v->empty()) {
      return NotImplemented(Path("quantization_config", key), *v, "null or {}");
    }
  }
  return AppendModuleNames(q, "quantization_config", "ignore", &scheme->unquantized_modules);
}

}  // namespace

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
    case QuantMethod::kFp8Block:
      return "fp8";
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
  const Json config = Json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError("config.json is not a JSON object");
  }
  QuantScheme scheme;
  const Json* q = Get(config, "quantization_config");
  if (q == nullptr) return scheme;
  if (!q->is_object()) return Malformed("quantization_config", *q, "an object");
  TP_ASSIGN_OR_RETURN(std::optional<std::string> method,
                      GetString(*q, "quantization_config", "quant_method"));
  if (!method.has_value()) {
    return absl::InvalidArgumentError("quantization_config.quant_method is missing");
  }
  // The embedding is no Linear, so no method here quantizes it.
  scheme.unquantized_modules.push_back("model.embed_tokens");
  if (*method == "awq" || *method == "gptq" || *method == "fbgemm_fp8" || *method == "fp8") {
    // transformers keeps the output head of these in full precision whatever the list says
    // (get_keys_to_not_convert); GPTQ quantizes only the decoder blocks.
    scheme.unquantized_modules.push_back("lm_head");
  }
  if (*method == "awq") {
    scheme.method = QuantMethod::kAwq;
    TP_RETURN_IF_ERROR(ParseAwq(*q, &scheme));
  } else if (*method == "gptq") {
    scheme.method = QuantMethod::kGptq;
    TP_RETURN_IF_ERROR(ParseGptq(*q, &scheme));
  } else if (*method == "fbgemm_fp8") {
    scheme.method = QuantMethod::kFbgemmFp8;
    TP_RETURN_IF_ERROR(ParseFbgemm(*q, &scheme));
  } else if (*method == "compressed-tensors") {
    scheme.method = QuantMethod::kCompressedFp8;
    TP_RETURN_IF_ERROR(ParseCompressedTensors(*q, &scheme));
  } else if (*method == "fp8") {
    scheme.method = QuantMethod::kFp8Block;
    TP_RETURN_IF_ERROR(ParseFineGrainedFp8(*q, &scheme));
  } else {
    return NotImplemented("quantization_config.quant_method", *method,
                          "awq, gptq, fbgemm_fp8, fp8, compressed-tensors");
  }
  return scheme;
}

}  // namespace tpserve
