// LlamaConfigFromGguf: the "<arch>.*" and "tokenizer.ggml.*" metadata keys that llama.cpp's
// converter writes for Llama-architecture models.
#include <optional>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "formats/gguf.h"
#include "base/str_cat.h"
#include "model/config.h"

namespace tpserve {
namespace {

// The file's getters say NOT_FOUND for a missing key; to the caller a missing required key is
// a bad input like any other, so it becomes INVALID_ARGUMENT with the same message.
absl::Status AsInvalid(const absl::Status& s) {
  if (s.code() != absl::StatusCode::kNotFound) return s;
  return absl::InvalidArgumentError(s.message());
}

absl::StatusOr<int64_t> RequiredInt(const GgufFile& g, const std::string& key) {
  absl::StatusOr<int64_t> v = g.GetI64(key);
  if (!v.ok()) return AsInvalid(v.status());
  return *v;
}

absl::StatusOr<std::optional<int64_t>> OptionalInt(const GgufFile& g, const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(int64_t v, g.GetI64(key));
  return v;
}

absl::StatusOr<std::optional<double>> OptionalFloat(const GgufFile& g, const std::string& key) {
  if (!g.HasKey(key)) return std::nullopt;
  TP_ASSIGN_OR_RETURN(float v, g.GetF32(key));
  return static_cast<double>(v);
}

absl::Status ReadShapes(const GgufFile& g, const std::string& arch, LlamaConfig& c) {
  TP_ASSIGN_OR_RETURN(c.num_layers, RequiredInt(g, arch + ".block_count"));
  TP_ASSIGN_OR_RETURN(c.max_context_tokens, RequiredInt(g, arch + ".context_length"));
  TP_ASSIGN_OR_RETURN(c.hidden_size, RequiredInt(g, arch + ".embedding_length"));
  TP_ASSIGN_OR_RETURN(c.intermediate_size, RequiredInt(g, arch + ".feed_forward_length"));
  TP_ASSIGN_OR_RETURN(c.num_heads, RequiredInt(g, arch + ".attention.head_count"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> kv, OptionalInt(g, arch + ".attention.head_count_kv"));
  c.num_kv_heads = kv.value_or(c.num_heads);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> rope_dims,
                      OptionalInt(g, arch + ".rope.dimension_count"));
  if (rope_dims) {
    c.head_dim = *rope_dims;
  } else if (c.num_heads > 0 && c.hidden_size % c.num_heads == 0) {
    c.head_dim = c.hidden_size / c.num_heads;
  } else {
    return absl::InvalidArgumentError(StrCat(
        g.Describe(), ": ", arch, ".attention.head_count ", c.num_heads, " must divide ", arch,
        ".embedding_length ", c.hidden_size, " when ", arch, ".rope.dimension_count is absent"));
  }
  // Older files lack <arch>.vocab_size; the token list has the same length.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> vocab, OptionalInt(g, arch + ".vocab_size"));
  if (vocab) {
    c.vocab_size = *vocab;
  } else {
    absl::StatusOr<uint64_t> tokens = g.GetArraySize("tokenizer.ggml.tokens");
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(StrCat(g.Describe(), ": neither ", arch,
                                               ".vocab_size nor tokenizer.ggml.tokens is present"));
    }
    c.vocab_size = static_cast<int64_t>(*tokens);
  }
  return absl::OkStatus();
}

// llama.cpp bakes Llama 3.1's frequency scaling into a "rope_freqs.weight" tensor rather than
// metadata; its presence means llama3 scaling, with the 3.1 constants unless keys say otherwise.
absl::Status ReadRope(const GgufFile& g, const std::string& arch, LlamaConfig& c) {
  TP_ASSIGN_OR_RETURN(std::optional<double> theta, OptionalFloat(g, arch + ".rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0);
  const std::string type_key = arch + ".rope.scaling.type";
  if (g.HasKey(type_key)) {
    TP_ASSIGN_OR_RETURN(std::string type, g.GetString(type_key));
    if (type != "none" && type != "llama3") {
      return absl::UnimplementedError(StrCat(g.Describe(), ": ", type_key, " '", type,
                                             "' is not supported (only none and llama3)"));
    }
  }
  c.rope_scaling.enabled = g.HasTensor("rope_freqs.weight");
  TP_ASSIGN_OR_RETURN(std::optional<double> factor,
                      OptionalFloat(g, arch + ".rope.scaling.factor"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> original,
                      OptionalInt(g, arch + ".rope.scaling.original_context_length"));
  if (factor && *factor > 1.0) {
    c.rope_scaling.enabled = true;
    c.rope_scaling.factor = *factor;
  }
  if (original) c.rope_scaling.original_max_position_embeddings = *original;
  return absl::OkStatus();
}

absl::Status ReadTokens(const GgufFile& g, LlamaConfig& c) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bos, OptionalInt(g, "tokenizer.ggml.bos_token_id"));
  c.bos_token_id = bos.value_or(-1);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> eos, OptionalInt(g, "tokenizer.ggml.eos_token_id"));
  c.eos_token_id = eos.value_or(-1);
  // Llama 3 ends turns with <|eot_id|> and tool calls with <|eom_id|>, besides the EOS token.
  for (const char* key : {"tokenizer.ggml.eom_token_id", "tokenizer.ggml.eot_token_id"}) {
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> id, OptionalInt(g, key));
    if (id && *id != c.eos_token_id) c.extra_eos_token_ids.push_back(*id);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LlamaConfig> LlamaConfigFromGguf(const GgufFile& gguf) {
  absl::StatusOr<std::string> arch = gguf.GetString("general.architecture");
  if (!arch.ok()) return AsInvalid(arch.status());
  if (*arch != "llama") {
    return absl::UnimplementedError(StrCat(gguf.Describe(), ": general.architecture '", *arch,
                                           "' is not supported (only llama)"));
  }
  LlamaConfig c;
  c.name = gguf.HasKey("general.name") ? gguf.GetString("general.name").value_or("gguf") : "gguf";
  absl::Status s = ReadShapes(gguf, *arch, c);
  if (s.ok()) s = ReadRope(gguf, *arch, c);
  if (s.ok()) {
    TP_ASSIGN_OR_RETURN(std::optional<double> eps,
                        OptionalFloat(gguf, *arch + ".attention.layer_norm_rms_epsilon"));
    c.rms_norm_eps = eps.value_or(1e-5);
    s = ReadTokens(gguf, c);
  }
  if (!s.ok()) return AsInvalid(s);
  c.tie_word_embeddings = !gguf.HasTensor("output.weight");
  TP_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tpserve
