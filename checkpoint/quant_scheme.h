// How a checkpoint stores its quantized linear weights, as its config says: nothing (plain
// tensors of one dtype each, the GGUF case too), FP8 with scales (Meta's fbgemm layout,
// compressed-tensors), or INT4 groups (AutoAWQ GEMM, GPTQ v1). Read from the Hugging Face
// `quantization_config`; anything this engine does not implement is refused by name, never
// served as if it were understood.
//
//   TP_ASSIGN_OR_RETURN(QuantScheme scheme, ParseQuantizationConfig(config_json_text));
//   if (scheme.method == QuantMethod::kAwq) ...
//
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_CHECKPOINT_QUANT_SCHEME_H_
#define TPSERVE_CHECKPOINT_QUANT_SCHEME_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

enum class QuantMethod : uint8_t {
  kNone,              // plain tensors (GGUF blocks included)
  kFbgemmFp8,         // weight F8_E4M3 [out, in], weight_scale F32 [out, 1], input_scale_ub [1]
  kCompressedFp8,     // compressed-tensors float-quantized: channel or 128x128 block scales
  kAwq,               // AutoAWQ GEMM: qweight I32 [in, out/8], qzeros, scales [in/g, out]
  kGptq,              // GPTQ v1: qweight I32 [in/8, out], qzeros (z - 1), scales, g_idx
};
std::string_view QuantMethodName(QuantMethod method);

struct QuantScheme {
  QuantMethod method = QuantMethod::kNone;
  int bits = 0;
  int64_t group_size = 0;         // int4: input values per scale
  bool symmetric = false;         // gptq: sym; awq: !zero_point
  bool desc_act = false;          // gptq act-order (permuted g_idx)
  bool fp8_block = false;         // compressed-tensors: 128x128 tiles instead of per channel
  float activation_scale_ub = 0;  // fbgemm: clamp for dynamic activation scales
  // Module name prefixes left unquantized (fbgemm modules_to_not_convert, ct ignore).
  std::vector<std::string> unquantized_modules;

  // Whether the linear `module` (e.g. "model.layers.0.mlp.down_proj") is stored quantized.
  bool Quantizes(std::string_view module) const;
};

// From the text of a Hugging Face config.json: the scheme of its "quantization_config", or
// kNone when it has none. UNIMPLEMENTED naming the key and value for a method or option this
// engine does not implement; INVALID_ARGUMENT for malformed values.
absl::StatusOr<QuantScheme> ParseQuantizationConfig(std::string_view config_json);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_QUANT_SCHEME_H_
