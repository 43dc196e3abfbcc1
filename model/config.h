// The model description: shapes and what each layer computes, for every family tpserve serves
// (Llama, Mistral, Mixtral, Qwen2/2.5, Qwen3, Qwen3-MoE, GLM-4.5, Gemma 2, Gemma 3, Llama 4).
// What every other part (loader, sharding plan, forward pass, memory plan, kernels) reads.
// Comes from GGUF metadata, a Hugging Face
// config.json (model/families/ says per family what to read), or a preset with the published
// shapes.
//
//   TP_ASSIGN_OR_RETURN(ModelSpec cfg, ModelSpecFromHfJson(json_text));
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
#include "kernels/activation.h"
#include "kernels/expert_routing.h"

namespace tpserve {

class GgufFile;

// How RoPE frequencies are rescaled for long contexts (config.json's rope_scaling).
enum class RopeScalingType : uint8_t {
  kNone,
  kLlama3,  // Llama 3.1: low frequencies divided by factor, a smooth band between
  kLinear,  // position interpolation: every frequency divided by factor (Gemma 3 4B+ globals)
  kYarn,    // YaRN (Qwen2.5 long context): kernels/rope_table.h's YarnInverseFrequencies
};
std::string_view RopeScalingTypeName(RopeScalingType type);  // "none", "llama3", ...

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 8.0;
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3, yarn
  double beta_fast = 32.0;                          // yarn
  double beta_slow = 1.0;                           // yarn
  // YaRN's attention factors, as DeepSeek's config.json writes them: m(a) = 0.1 a ln(factor)
  // + 1; the rotated dims' cos and sin are multiplied by m(mscale) / m(mscale_all_dim) and the
  // scores' scale by m(mscale_all_dim)^2 (m(0) = 1). The defaults (1, 0) are YaRN's own rule,
  // the factor 0.1 ln(factor) + 1 on cos and sin (Qwen2.5); DeepSeek-V3 and Kimi K2 say 1, 1.
  double mscale = 1.0;                              // yarn
  double mscale_all_dim = 0.0;                      // yarn
  bool enabled() const { return type != RopeScalingType::kNone; }
};

// What one decoder layer's attention is: the part of the description that varies by layer
// (Gemma 2 alternates local and global layers; Gemma 3 has five local to one global, the
// local ones with a RoPE base of their own; Llama 4 has three chunked RoPE layers to one
// global layer without RoPE).
struct LayerSpec {
  int64_t sliding_window = 0;  // > 0: a query at p sees positions p - window + 1 .. p
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool moe = false;  // the feed-forward is ModelSpec::moe's experts, not the dense MLP
  bool rope = true;  // false: q and k are not rotated (Llama 4's NoPE layers)
  // > 0: chunked local attention (Llama 4's RoPE layers): a query at p sees positions
  // floor(p / chunk) * chunk .. p.
  int64_t attention_chunk = 0;
  // q and k RMS-normalized over each head without weights, after RoPE (Llama 4's L2 norm,
  // with rms_norm_eps).
  bool qk_l2_norm = false;
  // > 0: attention temperature tuning (Llama 4's NoPE layers): the queries at position p
  // scaled by log(floor((p + 1) / temperature_floor) + 1) * temperature_scale + 1.
  int64_t temperature_floor = 0;
  double temperature_scale = 0.0;
};

// A mixture-of-experts feed-forward (Mixtral, Qwen3-MoE): in each layer whose LayerSpec::moe is
// set, routing.num_experts gated MLPs of expert_intermediate_size replace the dense one, and a
// token's output is the weighted sum of the outputs of the routing.top_k experts its router
// logits choose (kernels/expert_routing.h says how, per family).
struct MoeSpec {
  ExpertRouting routing;  // num_experts 0: no layer is MoE
  int64_t expert_intermediate_size = 0;
  // How a Hugging Face checkpoint of the family names the router and the experts (GGUF files
  // of every family stack the experts: blk.N.ffn_{gate,up,down}_exps).
  enum class HfNames : uint8_t {
    kMlpExperts,      // mlp.gate, mlp.experts.E.{gate,up,down}_proj (Qwen MoE)
    kBlockSparseMoe,  // block_sparse_moe.gate, block_sparse_moe.experts.E.{w1,w3,w2} (Mixtral)
    // feed_forward.router, every expert in two tensors stored [in, out]:
    // feed_forward.experts.gate_up_proj [E, hidden, 2 * ff] (gate's columns, then up's) and
    // feed_forward.experts.down_proj [E, ff, hidden]; feed_forward.shared_expert.*_proj
    // (Llama 4)
    kFusedFeedForward,
  };
  HfNames hf_names = HfNames::kMlpExperts;
  // An always-on expert beside the routed ones, added to their weighted sum (GLM-4.5,
  // DeepSeek-V3: n_shared_experts of moe_intermediate_size each, one MLP of their total width);
  // 0: none.
  int64_t shared_expert_intermediate_size = 0;
  // A per-expert bias added to the scores for choosing only (DeepSeek-V3's
  // e_score_correction_bias, GGUF's exp_probs_b), a tensor of each MoE layer.
  bool correction_bias = false;
  bool enabled() const { return routing.num_experts > 0; }
};

// Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): keys and values are not projected per
// head from the hidden state but from a latent of kv_lora_rank values per token
// (kv_a_proj_with_mqa, then RMSNorm), which is what the KV cache stores, with one RoPE key of
// qk_rope_head_dim values shared by every head beside it. A head's key is [k_nope, k_rope]
// (k_nope = W_UK c, qk_nope_head_dim wide), its query [q_nope, q_rope], its value W_UV c
// (v_head_dim wide); kv_b_proj holds W_UK and W_UV of every head. The query comes from the
// hidden state directly (q_proj) or through a low-rank latent (q_a_proj, RMSNorm, q_b_proj).
// ModelSpec::head_dim is then the query/key width qk_nope_head_dim + qk_rope_head_dim (the
// scores' 1/sqrt), num_kv_heads equals num_heads (every head has its own expanded key), and
// RoPE rotates only the last qk_rope_head_dim values of a query head and the shared RoPE key.
struct MlaSpec {
  int64_t q_lora_rank = 0;   // 0: q_proj; > 0: q_a_proj -> RMSNorm -> q_b_proj
  int64_t kv_lora_rank = 0;  // 0: not MLA
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool enabled() const { return kv_lora_rank > 0; }
  // Values one token stores per layer: the latent, then the RoPE key.
  int64_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }
};

// The model description every layer reads: the shapes, and what differs between the families
// (model/families/: llama, mistral, qwen2, qwen3, gemma2, gemma3). Defaults are Llama's, so a
// hand-written spec of a Llama needs only the shapes. Built in one place per family from GGUF
// metadata or a config.json; nothing outside model/families branches on the family's name.
struct ModelSpec {
  std::string name;                 // "llama-3.1-8b", "smollm2-135m", or from the file
  std::string family = "llama";     // a name of ModelFamilyNames()
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;          // d_model
  int64_t intermediate_size = 0;    // gated MLP inner width
  int64_t num_layers = 0;
  int64_t num_heads = 0;            // query heads
  int64_t num_kv_heads = 0;         // grouped-query KV heads; num_heads % num_kv_heads == 0
  int64_t head_dim = 0;             // often hidden_size / num_heads (not for Gemma, Qwen3)
  int64_t max_context_tokens = 0;   // max_position_embeddings
  double rope_theta = 10000.0;      // of the layers `layers` does not describe
  RopeScaling rope_scaling;         // likewise
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false; // LM head shares the token embedding
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;        // primary end-of-sequence id
  std::vector<int64_t> extra_eos_token_ids;  // e.g. Llama 3's <|eot_id|>, Gemma's <end_of_turn>

  // ---- What differs between families ----
  Activation mlp_activation = Activation::kSilu;
  bool qkv_bias = false;           // q, k and v projections add a bias (Qwen2)
  bool qk_norm = false;            // RMSNorm over each head of q and k before RoPE (Qwen3, Gemma 3)
  bool sandwich_norms = false;     // RMSNorm of the attention and MLP outputs too (Gemma 2 / 3)
  double embedding_multiplier = 1.0;  // token embeddings times this (Gemma: sqrt(hidden))
  double query_scale = 0.0;        // attention scores' scale; 0: 1 / sqrt(head_dim)
  double attn_logit_softcap = 0.0;   // > 0: scores = cap * tanh(scores / cap) (Gemma 2)
  double final_logit_softcap = 0.0;  // > 0: the same on the logits (Gemma 2)
  // Hugging Face checkpoints of the family store RMSNorm weights as w - 1 (Gemma's norm
  // multiplies by 1 + w); llama.cpp's converter adds the 1, so GGUF files hold w itself.
  bool hf_norm_weight_offset = false;
  // GGUF files of the family rotate halves of each head (llama.cpp's NEOX RoPE: Qwen, Gemma);
  // Llama's converter permutes Q/K rows so that adjacent elements pair up instead.
  bool gguf_rope_rotate_half = false;
  // GGUF files of the family name the norm before the MLP "post_attention_norm" (GLM's
  // converter maps Hugging Face's post_attention_layernorm so) rather than "ffn_norm".
  bool gguf_ffn_norm_is_post_attention = false;
  // Hugging Face checkpoints of the family pair neighbouring elements in RoPE, as GGUF files do
  // (Llama 4 rotates complex numbers: its q/k rows are not permuted to rotate halves).
  bool hf_rope_interleaved = false;
  // The module of a layer's dense MLP in Hugging Face checkpoints: "mlp" (model.layers.N.mlp.
  // gate_proj), or "feed_forward" (Llama 4).
  std::string hf_mlp_module = "mlp";
  // A multimodal Hugging Face checkpoint (Llama4ForConditionalGeneration) keeps the text
  // model's tensors under this prefix ("language_model."; "" for a text model's checkpoint)
  // and other towers' under hf_unserved_weight_prefixes, which the loader leaves unread.
  std::string hf_weight_prefix;
  std::vector<std::string> hf_unserved_weight_prefixes;
  // Per layer; empty: every layer global, with rope_theta and rope_scaling.
  std::vector<LayerSpec> layers;
  // The experts of the layers marked moe (none where !moe.enabled()).
  MoeSpec moe;
  // Multi-head latent attention in place of grouped-query attention (where mla.enabled()).
  MlaSpec mla;
  // Multi-token prediction (DeepSeek-V3's num_nextn_predict_layers): layers after the
  // decoder's that predict one token further, not part of the forward pass. MtpDraftSpec makes
  // the first a speculative draft (--speculative=mtp).
  int64_t num_mtp_layers = 0;
  // >= 0: this is such a draft (MtpDraftSpec): one decoder layer, the checkpoint's layer
  // mtp_checkpoint_layer, whose input at position p is eh_proj [enorm(embedding of the token at
  // p + 1), hnorm(the target's last hidden state at p)], and whose final norm is that layer's
  // shared_head.norm; embedding and LM head are the target's.
  int64_t mtp_checkpoint_layer = -1;
  bool is_mtp_draft() const { return mtp_checkpoint_layer >= 0; }
  // The chat format llama.cpp applies to the family's files that carry no template (its
  // built-in format's name, e.g. "gemma"; coordinator/chat/builtin_templates.h); "" for none.
  std::string builtin_chat_format;

  // Layer `layer`'s attention (from `layers`, or the model-wide fields when it is empty).
  LayerSpec Layer(int64_t layer) const;
  // The width of a head's value (and of its attention output): v_head_dim with MLA, else
  // head_dim.
  int64_t ValueHeadDim() const { return mla.enabled() ? mla.v_head_dim : head_dim; }
  // The width RoPE rotates in a query or key head: qk_rope_head_dim with MLA, else head_dim.
  int64_t RopeDim() const { return mla.enabled() ? mla.qk_rope_head_dim : head_dim; }
  // The scale of attention scores before any soft-cap: query_scale or 1 / sqrt(head_dim),
  // times YaRN's attention factor squared when the layer's RoPE is YaRN-scaled (m(mscale)^2
  // where RoPE rotates the whole head; m(mscale_all_dim)^2 with MLA, whose rotated dims'
  // factor m(mscale) / m(mscale_all_dim) Validate requires to be 1).
  double AttentionScale(int64_t layer) const;
  // Whether layer `layer`'s feed-forward is the experts.
  bool IsMoeLayer(int64_t layer) const;
  // Parameter count of every weight (embedding, LM head unless tied, norms, projections,
  // biases, routers and every expert).
  int64_t NumParameters() const;
  // The weights one token multiplies: NumParameters less the experts it is not routed to.
  int64_t NumActiveParameters() const;
  // Of those, the projections' elements over every layer (q, k, v, o, and a dense MLP or the
  // router, top_k experts and a shared expert): a token's matmul FLOPs are twice this.
  int64_t NumActiveLinearParameters() const;
  // The expected share of a MoE layer's experts that `tokens` tokens route to, spread evenly
  // (each takes top_k of num_experts): 1 - (1 - top_k / num_experts)^tokens; 1 for a dense
  // model. What a decode step of `tokens` sequences reads of the experts' bytes.
  double ExpertReadFraction(int64_t tokens) const;
  // INVALID_ARGUMENT naming the field and the bound when a shape is inconsistent.
  absl::Status Validate() const;
};

// The families a description can be read for ("deepseek2", "gemma2", "gemma3", "glm4moe",
// "llama", "llama4", "mistral", "mixtral", "qwen2", "qwen3", "qwen3moe").
std::vector<std::string> ModelFamilyNames();

// Presets with the exact published shapes: "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
// "smollm2-135m" (aliases "8b", "70b", "405b", "smollm2"), and the mixtures of experts
// "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "llama4-scout", "llama4-maverick",
// "deepseek-v3", "kimi-k2" (their config.json, Llama 4's text_config, read by the family's
// reader). NOT_FOUND lists the known
// names.
absl::StatusOr<ModelSpec> ModelSpecPreset(std::string_view name);

// The speculative draft of `target`'s first multi-token-prediction layer (see
// ModelSpec::mtp_checkpoint_layer): FAILED_PRECONDITION naming the model when it has none.
absl::StatusOr<ModelSpec> MtpDraftSpec(const ModelSpec& target);
std::vector<std::string> ModelSpecPresetNames();

// From a Hugging Face config.json text. INVALID_ARGUMENT names the missing or bad key;
// UNIMPLEMENTED names a model_type outside ModelFamilyNames() (listing them) or a key whose
// value would change the computation in a way tpserve does not implement (an unknown
// rope_scaling type, attention sinks, a layer type).
absl::StatusOr<ModelSpec> ModelSpecFromHfJson(std::string_view json_text);

// From GGUF metadata ("llama.embedding_length", ...). INVALID_ARGUMENT names the key;
// UNIMPLEMENTED an architecture outside the families (listing them) or an unimplemented key.
absl::StatusOr<ModelSpec> ModelSpecFromGguf(const GgufFile& gguf);

}  // namespace tpserve

#endif  // TPSERVE_MODEL_CONFIG_H_
