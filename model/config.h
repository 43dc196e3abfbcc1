// Llama-family model shapes: what every other part (loader, sharding plan, memory plan,
// kernels) reads to know the sizes. Comes from GGUF metadata, a Hugging Face config.json, or
// a preset with the published shapes.
//
//   TP_ASSIGN_OR_RETURN(LlamaConfig cfg, LlamaConfigFromHfJson(json_text));
//   int64_t kv_bytes_per_token = 2 * cfg.num_layers * cfg.num_kv_heads * cfg.head_dim * 2;
//
// Plain value type; thread-compatible.
#ifndef TPSERVE_MODEL_CONFIG_H_
#define TPSERVE_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

class GgufFile;

// Llama 3.1 "llama3" RoPE frequency scaling (rope_scaling.rope_type == "llama3").
struct RopeScaling {
  bool enabled = false;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string name;                 // "llama-3.1-8b", "smollm2-135m", or from the file
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;          // d_model
  int64_t intermediate_size = 0;    // SwiGLU inner width
  int64_t num_layers = 0;
  int64_t num_heads = 0;            // query heads
  int64_t num_kv_heads = 0;         // grouped-query KV heads; num_heads % num_kv_heads == 0
  int64_t head_dim = 0;             // usually hidden_size / num_heads
  int64_t max_context_tokens = 0;   // max_position_embeddings
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false; // LM head shares the token embedding
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;        // primary end-of-sequence id
  std::vector<int64_t> extra_eos_token_ids;  // e.g. Llama 3's <|eot_id|>

  // Parameter count of the dense weights (embedding, LM head unless tied, norms, projections).
  int64_t NumParameters() const;
  // INVALID_ARGUMENT naming the field and the bound when a shape is inconsistent.
  absl::Status Validate() const;
};

// Presets with the exact published shapes: "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
// "smollm2-135m" (aliases "8b", "70b", "405b", "smollm2"). NOT_FOUND lists the known names.
absl::StatusOr<LlamaConfig> LlamaConfigPreset(std::string_view name);
std::vector<std::string> LlamaConfigPresetNames();

// From a Hugging Face config.json text. INVALID_ARGUMENT names the missing or bad key.
absl::StatusOr<LlamaConfig> LlamaConfigFromHfJson(std::string_view json_text);

// From GGUF metadata ("llama.embedding_length", ...). INVALID_ARGUMENT names the key.
absl::StatusOr<LlamaConfig> LlamaConfigFromGguf(const GgufFile& gguf);

}  // namespace tpserve

#endif  // TPSERVE_MODEL_CONFIG_H_
