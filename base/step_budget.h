// The budget of new tokens per step (prefill chunks, decodes and draft tokens, summed over the
// sequences of one step), declared once. The scheduler fills steps up to it, the ranks size
// their step buffers and the CUDA backend its GEMM plans for it, and the memory plan counts
// those buffers at it, so `vram` and `launch` plan the same memory for the same target.
//
//   load.max_tokens_per_step = DefaultMaxTokensPerStep(/*gpu=*/true);  // 2048
//
// GPUs: 2048, vLLM's chunked-prefill default (`max_num_batched_tokens`): a prefill chunk of
// 2048 rows keeps an H100's tensor cores busy while one step stays a few tens of ms.
// CPUs: 512: this 2-core machine prefills ~280 tokens/s (docs/PERFORMANCE.md), so a 2048-token
// chunk would stall every other stream's next token for ~7 s; 512 keeps that under 2 s.
// The structs that carry the budget (SchedulerOptions, RankLoad, LlamaModel::Options, the
// draft proposer's options) default to the CPU figure; the cluster plan sets the GPU one.
#ifndef TPSERVE_BASE_STEP_BUDGET_H_
#define TPSERVE_BASE_STEP_BUDGET_H_

#include <cstdint>

namespace tpserve {

inline constexpr int64_t kCpuMaxTokensPerStep = 512;
inline constexpr int64_t kGpuMaxTokensPerStep = 2048;

constexpr int64_t DefaultMaxTokensPerStep(bool gpu) {
  return gpu ? kGpuMaxTokensPerStep : kCpuMaxTokensPerStep;
}

// A --max_tokens_per_step flag's value, 0 (or less: callers refuse negatives first) meaning
// the default for the device; launch and vram both resolve theirs here.
constexpr int64_t MaxTokensPerStepOr(int64_t requested, bool gpu) {
  return requested > 0 ? requested : DefaultMaxTokensPerStep(gpu);
}

}  // namespace tpserve

#endif  // TPSERVE_BASE_STEP_BUDGET_H_
