// Times the three steps a serving benchmark quotes, on any backend: a long prefill, decode at
// batch 1 and decode at a larger batch, each with warm-up runs first and per-step wall times
// kept so the caller reports medians. Used by bench/gpu_bench.cc.
//
//   TimingOptions t{.prefill_tokens = 2048, .context_tokens = 1024, .batch = 32};
//   auto cache = KvCache::Create(model->KvShape(TimingKvBlocks(t), t.block_size_tokens, kv),
//                                backend);
//   TP_RETURN_IF_ERROR(FillKvCache(backend, **cache, /*seed=*/1));
//   TP_ASSIGN_OR_RETURN(ModelTimings times, TimeModel(*model, backend, **cache, t));
//
// A step's time is the wall time of LlamaModel::Forward, which ends with the logits on the host
// and the backend synchronised: what a serving step costs, launches and host work included.
// Decoding sequences attend to `context_tokens` cached positions (random finite values written
// by FillKvCache, each sequence in blocks of its own) plus the steps of the run so far.
// Threading: as the model and backend (one caller).
#ifndef TPSERVE_BENCH_MODEL_TIMINGS_H_
#define TPSERVE_BENCH_MODEL_TIMINGS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "worker/kv_cache.h"
#include "worker/llama_model.h"

namespace tpserve {

struct TimingOptions {
  int64_t prefill_tokens = 2048;
  int64_t context_tokens = 1024;  // already cached for each decoding sequence
  int64_t batch = 32;             // sequences of the batched decode (batch 1 always runs too)
  int64_t decode_steps = 16;      // steps per decode run
  int warmup = 2;                 // untimed runs before the timed ones
  int runs = 5;                   // timed runs
  int64_t block_size_tokens = 16;
  uint64_t seed = 1;  // token ids
};

// Wall seconds of each timed step.
struct StepTimes {
  std::vector<double> seconds;
  double Median() const;  // 0 when empty
  double Min() const;
  double Max() const;
};

struct ModelTimings {
  StepTimes prefill;          // one per run
  StepTimes decode_one;       // decode_steps per run, batch 1
  StepTimes decode_batch;     // decode_steps per run, `batch` sequences
  bool logits_finite = true;  // every timed step's logits
};

// KV blocks the timings use: the prefill's, and 1 + batch decoding sequences'.
int64_t TimingKvBlocks(const TimingOptions& options);
// Largest step (tokens) and most logit rows of one step, for LlamaLoadOptions.
int64_t TimingMaxStepTokens(const TimingOptions& options);
int64_t TimingMaxLogitRows(const TimingOptions& options);

// Writes random finite values (|x| <= 1, in the cache's dtype) over every layer's K and V pools.
absl::Status FillKvCache(Backend& backend, KvCache& cache, uint64_t seed);

// INVALID_ARGUMENT naming the field for non-positive sizes or a cache smaller than
// TimingKvBlocks; the model's and backend's errors otherwise.
absl::StatusOr<ModelTimings> TimeModel(LlamaModel& model, Backend& backend, KvCache& cache,
                                       const TimingOptions& options);

}  // namespace tpserve

#endif  // TPSERVE_BENCH_MODEL_TIMINGS_H_
