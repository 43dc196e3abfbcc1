#include "planner/test_models.h"

namespace tpserve {
namespace {

ModelSpec Shape(const char* name, int64_t vocab, int64_t hidden, int64_t ffn, int64_t layers,
                  int64_t heads, int64_t kv_heads, int64_t context, bool tied) {
  ModelSpec c;
  c.name = name;
  c.vocab_size = vocab;
  c.hidden_size = hidden;
  c.intermediate_size = ffn;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.max_context_tokens = context;
  c.tie_word_embeddings = tied;
  return c;
}

}  // namespace

ModelSpec Llama31_405B() {
  ModelSpec c = Shape("llama-3.1-405b", 128256, 16384, 53248, 126, 128, 8, 131072, false);
  c.rope_theta = 500000.0;
  return c;
}

ModelSpec Llama33_70B() {
  ModelSpec c = Shape("llama-3.3-70b", 128256, 8192, 28672, 80, 64, 8, 131072, false);
  c.rope_theta = 500000.0;
  return c;
}

ModelSpec Llama31_8B() {
  ModelSpec c = Shape("llama-3.1-8b", 128256, 4096, 14336, 32, 32, 8, 131072, false);
  c.rope_theta = 500000.0;
  return c;
}

ModelSpec Llama2_7B() { return Shape("llama-2-7b", 32000, 4096, 11008, 32, 32, 32, 4096, false); }

ModelSpec SmolLM2_135M() {
  ModelSpec c = Shape("smollm2-135m", 49152, 576, 1536, 30, 9, 3, 8192, true);
  c.rope_theta = 100000.0;
  return c;
}

}  // namespace tpserve
