// A synthetic Llama small enough to recompute naively: random weights in an in-memory
// checkpoint (either naming scheme, any weight type) and a plain f64 reference forward pass
// with no KV cache, written independently of worker/llama_model.cc.
//
//   ModelSpec cfg = TinyLlamaSpec();
//   auto src = MakeTinyLlama(cfg, {.format = CheckpointFormat::kGguf, .linear = DType::kQ4_1});
//   std::vector<float> want = ReferenceLogits(cfg, *src, tokens);  // [tokens, vocab]
//
// Thread-compatible.
#ifndef TPSERVE_CHECKPOINT_TESTING_TINY_LLAMA_H_
#define TPSERVE_CHECKPOINT_TESTING_TINY_LLAMA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "checkpoint/testing/in_memory_weight_source.h"
#include "formats/weight_source.h"
#include "model/config.h"

namespace tpserve {

// 2 layers, hidden 128, 8 query heads / 4 KV heads of 16, SwiGLU 256, vocab 99 (odd, so
// vocab-parallel shards are uneven). Every dimension splits over 1, 2 or 4 ranks on whole
// quantization blocks.
ModelSpec TinyLlamaSpec();

struct TinyLlamaOptions {
  CheckpointFormat format = CheckpointFormat::kGguf;
  DType linear = DType::kF32;     // Q, K, V, O, gate, up, down
  DType embedding = DType::kF32;  // also the LM head
  bool separate_lm_head = false;  // store output.weight / lm_head.weight (else tied)
  uint32_t seed = 1;
};

// REQUIRES: config.tie_word_embeddings == !options.separate_lm_head.
std::unique_ptr<InMemoryWeightSource> MakeTinyLlama(const ModelSpec& config,
                                                    const TinyLlamaOptions& options);

// Logits [tokens.size(), vocab] for a sequence starting at position 0, from the dequantized
// weights, all in f64. RoPE pairs follow the source's format (GGUF: neighbours, HF: halves).
std::vector<float> ReferenceLogits(const ModelSpec& config, const WeightSource& source,
                                   absl::Span<const int32_t> tokens);

}  // namespace tpserve

#endif  // TPSERVE_CHECKPOINT_TESTING_TINY_LLAMA_H_
