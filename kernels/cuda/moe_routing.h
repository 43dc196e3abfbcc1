// The router's rule for one token (kernels/expert_routing.h's RouteTokens) as one function the
// CUDA backend's routing kernel runs per token (moe_kernels.cu) and the host runs in its test
// (moe_routing_test.cc: the same ids and weights as RouteTokens, bit for bit, on ties, NaNs,
// groups, correction biases, logit selection, renormalization and scaling).
//
//   const RoutingRule rule = RoutingRuleOf(routing);       // host
//   RouteToken(rule, logits + t * E, bias, ids + t * k, weights + t * k);
//
// The same operations in the same order and precision as RouteTokens: f32 throughout, the
// softmax's maximum and sum in expert order, scores recomputed where RouteTokens keeps them
// (the same expression gives the same float), the top-k by repeated selection in RouteTokens'
// total order (larger first, NaN last, then the lower id: the unique sorted prefix that its
// partial_sort also gives). The one difference on the device is exp: CUDA's expf is within 2
// ulp of the exact value, glibc's expf within 1, so a weight may differ from the CPU's in its
// last bits and a choice only between selection values that close (documented in README.md).
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MOE_ROUTING_H_
#define TPSERVE_KERNELS_CUDA_MOE_ROUTING_H_

#include <cmath>
#include <cstdint>

#include "kernels/cuda/host_device.h"

#ifndef __CUDACC__
#include <string>

#include "kernels/expert_routing.h"
#endif

namespace tpserve::cuda {

// Groups a token's choice may be limited to (DeepSeek-V3: 8): the kernel keeps their scores in
// registers.
inline constexpr int32_t kMaxRoutingGroups = 64;

// ExpertRouting's fields, as a plain struct a kernel takes by value.
struct RoutingRule {
  int32_t num_experts = 0;
  int32_t top_k = 0;
  int32_t num_groups = 1;
  int32_t top_groups = 1;
  bool softmax = true;  // else sigmoid
  bool renormalize = false;
  bool select_on_logits = false;
  float scaling = 1.0f;
};

// llama.cpp's clamp of the renormalizing sum (expert_routing.cc's kMinWeightSum).
inline constexpr float kMinRoutingWeightSum = 6.103515625e-5f;

TP_HD float RoutingExp(float v) {
#if defined(__CUDA_ARCH__)
  return expf(v);
#else
  return std::exp(v);
#endif
}

// a ranks before b: the larger value first, NaN last, then the lower id (RouteTokens' Before).
TP_HD bool RanksBefore(float a, int32_t ia, float b, int32_t ib) {
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// One token's logits l[num_experts] and what its rule derives from them.
struct TokenScores {
  const RoutingRule& r;
  const float* l;
  const float* bias;  // correction bias [num_experts] or nullptr
  float max = 0.0f;   // softmax only
  float sum = 1.0f;

  TP_HD TokenScores(const RoutingRule& rule, const float* logits, const float* correction_bias)
      : r(rule), l(logits), bias(correction_bias) {
    if (!r.softmax) return;
    max = -INFINITY;
    for (int32_t e = 0; e < r.num_experts; ++e) max = max < l[e] ? l[e] : max;  // std::max
    sum = 0.0f;
    for (int32_t e = 0; e < r.num_experts; ++e) sum += RoutingExp(l[e] - max);
  }
  TP_HD float Score(int32_t e) const {
    return r.softmax ? RoutingExp(l[e] - max) / sum : 1.0f / (1.0f + RoutingExp(-l[e]));
  }
  TP_HD float Select(int32_t e) const {
    float s = r.select_on_logits ? l[e] : Score(e);
    if (bias != nullptr) s += bias[e];
    return s;
  }
};

// The group's score: the sum of its two best selection values (RouteTokens' order).
TP_HD float GroupScore(const TokenScores& t, int32_t g, int32_t per_group) {
  const int32_t first = g * per_group;
  int32_t best = first;
  for (int32_t e = first + 1; e < first + per_group; ++e) {
    if (RanksBefore(t.Select(e), e, t.Select(best), best)) best = e;
  }
  int32_t second = best == first ? first + 1 : first;
  for (int32_t e = first; e < first + per_group; ++e) {
    if (e != best && RanksBefore(t.Select(e), e, t.Select(second), second)) second = e;
  }
  return t.Select(best) + t.Select(second);
}

// ids[top_k] (best first) and weights[top_k] of one token, exactly RouteTokens' rule.
// REQUIRES: RoutingRuleProblem(r) empty (host side); per group at least two experts.
TP_HD void RouteToken(const RoutingRule& r, const float* logits, const float* correction_bias,
                      int32_t* ids, float* weights) {
  const TokenScores t(r, logits, correction_bias);
  // The groups whose experts are eligible: those fewer than top_groups groups rank before.
  uint64_t kept = ~uint64_t{0};
  const int32_t per_group = r.num_experts / r.num_groups;
  if (r.num_groups > 1) {
    float group_score[kMaxRoutingGroups];
    for (int32_t g = 0; g < r.num_groups; ++g) group_score[g] = GroupScore(t, g, per_group);
    kept = 0;
    for (int32_t g = 0; g < r.num_groups; ++g) {
      int32_t ahead = 0;
      for (int32_t h = 0; h < r.num_groups; ++h) {
        ahead += RanksBefore(group_score[h], h, group_score[g], g) ? 1 : 0;
      }
      if (ahead < r.top_groups) kept |= uint64_t{1} << g;
    }
  }
  // The j-th choice: the eligible expert that ranks first among those ranking after choice j-1.
  for (int32_t j = 0; j < r.top_k; ++j) {
    const float prev_value = j > 0 ? t.Select(ids[j - 1]) : 0.0f;
    int32_t best = -1;
    float best_value = 0.0f;
    for (int32_t e = 0; e < r.num_experts; ++e) {
      if (((kept >> (e / per_group)) & 1) == 0) continue;
      const float v = t.Select(e);
      if (j > 0 && !RanksBefore(prev_value, ids[j - 1], v, e)) continue;
      if (best < 0 || RanksBefore(v, e, best_value, best)) {
        best = e;
        best_value = v;
      }
    }
    ids[j] = best;
  }
  float sum = 0.0f;
  for (int32_t j = 0; j < r.top_k; ++j) {
    weights[j] = t.Score(ids[j]);
    sum += weights[j];
  }
  // std::max(sum, min) as RouteTokens: a NaN sum stays NaN.
  const float denom = r.renormalize ? (sum < kMinRoutingWeightSum ? kMinRoutingWeightSum : sum)
                                    : 1.0f;
  for (int32_t j = 0; j < r.top_k; ++j) weights[j] = weights[j] / denom * r.scaling;
}

#ifndef __CUDACC__

inline RoutingRule RoutingRuleOf(const ExpertRouting& routing) {
  RoutingRule r;
  r.num_experts = routing.num_experts;
  r.top_k = routing.top_k;
  r.num_groups = routing.num_groups;
  r.top_groups = routing.top_groups;
  r.softmax = routing.score == RoutingScore::kSoftmax;
  r.renormalize = routing.renormalize;
  r.select_on_logits = routing.select_on_logits;
  r.scaling = routing.scaling;
  return r;
}

// Empty when the kernel applies `routing`; else why not (ExpertRoutingProblem's reasons, and
// more than kMaxRoutingGroups groups).
inline std::string RoutingRuleProblem(const ExpertRouting& routing) {
  std::string problem = ExpertRoutingProblem(routing);
  if (problem.empty() && routing.num_groups > kMaxRoutingGroups) {
    problem = "num_groups " + std::to_string(routing.num_groups) + " exceeds the " +
              std::to_string(kMaxRoutingGroups) + " groups the CUDA routing kernel keeps";
  }
  return problem;
}

#endif  // __CUDACC__

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MOE_ROUTING_H_
