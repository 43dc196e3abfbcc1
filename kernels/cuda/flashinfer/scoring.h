// How one layer's attention scores its keys (Backend::AttentionParams: a sliding window, a logit
// soft-cap) maps onto FlashInfer's kernels, and what a step's plan must avoid so that every
// layer of the model can run on it. Plain C++ (built and tested everywhere).
//
//   const FiScoring s = FiScoringFor(/*window=*/4096, /*softcap=*/0.0f);
//   // s.variant == FiVariant::kWindow, s.window_left == 4095
//
// FlashInfer's conventions (pinned flashinfer-python 0.7.4, include/flashinfer/attention/):
//   * window_left counts the keys left of the query that it sees: variants.cuh's
//     DefaultAttention keeps key kv_idx for query qo_idx when
//     kv_idx + qo_len + window_left >= kv_len + qo_idx, i.e. kv_idx >= p - window_left at
//     position p = kv_len - qo_len + qo_idx. Ours keeps kv_idx >= p - window + 1, so
//     window_left = window - 1; -1 (no window) makes the variant take window_left = kv_len.
//   * the soft-cap is a template flag of DefaultAttention (use_logits_soft_cap): the variant
//     scores tanh(qk * sm_scale / cap) and folds cap into the exponent's scale (cap * tanh(..)).
//     It divides by the cap, so a cap of 0 needs the variant without the flag.
//   * the sliding-window mask is the template flag use_sliding_window, but the FA2 kernel
//     (prefill.cuh) skips key tiles left of every variant's window_left, and with split keys
//     lays out its partials by ceil(min(kv_len, window_left + CTA_TILE_Q) / chunk) chunks,
//     which the plan (scheduler.cuh PrefillSplitQOKVIndptr) must have counted with the same
//     window_left. A plan shared by windowed and full layers therefore does not split keys.
// What we instantiate (launch.h): FA2 with no window and cap, with a window, and with a window
// and a cap (window_left -1 for a cap alone); FA3 with neither.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_FLASHINFER_SCORING_H_
#define TPSERVE_KERNELS_CUDA_FLASHINFER_SCORING_H_

#include <cstdint>

namespace tpserve::cuda::fi {

// The FA2 attention variants built: flashinfer::DefaultAttention<custom_mask, sliding_window,
// logits_soft_cap, alibi> = <false, false, false, false>, <false, true, false, false> and
// <false, true, true, false>.
enum class FiVariant : int32_t {
  kPlain,
  kWindow,
  kWindowSoftCap,
};

// A layer's scoring in FlashInfer's terms.
struct FiScoring {
  FiVariant variant = FiVariant::kPlain;
  int32_t window_left = -1;      // keys left of the query it sees; -1: all
  float logits_soft_cap = 0.0f;  // > 0 with kWindowSoftCap only
};

// REQUIRES: window >= 0, softcap >= 0 (0: none). A window beyond int32 sees every key FlashInfer
// can hold, so it maps to no window.
FiScoring FiScoringFor(int64_t window, float softcap);

// Whether FA3 (built with StandardAttention and no window) computes this scoring.
bool Fa3Serves(const FiScoring& scoring);

// What a step's plan must avoid so that it serves every layer seen so far.
struct PlanConstraints {
  bool no_fa3 = false;         // some layer has a window or a cap (FA3 is built plain)
  bool no_split_keys = false;  // some layer has a window (see the header comment)

  bool Covers(const PlanConstraints& other) const {
    return (no_fa3 || !other.no_fa3) && (no_split_keys || !other.no_split_keys);
  }
  PlanConstraints With(const PlanConstraints& other) const {
    return {no_fa3 || other.no_fa3, no_split_keys || other.no_split_keys};
  }
};

PlanConstraints PlanConstraintsFor(const FiScoring& scoring);

// Whether a plan that routed rows through FA3 (`uses_fa3`) and split keys (`splits_keys`) runs
// a layer scored as `scoring` correctly.
bool PlanServes(bool uses_fa3, bool splits_keys, const FiScoring& scoring);

}  // namespace tpserve::cuda::fi

#endif  // TPSERVE_KERNELS_CUDA_FLASHINFER_SCORING_H_
