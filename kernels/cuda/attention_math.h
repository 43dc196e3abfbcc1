// The softmax algebra of the SIMT attention kernels (attention_kernels.cu) as TP_HD functions,
// so the CPU runs the same arithmetic over the same schedules (attention_math_test, against
// the CPU backend's attention):
//   decode: the keys of a row are cut into `num_splits` ranges (SplitKeys); each split keeps
//     its max score m_s, l_s = sum exp(s - m_s) and o_s = sum exp(s - m_s) v; the combine
//     weights them by exp(m_s - max m) (CombineWeight): out = sum w_s o_s / sum w_s l_s;
//   prefill: tiles of keys fold into a running (m, l, o) online: m' = max(m, tile max), the
//     old sums scaled by Rescale(m, m'), the tile's terms exp(s - m') added.
// An empty split or a masked key has score -inf and weighs exactly 0 in every formula.
// A layer's own attention (Backend::AttentionParams): a sliding window moves a row's first key
// to WindowFirstKey (decode splits the keys from there; prefill masks keys before it), and a
// soft-cap maps every scaled score through SoftCapScore before the softmax.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_ATTENTION_MATH_H_
#define TPSERVE_KERNELS_CUDA_ATTENTION_MATH_H_

#include <cmath>
#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace tpserve::cuda {

// Keys [begin, begin + count) of split `split` of `num_splits` over `context` keys: equal
// ranges of ceil(context / num_splits), the last ones shorter or empty.
struct KeyRange {
  int64_t begin;
  int64_t count;
};
TP_HD KeyRange SplitKeys(int64_t context, int64_t num_splits, int64_t split) {
  const int64_t chunk = (context + num_splits - 1) / num_splits;
  const int64_t begin = split * chunk;
  const int64_t end = begin + chunk < context ? begin + chunk : context;
  return {begin, end > begin ? end - begin : 0};
}

// The first key a query at `position` attends to: position - window + 1 (not below 0) under a
// sliding window of `window` keys, 0 without one (window <= 0).
TP_HD int64_t WindowFirstKey(int64_t position, int64_t window) {
  if (window <= 0 || position < window) return 0;
  return position - window + 1;
}

// Whether key `key` is seen by a query at `position`: causal, and inside the window.
TP_HD bool KeyVisible(int64_t key, int64_t position, int64_t window) {
  return key <= position && key >= WindowFirstKey(position, window);
}

// A scaled score after the logit soft-cap: cap * tanh(score / cap) for cap > 0, else the
// score itself (the CPU backend's kernels/cpu/cpu_attention.cc).
TP_HD float SoftCapScore(float score, float cap) {
  return cap > 0.0f ? cap * tanhf(score / cap) : score;
}

// exp(score - max): a key's softmax numerator under the running max (0 for score = -inf).
TP_HD float ExpShifted(float score, float max) { return expf(score - max); }

// What sums taken under `old_max` are multiplied by when the max becomes `new_max` (0 when
// nothing was taken yet: old_max = -inf; 1 while every key so far was masked, new_max = -inf,
// as in a tile wholly before a row's sliding window: its sums are still 0).
TP_HD float Rescale(float old_max, float new_max) {
  return new_max == -INFINITY ? 1.0f : expf(old_max - new_max);
}

// The weight of a split with max score `split_max` in the combine over splits whose largest
// max is `max_of_maxes` (0 for an empty split).
TP_HD float CombineWeight(float split_max, float max_of_maxes) {
  return expf(split_max - max_of_maxes);
}

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ATTENTION_MATH_H_
