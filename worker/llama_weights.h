// Loads one tensor-parallel rank's share of a Llama checkpoint into backend memory: for every
// tensor, the slice the sharding table gives this rank (model/sharding.h), read in the
// checkpoint's own layout (checkpoint/stored_matrix.h), re-encoded when the target format
// differs (quantize on load), and placed where the backend computes (views of the mmapped file
// on the CPU, uploads to the device on a GPU). For a backend that fuses (the CUDA backend's
// projection_fusion), a layer's q/k/v and gate/up slices are stacked into one matrix each where
// model/fused_projections.h allows (a fallback said once per group and reason on stderr).
//
//   TP_ASSIGN_OR_RETURN(LlamaWeights w, LoadLlamaWeights(config, source, scheme, plan,
//                                                        formats, *backend));
//   backend->MatMul(h, rows, w.layers[0].q.matrix, q, backend->activation_dtype());
//
// Every checkpoint tensor must be consumed: one the loader would leave unapplied (a scale, a
// zero point, an extra bias) is an error naming it. Views point into the WeightSource's bytes,
// which must outlive the LlamaWeights. Thread-compatible; immutable after loading.
#ifndef TPSERVE_WORKER_LLAMA_WEIGHTS_H_
#define TPSERVE_WORKER_LLAMA_WEIGHTS_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/quant_scheme.h"
#include "formats/weight_source.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/sharding.h"
#include "model/weight_formats.h"

namespace tpserve {

// A weight matrix in backend memory as the backend placed it (Backend::PlaceWeight): `matrix`
// points into its buffers (copied in), on a host backend into the checkpoint's bytes (viewed in
// place), and on the CUDA backend possibly at that backend's own form of it.
using LoadedMatrix = PlacedWeight;

struct LlamaLayerWeights {
  DeviceBuffer attn_norm;  // f32 [hidden]
  DeviceBuffer ffn_norm;   // f32 [hidden]
  // What other families add (ModelSpec's qkv_bias, qk_norm, sandwich_norms); empty otherwise.
  DeviceBuffer q_bias;          // f32 [local_heads * head_dim]
  DeviceBuffer k_bias;          // f32 [local_kv_heads * head_dim]
  DeviceBuffer v_bias;          // f32 [local_kv_heads * head_dim]
  DeviceBuffer q_norm;          // f32 [head_dim]
  DeviceBuffer k_norm;          // f32 [head_dim]
  DeviceBuffer post_attn_norm;  // f32 [hidden]
  DeviceBuffer post_ffn_norm;   // f32 [hidden]
  LoadedMatrix q;          // [local_heads * head_dim, hidden]      column-parallel
  LoadedMatrix k;          // [local_kv_heads * head_dim, hidden]   column-parallel
  LoadedMatrix v;          // [local_kv_heads * head_dim, hidden]   column-parallel
  LoadedMatrix o;          // [hidden, local_heads * head_dim]      row-parallel
  LoadedMatrix gate;       // [local_ffn, hidden]                   column-parallel
  LoadedMatrix up;         // [local_ffn, hidden]                   column-parallel
  LoadedMatrix down;       // [hidden, local_ffn]                   row-parallel
  // Where the backend fuses (Backend::projection_fusion) and the layer allows
  // (model/fused_projections.h): q, k and v stacked along n as one matrix, [nq + nk + nv,
  // hidden], and gate and up as [2 * local_ffn, hidden], placed INSTEAD of the parts: q, k, v
  // (gate, up) above are then views of its rows with no bytes of their own (their stored arrays
  // null where the backend's form replaced the stack's). Empty (rows 0) where they stay apart.
  LoadedMatrix qkv;
  LoadedMatrix gate_up;
  DeviceBuffer qkv_bias;  // f32 [nq + nk + nv]: q, k, v biases stacked (Qwen2; with qkv only)
  // What MatMulMany is given as its fused matrix: the stack, or nullptr where there is none.
  const WeightMatrix* FusedQkv() const { return qkv.matrix.rows > 0 ? &qkv.matrix : nullptr; }
  const WeightMatrix* FusedGateUp() const {
    return gate_up.matrix.rows > 0 ? &gate_up.matrix : nullptr;
  }
  // A MoE layer (ModelSpec::IsMoeLayer) has these instead of gate, up and down.
  struct Expert {
    LoadedMatrix gate;  // [local_expert_ffn, hidden]  column-parallel
    LoadedMatrix up;    // [local_expert_ffn, hidden]  column-parallel
    LoadedMatrix down;  // [hidden, local_expert_ffn]  row-parallel
  };
  LoadedMatrix router;            // [experts, hidden]  replicated
  DeviceBuffer expert_bias;       // f32 [experts]: the choosing-only correction (or empty)
  std::vector<Expert> experts;    // every expert, by id
  Expert shared;                  // the always-on expert (MoeSpec's shared width; or empty)
  std::vector<Backend::ExpertMlp> expert_mlps;  // experts' matrices, as MoeExperts takes them
  // Multi-head latent attention (ModelSpec::mla) has these instead of k and v, and of q when
  // it has a query latent (q_lora_rank > 0); o is [hidden, local_heads * v_head_dim].
  LoadedMatrix q_a;         // [q_lora, hidden]                         replicated
  DeviceBuffer q_a_norm;    // f32 [q_lora]
  LoadedMatrix q_b;         // [local_heads * head_dim, q_lora]         column-parallel
  LoadedMatrix kv_a;        // [kv_lora + qk_rope, hidden]: latent, RoPE key  replicated
  DeviceBuffer kv_a_norm;   // f32 [kv_lora]
  // [local_heads * (nope + v), kv_lora]: the expanded form's (LlamaLoadOptions::
  // mla_expand_fresh_prefill only; empty otherwise)
  LoadedMatrix kv_b;
  std::vector<LoadedMatrix> k_b;  // per local head: W_UK^T [kv_lora, nope] (absorbed form)
  std::vector<LoadedMatrix> v_b;  // per local head: W_UV [v, kv_lora]
};

struct LlamaWeights {
  LoadedMatrix embedding;     // [local_vocab_rows, hidden]
  LoadedMatrix lm_head;       // [local_vocab_rows, hidden] (unused when tied)
  bool lm_head_tied = false;  // the LM head is `embedding`
  DeviceBuffer output_norm;   // f32 [hidden]
  std::vector<float> rope_freq_factors;  // host [head_dim / 2], empty when absent
  std::vector<LlamaLayerWeights> layers;
  // A multi-token-prediction draft's input (ModelSpec::is_mtp_draft), replicated.
  DeviceBuffer mtp_enorm;    // f32 [hidden]: the token's embedding
  DeviceBuffer mtp_hnorm;    // f32 [hidden]: the target's hidden state
  LoadedMatrix mtp_eh_proj;  // [hidden, 2 * hidden]
  int64_t bytes_viewed = 0;  // checkpoint bytes this rank reads in place
  int64_t bytes_copied = 0;  // bytes allocated for weights in backend memory
  // What this rank really holds per role, all layers together (the placements' viewed and
  // allocated bytes, the backend's own forms included), for comparing with the memory plan.
  std::array<int64_t, kNumTensorRoles> role_bytes{};

  const WeightMatrix& LmHead() const { return lm_head_tied ? embedding.matrix : lm_head.matrix; }
};

// Errors name the tensor: NOT_FOUND when absent; INVALID_ARGUMENT for a wrong shape, a slice
// that cuts a block, or a checkpoint tensor nothing consumes; UNIMPLEMENTED for a format the
// backend cannot multiply; RESOURCE_EXHAUSTED when backend memory runs out.
// `formats` is the format each role is held in: the checkpoint's own (no conversion) or a
// preset such as "fp8" or "int4" (quantize on load).
// `mla_expanded_form`: also hold MLA's kv_b (LlamaLoadOptions::mla_expand_fresh_prefill; no
// plan counts it).
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const ModelSpec& config,
                                              const WeightSource& source,
                                              const QuantScheme& scheme,
                                              const ShardingPlan& plan,
                                              const WeightFormats& formats, Backend& backend,
                                              bool mla_expanded_form = false);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LLAMA_WEIGHTS_H_
