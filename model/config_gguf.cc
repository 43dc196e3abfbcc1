// ModelSpecFromGguf: the "<arch>.*" and "tokenizer.ggml.*" metadata keys that llama.cpp's
// converter writes, the ones every family shares here; model/families/ reads the rest.
#include <optional>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "formats/gguf.h"
#include "base/str_cat.h"
#include "model/config.h"
#include "model/config_readers.h"
#include "model/families/family.h"
#include "absl/strings/str_join.h"

namespace tpserve {
namespace {

using config_internal::AsInvalid;
using config_internal::GgufFloat;
using config_internal::GgufInt;
using config_internal::GgufRequiredInt;

absl::Status ReadVocab(const GgufFile& g, const std::string& arch, ModelSpec& c);

absl::Status ReadShapes(const GgufFile& g, const std::string& arch, ModelSpec& c) {
  TP_ASSIGN_OR_RETURN(c.num_layers, GgufRequiredInt(g, arch + ".block_count"));
  TP_ASSIGN_OR_RETURN(c.max_context_tokens, GgufRequiredInt(g, arch + ".context_length"));
  TP_ASSIGN_OR_RETURN(c.hidden_size, GgufRequiredInt(g, arch + ".embedding_length"));
  TP_ASSIGN_OR_RETURN(c.intermediate_size, GgufRequiredInt(g, arch + ".feed_forward_length"));
  TP_ASSIGN_OR_RETURN(c.num_heads, GgufRequiredInt(g, arch + ".attention.head_count"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> kv, GgufInt(g, arch + ".attention.head_count_kv"));
  c.num_kv_heads = kv.value_or(c.num_heads);
  // Gemma and Qwen3 heads are not hidden / heads wide: key_length says (rope.dimension_count
  // is the rotated width, the whole head for every family here).
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> key_length,
                      GgufInt(g, arch + ".attention.key_length"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> value_length,
                      GgufInt(g, arch + ".attention.value_length"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> rope_dims, GgufInt(g, arch + ".rope.dimension_count"));
  if (key_length) {
    c.head_dim = *key_length;
  } else if (rope_dims) {
    c.head_dim = *rope_dims;
  } else if (c.num_heads > 0 && c.hidden_size % c.num_heads == 0) {
    c.head_dim = c.hidden_size / c.num_heads;
  } else {
    return absl::InvalidArgumentError(StrCat(
        g.Describe(), ": ", arch, ".attention.head_count ", c.num_heads, " must divide ", arch,
        ".embedding_length ", c.hidden_size, " when ", arch, ".attention.key_length is absent"));
  }
  // Multi-head latent attention (deepseek2): its family reads the widths of its heads.
  if (g.HasKey(arch + ".attention.kv_lora_rank")) return ReadVocab(g, arch, c);
  if (value_length && *value_length != c.head_dim) {
    return absl::UnimplementedError(StrCat(g.Describe(), ": ", arch, ".attention.value_length ",
                                           *value_length, " differs from the key length ",
                                           c.head_dim, "; heads of two widths are not implemented"));
  }
  if (rope_dims && *rope_dims != c.head_dim) {
    return absl::UnimplementedError(StrCat(g.Describe(), ": ", arch, ".rope.dimension_count ",
                                           *rope_dims, " differs from the head width ", c.head_dim,
                                           "; partial rotary embeddings are not implemented"));
  }
  return ReadVocab(g, arch, c);
}

absl::Status ReadVocab(const GgufFile& g, const std::string& arch, ModelSpec& c) {
  // Older files lack <arch>.vocab_size; the token list has the same length.
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> vocab, GgufInt(g, arch + ".vocab_size"));
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
absl::Status ReadRope(const GgufFile& g, const std::string& arch, ModelSpec& c) {
  TP_ASSIGN_OR_RETURN(std::optional<double> theta, GgufFloat(g, arch + ".rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0);
  const std::string type_key = arch + ".rope.scaling.type";
  TP_ASSIGN_OR_RETURN(std::optional<std::string> type, config_internal::GgufString(g, type_key));
  TP_ASSIGN_OR_RETURN(std::optional<double> factor, GgufFloat(g, arch + ".rope.scaling.factor"));
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> original,
                      GgufInt(g, arch + ".rope.scaling.original_context_length"));
  if (original) c.rope_scaling.original_max_position_embeddings = *original;
  if (factor) c.rope_scaling.factor = *factor;
  const bool scaled = factor && *factor > 1.0;
  if (g.HasTensor("rope_freqs.weight")) {
    c.rope_scaling.type = RopeScalingType::kLlama3;
  } else if (!type || *type == "none") {
    // llama.cpp's older Llama 3.1 files: a factor without a type means llama3.
    if (scaled && arch == "llama") c.rope_scaling.type = RopeScalingType::kLlama3;
  } else if (*type == "llama3") {
    c.rope_scaling.type = RopeScalingType::kLlama3;
  } else if (*type == "linear") {
    if (scaled) c.rope_scaling.type = RopeScalingType::kLinear;
  } else if (*type == "yarn") {
    if (scaled) c.rope_scaling.type = RopeScalingType::kYarn;
    TP_ASSIGN_OR_RETURN(std::optional<double> fast,
                        GgufFloat(g, arch + ".rope.scaling.yarn_beta_fast"));
    TP_ASSIGN_OR_RETURN(std::optional<double> slow,
                        GgufFloat(g, arch + ".rope.scaling.yarn_beta_slow"));
    if (fast) c.rope_scaling.beta_fast = *fast;
    if (slow) c.rope_scaling.beta_slow = *slow;
    TP_ASSIGN_OR_RETURN(std::optional<double> attn,
                        GgufFloat(g, arch + ".rope.scaling.attn_factor"));
    if (attn && *attn != 1.0) {
      return absl::UnimplementedError(StrCat(
          g.Describe(), ": ", arch, ".rope.scaling.attn_factor ", *attn,
          " is not implemented (only YaRN's default attention factor 0.1 ln(factor) + 1)"));
    }
  } else {
    return absl::UnimplementedError(StrCat(g.Describe(), ": ", type_key, " '", *type,
                                           "' is not implemented (none, llama3, linear, yarn)"));
  }
  return absl::OkStatus();
}

absl::Status ReadTokens(const GgufFile& g, ModelSpec& c) {
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> bos, GgufInt(g, "tokenizer.ggml.bos_token_id"));
  c.bos_token_id = bos.value_or(-1);
  TP_ASSIGN_OR_RETURN(std::optional<int64_t> eos, GgufInt(g, "tokenizer.ggml.eos_token_id"));
  c.eos_token_id = eos.value_or(-1);
  // Llama 3 ends turns with <|eot_id|> and tool calls with <|eom_id|>, Gemma turns with
  // <end_of_turn>, besides the EOS token.
  for (const char* key : {"tokenizer.ggml.eom_token_id", "tokenizer.ggml.eot_token_id"}) {
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> id, GgufInt(g, key));
    if (id && *id != c.eos_token_id) c.extra_eos_token_ids.push_back(*id);
  }
  return absl::OkStatus();
}

std::string SupportedArchitectures() {
  std::vector<std::string> archs;
  for (const ModelFamily* f : ModelFamilies()) {
    for (std::string_view a : f->gguf_architectures) archs.emplace_back(a);
  }
  return absl::StrJoin(archs, ", ");
}

}  // namespace

absl::StatusOr<ModelSpec> ModelSpecFromGguf(const GgufFile& gguf) {
  absl::StatusOr<std::string> arch = gguf.GetString("general.architecture");
  if (!arch.ok()) return AsInvalid(arch.status());
  const ModelFamily* family = FamilyForGgufArchitecture(*arch);
  if (family == nullptr) {
    return absl::UnimplementedError(StrCat(gguf.Describe(), ": general.architecture '", *arch,
                                           "' is not supported (supported: ",
                                           SupportedArchitectures(), ")"));
  }
  ModelSpec c;
  c.family = std::string(family->name);
  c.name = gguf.HasKey("general.name") ? gguf.GetString("general.name").value_or("gguf") : "gguf";
  absl::Status s = ReadShapes(gguf, *arch, c);
  if (s.ok()) s = ReadRope(gguf, *arch, c);
  if (s.ok()) {
    TP_ASSIGN_OR_RETURN(std::optional<double> eps,
                        GgufFloat(gguf, *arch + ".attention.layer_norm_rms_epsilon"));
    c.rms_norm_eps = eps.value_or(1e-5);
    s = ReadTokens(gguf, c);
  }
  if (s.ok()) s = family->from_gguf(gguf, *arch, c);
  if (!s.ok()) return AsInvalid(s);
  c.tie_word_embeddings = !gguf.HasTensor("output.weight");
  TP_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tpserve
