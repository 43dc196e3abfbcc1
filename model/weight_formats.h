// Which format each tensor role of a Llama checkpoint is stored in. Real checkpoints mix
// formats (an FP8 checkpoint keeps embeddings, LM head and norms in bf16; a GGUF Q4_1 file
// may hold token_embd in Q8_0 and norms in F32), so the format is a field per role, with
// defaults per named preset that a caller (or a GGUF file's real tensor types) can override.
//
//   TP_ASSIGN_OR_RETURN(WeightFormats formats, WeightFormatsPreset("fp8"));
//   formats[TensorRole::kEmbedding] = TensorFormat::Of(FormatKind::kQ8_0);
//
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_MODEL_WEIGHT_FORMATS_H_
#define TPSERVE_MODEL_WEIGHT_FORMATS_H_

#include <array>
#include <map>
#include <utility>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/tensor_format.h"

namespace tpserve {

// One entry per distinct weight tensor of a model (per layer where it repeats): Llama's, then
// the ones other families add (HasRole in model/sharding.h says which a model has).
enum class TensorRole : uint8_t {
  kEmbedding,  // token_embd         [vocab, hidden]
  kAttnNorm,   // blk.N.attn_norm    [hidden]
  kQ,          // blk.N.attn_q       [heads * head_dim, hidden]
  kK,          // blk.N.attn_k       [kv_heads * head_dim, hidden]
  kV,          // blk.N.attn_v       [kv_heads * head_dim, hidden]
  kO,          // blk.N.attn_output  [hidden, heads * head_dim]
  kFfnNorm,    // blk.N.ffn_norm     [hidden]
  kGate,       // blk.N.ffn_gate     [intermediate, hidden]
  kUp,         // blk.N.ffn_up       [intermediate, hidden]
  kDown,       // blk.N.ffn_down     [hidden, intermediate]
  kFinalNorm,  // output_norm        [hidden]
  kLmHead,     // output             [vocab, hidden] (absent when tied to token_embd)
  kQBias,      // blk.N.attn_q.bias  [heads * head_dim]      (Qwen2)
  kKBias,      // blk.N.attn_k.bias  [kv_heads * head_dim]
  kVBias,      // blk.N.attn_v.bias  [kv_heads * head_dim]
  kQNorm,      // blk.N.attn_q_norm  [head_dim]              (Qwen3, Gemma 3)
  kKNorm,      // blk.N.attn_k_norm  [head_dim]
  kPostAttnNorm,  // blk.N.post_attention_norm [hidden]       (Gemma 2 / 3)
  kPostFfnNorm,   // blk.N.post_ffw_norm       [hidden]
  kRouter,      // blk.N.ffn_gate_inp  [experts, hidden]      (mixtures of experts)
  kExpertGate,  // blk.N.ffn_gate_exps [experts][expert_ffn, hidden]: one matrix per expert
  kExpertUp,    // blk.N.ffn_up_exps   [experts][expert_ffn, hidden]
  kExpertDown,  // blk.N.ffn_down_exps [experts][hidden, expert_ffn]
  kExpertBias,  // blk.N.exp_probs_b.bias [experts]            (choosing only: DeepSeek-V3)
  kSharedGate,  // blk.N.ffn_gate_shexp [shared_ffn, hidden]   (an always-on expert)
  kSharedUp,    // blk.N.ffn_up_shexp   [shared_ffn, hidden]
  kSharedDown,  // blk.N.ffn_down_shexp [hidden, shared_ffn]
  // Multi-head latent attention (ModelSpec::mla), in place of q (when q_lora_rank > 0), k, v:
  kQA,          // blk.N.attn_q_a       [q_lora, hidden]                       (replicated)
  kQANorm,      // blk.N.attn_q_a_norm  [q_lora]
  kQB,          // blk.N.attn_q_b       [heads * (nope + rope), q_lora]
  kKvA,         // blk.N.attn_kv_a_mqa  [kv_lora + rope, hidden]               (replicated)
  kKvANorm,     // blk.N.attn_kv_a_norm [kv_lora]
  // W_UK and W_UV of every head, head by head ([nope rows of W_UK, v rows of W_UV] each), as
  // a fresh prefill expands the latent with them: kv_b_proj [heads * (nope + v), kv_lora]
  // (blk.N.attn_kv_b), or put together from attn_k_b and attn_v_b
  kKvB,
  // W_UK of every head, transposed, as decode folds it into the query (the absorbed form):
  // blk.N.attn_k_b [heads][kv_lora, nope], or cut from kv_b_proj
  kKB,
  // W_UV of every head: blk.N.attn_v_b [heads][v, kv_lora], or cut from kv_b_proj
  kVB,
  // A multi-token-prediction draft (ModelSpec::is_mtp_draft, DeepSeek-V3's MTP layer
  // model.layers.<L>.*): its input is eh_proj [enorm(embedding), hnorm(target's hidden)].
  kMtpENorm,   // model.layers.L.enorm    [hidden]
  kMtpHNorm,   // model.layers.L.hnorm    [hidden]
  kMtpEhProj,  // model.layers.L.eh_proj  [hidden, 2 * hidden]                 (replicated)
};
inline constexpr int kNumTensorRoles = 38;
inline constexpr std::array<TensorRole, kNumTensorRoles> kAllTensorRoles = {
    TensorRole::kEmbedding, TensorRole::kAttnNorm, TensorRole::kQ,         TensorRole::kK,
    TensorRole::kV,         TensorRole::kO,        TensorRole::kFfnNorm,   TensorRole::kGate,
    TensorRole::kUp,        TensorRole::kDown,     TensorRole::kFinalNorm, TensorRole::kLmHead,
    TensorRole::kQBias,     TensorRole::kKBias,    TensorRole::kVBias,     TensorRole::kQNorm,
    TensorRole::kKNorm,     TensorRole::kPostAttnNorm, TensorRole::kPostFfnNorm,
    TensorRole::kRouter,    TensorRole::kExpertGate,   TensorRole::kExpertUp,  TensorRole::kExpertDown,
    TensorRole::kExpertBias, TensorRole::kSharedGate,  TensorRole::kSharedUp,  TensorRole::kSharedDown,
    TensorRole::kQA,        TensorRole::kQANorm,       TensorRole::kQB,        TensorRole::kKvA,
    TensorRole::kKvANorm,   TensorRole::kKvB,          TensorRole::kKB,        TensorRole::kVB,
    TensorRole::kMtpENorm,  TensorRole::kMtpHNorm,     TensorRole::kMtpEhProj};

// "embedding", "attn_norm", "q", ..., "lm_head": used in tables, JSON and flag names.
std::string_view TensorRoleName(TensorRole role);
// MLA's up-projections W_UK and W_UV in their three forms (kKvB, kKB, kVB), which the engine
// holds in a float format, each derived from whichever form the checkpoint stores (a preset
// leaves them as norms are; a checkpoint's quantized kv_b_proj is widened to f32).
bool IsMlaUpRole(TensorRole role);
bool IsNormRole(TensorRole role);
bool IsBiasRole(TensorRole role);
// The GGUF tensor of the role ends in ".bias" rather than ".weight" (IsBiasRole's, and the
// experts' correction bias, which is not split with any output rows).
bool IsGgufBiasTensor(TensorRole role);
// A vector held in f32 whatever the checkpoint stores it in (norms and biases).
bool IsVectorRole(TensorRole role);
bool IsPerLayerRole(TensorRole role);
// A multi-token-prediction draft's input roles (kMtpENorm, kMtpHNorm, kMtpEhProj): once per
// model, not per layer.
bool IsMtpInputRole(TensorRole role);
// One matrix per expert of a layer (kExpertGate, kExpertUp, kExpertDown).
bool IsExpertRole(TensorRole role);
// The shared expert's matrices (kSharedGate, kSharedUp, kSharedDown).
bool IsSharedExpertRole(TensorRole role);
// The attention's matrices and their biases and QK-norms (q, k, v, o, and MLA's q_a ... v_b;
// not attn_norm): what data-parallel attention holds whole on every rank (model/sharding.h).
bool IsAttentionRole(TensorRole role);

// The role of a GGUF tensor name ("blk.7.ffn_down.weight" -> kDown, "output.weight" ->
// kLmHead, "blk.0.attn_q.bias" -> kQBias); nullopt for other names ("rope_freqs.weight").
std::optional<TensorRole> TensorRoleFromGgufName(std::string_view tensor_name);

struct WeightFormats {
  std::string preset;  // what the defaults came from, e.g. "fp8" (for display)
  std::array<TensorFormat, kNumTensorRoles> by_role;
  // Layers whose tensor of a role is stored differently from by_role (llama.cpp's Q4_K_M keeps
  // some layers' attn_v and ffn_down in Q6_K).
  std::map<std::pair<TensorRole, int64_t>, TensorFormat> layer_overrides;

  TensorFormat& operator[](TensorRole role) & { return by_role[static_cast<int>(role)]; }
  const TensorFormat& operator[](TensorRole role) const& {
    return by_role[static_cast<int>(role)];
  }
  // On a temporary, a copy: a reference into it would dangle at the end of the statement
  // (ASan's stack-use-after-scope in sharding_table_test, 2026-12-02).
  TensorFormat operator[](TensorRole role) && { return by_role[static_cast<int>(role)]; }
  // The format of `role` in layer `layer` (the override if there is one).
  const TensorFormat& At(TensorRole role, int64_t layer) const;
  // Every format `role` uses in some layer, by_role's first.
  std::vector<TensorFormat> AllOf(TensorRole role) const;
  // Sets `role` to `format` in every layer (dropping its overrides).
  void Set(TensorRole role, const TensorFormat& format);
  // INVALID_ARGUMENT naming the role when a norm is not a plain float format (f32/f16/bf16).
  absl::Status Validate() const;
};

// Presets as real checkpoints store them:
//   f32, fp16, bf16      everything in that type
//   fp8                  projections fp8 per-channel; embedding, LM head, norms bf16
//                        (Meta's Llama-3.1-*-FP8, FBGEMM row-wise scales)
//   fp8-block            projections fp8 128x128 tiles; embedding, LM head, norms bf16
//   int4, int4-g<N>      projections int4 group N; embedding, LM head, norms fp16 (GPTQ/AWQ
//                        exports). Plain "int4" is group 128 where the model's widths allow
//                        it, else the largest group that fits (FitInt4Groups, model/sharding.h)
//   q8_0, q4_0, q4_1,    every matrix in that GGML type, norms f32 (llama-quantize --pure)
//   q4_k, q5_k, q6_k
// INVALID_ARGUMENT lists the preset names.
absl::StatusOr<WeightFormats> WeightFormatsPreset(std::string_view name);
std::vector<std::string> WeightFormatsPresetNames();

// A checkpoint tensor's name and stored type as GGUF names them ("blk.0.attn_q.weight", "Q4_1").
struct NamedTensorType {
  std::string name;
  std::string type_name;
};

// The per-role formats of a GGUF checkpoint from its tensor list (preset "gguf"). Names
// outside the Llama set are ignored. UNIMPLEMENTED names the tensor when its type has no
// TensorFormat (e.g. Q3_K, IQ4_XS) or one role mixes types across layers (as llama.cpp's
// Q4_K_M mixes Q4_K and Q6_K in attn_v and ffn_down); INVALID_ARGUMENT names a
// role with no tensor (a missing "output.weight" is fine when `tied_embeddings`).
absl::StatusOr<WeightFormats> WeightFormatsFromTensorTypes(
    const std::vector<NamedTensorType>& tensors, bool tied_embeddings);

}  // namespace tpserve

#endif  // TPSERVE_MODEL_WEIGHT_FORMATS_H_
