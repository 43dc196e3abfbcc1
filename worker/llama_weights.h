// Loads one tensor-parallel rank's share of a Llama checkpoint: finds each tensor under its
// format's name, checks shape and type, and cuts it as the ShardingPlan says (views for
// column-parallel and vocab-parallel pieces, copies for row-parallel ones).
//
//   TP_ASSIGN_OR_RETURN(LlamaWeights w, LoadLlamaWeights(config, source, plan, *backend));
//   backend->MatMul(h, rows, w.layers[0].q.matrix, q);
//
// Views point into the WeightSource's bytes, which must outlive the LlamaWeights.
// Thread-compatible; immutable after loading.
#ifndef TPSERVE_WORKER_LLAMA_WEIGHTS_H_
#define TPSERVE_WORKER_LLAMA_WEIGHTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/weight_source.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "worker/sharding_plan.h"

namespace tpserve {

enum class LlamaTensor {
  kEmbedding, kAttnNorm, kQ, kK, kV, kO, kFfnNorm, kGate, kUp, kDown, kOutputNorm, kLmHead,
  kRopeFreqs,  // GGUF only: Llama 3.1 frequency divisors (optional)
};

// "blk.3.attn_q.weight" (GGUF) or "model.layers.3.self_attn.q_proj.weight" (safetensors);
// `layer` is ignored for the tensors outside the layers.
std::string LlamaTensorName(CheckpointFormat format, LlamaTensor tensor, int64_t layer);

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> ffn_norm;   // [hidden]
  ShardedMatrix q;     // [local_heads * head_dim, hidden]      view
  ShardedMatrix k;     // [local_kv_heads * head_dim, hidden]   view
  ShardedMatrix v;     // [local_kv_heads * head_dim, hidden]   view
  ShardedMatrix o;     // [hidden, local_heads * head_dim]      copy
  ShardedMatrix gate;  // [local_ffn, hidden]                   view
  ShardedMatrix up;    // [local_ffn, hidden]                   view
  ShardedMatrix down;  // [hidden, local_ffn]                   copy
};

struct LlamaWeights {
  ShardedMatrix embedding;       // [local_vocab_rows, hidden] view
  ShardedMatrix lm_head;         // [local_vocab_rows, hidden] view (unused when tied)
  bool lm_head_tied = false;     // the LM head is `embedding`
  std::vector<float> output_norm;        // [hidden]
  std::vector<float> rope_freq_factors;  // [head_dim / 2], empty when absent
  std::vector<LlamaLayerWeights> layers;
  int64_t bytes_viewed = 0;  // checkpoint bytes this rank reads in place
  int64_t bytes_copied = 0;  // bytes owned here: row-parallel copies and f32 norm vectors

  const WeightMatrix& LmHead() const { return lm_head_tied ? embedding.matrix : lm_head.matrix; }
};

// Errors name the tensor: NOT_FOUND when absent, INVALID_ARGUMENT for a wrong shape or a slice
// that is not block-aligned, UNIMPLEMENTED for a type the backend cannot multiply.
absl::StatusOr<LlamaWeights> LoadLlamaWeights(const LlamaConfig& config,
                                              const WeightSource& source,
                                              const ShardingPlan& plan, const Backend& backend);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LLAMA_WEIGHTS_H_
