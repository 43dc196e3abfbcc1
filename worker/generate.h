// Greedy single-sequence generation over a LlamaModel: prefill a prompt (in chunks of at most
// max_tokens_per_step), then decode one token per step, always taking the highest logit (the
// lowest id on ties, as llama.cpp's greedy sampler does). For tests and benchmarks; serving
// batches many sequences through the scheduler instead.
//
//   TP_ASSIGN_OR_RETURN(GenerateResult r, GenerateGreedy(*model, cache.get(), prompt, {32}));
//   // r.tokens holds the 32 new ids
//
// The sequence uses KV blocks 0, 1, 2, ... of `cache` (no block manager needed).
// Threading: like LlamaModel::Forward; in tensor parallelism every rank runs it with the same
// prompt and options: the sampling rank (kSamplingRank) chooses each token and broadcasts it,
// so all ranks return the same tokens (prompt_last_logits only there).
#ifndef TPSERVE_WORKER_GENERATE_H_
#define TPSERVE_WORKER_GENERATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/step_budget.h"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"

namespace tpserve {

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  int64_t prefill_chunk_tokens = kCpuMaxTokensPerStep;  // capped by the model's budget
  bool stop_at_eos = false;            // stop after the config's eos (or an extra eos) id
};

struct GenerateResult {
  std::vector<int32_t> tokens;            // the generated ids
  // [vocab] logits after the last prompt token (on the sampling rank; the others' are zeros)
  std::vector<float> prompt_last_logits;
};

// INVALID_ARGUMENT for an empty prompt or when prompt + max_new_tokens exceeds the cache's
// capacity; any Forward error as returned.
absl::StatusOr<GenerateResult> GenerateGreedy(LlamaModel& model, KvCache* cache,
                                              absl::Span<const int32_t> prompt,
                                              const GenerateOptions& options);

// Index of the largest value; the first one on ties. REQUIRES: !values.empty().
int32_t ArgMax(absl::Span<const float> values);

}  // namespace tpserve

#endif  // TPSERVE_WORKER_GENERATE_H_
