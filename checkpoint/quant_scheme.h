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
  // transformers' fine-grained "fp8" (DeepSeek-V3's own checkpoints, Qwen3-FP8): weight
  // F8_E4M3 [out, in], weight_scale_inv F32 [ceil(out/128), ceil(in/128)] multiplied in
  // (despite its name); a module whose weight is not F8_E4M3 (the router) is plain.
  kFp8Block,
};
std::string_view QuantMethodName(QuantMethod method);

struct QuantScheme {
  QuantMethod method = QuantMethod::kNone;
  int bits = 0;
  int64_t group_size = 0;         // int4: input values per scale
  bool symmetric = false;         // gptq: sym (awq is always asymmetric: zero_point true)
  // gptq act-order, as the config says. Informational: the stored g_idx decides the groups
  // (an identity g_idx reads as plain groups either way).
  bool desc_act = false;
  bool fp8_block = false;         // compressed-tensors: 128x128 tiles instead of per channel
  float activation_scale_ub = 0;  // fbgemm: clamp for dynamic activation scales
  // Modules stored unquantized, by name or prefix: fbgemm/awq modules_to_not_convert, ct
  // ignore, and those no method here quantizes: the embedding always, and lm_head for awq,
  // gptq and fbgemm_fp8 (transformers keeps their output head in full precision).
  std::vector<std::string> unquantized_modules;

  // Whether the linear `module` (e.g. "model.layers.0.mlp.down_proj") is stored quantized.
  bool Quantizes(std::string_view module) const;
};

// From the text of a Hugging Face config.json: the scheme of its "quantization_config", or
// kNone when it has none. Accepted: awq (bits 4, group_size a multiple of 32, zero_point,
// version gemm), gptq (bits 4, group_size, desc_act, sym, checkpoint_format gptq or absent),
// fbgemm_fp8 (activation_scale_ub, modules_to_not_convert), fp8 (fmt e4m3, weight_block_size
// [128, 128], activation_scheme dynamic, modules_to_not_convert), compressed-tensors
// (float-quantized, one group of 8-bit float symmetric static weights, strategy channel or
// block [128, 128], dynamic or no input activations, ignore). Keys that do not change the
// stored layout or the math (damp_percent, true_sequential, ...) are ignored.
// UNIMPLEMENTED naming the key and value (`quantization_config.bits = 3 ...`) for any other
// method, version, bit width, strategy or math-changing option; INVALID_ARGUMENT naming the key
// for a value of the wrong type or range.
absl::StatusOr<QuantScheme> ParseQuantizationConfig(std::string_view config_json);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_QUANT_SCHEME_H_
