#include "kernels/expert_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/str_cat.h"
#include "kernels/check.h"

namespace tpserve {
namespace {

// llama.cpp's clamp of the renormalizing sum (the smallest normal f16).
constexpr float kMinWeightSum = 6.103515625e-5f;

// a ranks before b: larger value first, NaN last, then the lower id.
bool Before(float a, int32_t ia, float b, int32_t ib) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// The `k` best of `candidates` (ids into values), best first, into out.
void TopK(const float* values, std::vector<int32_t> candidates, int32_t k, int32_t* out) {
  std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(),
                    [&](int32_t a, int32_t b) { return Before(values[a], a, values[b], b); });
  std::copy(candidates.begin(), candidates.begin() + k, out);
}

std::vector<int32_t> Range(int32_t begin, int32_t end) {
  std::vector<int32_t> ids(end - begin);
  for (int32_t i = begin; i < end; ++i) ids[i - begin] = i;
  return ids;
}

}  // namespace

std::string_view RoutingScoreName(RoutingScore s) {
  return s == RoutingScore::kSoftmax ? "softmax" : "sigmoid";
}

std::string ExpertRoutingProblem(const ExpertRouting& r) {
  if (r.num_experts < 1) return StrCat("num_experts ", r.num_experts, " is below 1");
  if (r.top_k < 1 || r.top_k > r.num_experts) {
    return StrCat("top_k ", r.top_k, " is outside [1, num_experts ", r.num_experts, "]");
  }
  if (r.num_groups < 1 || r.num_experts % r.num_groups != 0) {
    return StrCat("num_groups ", r.num_groups, " does not divide num_experts ", r.num_experts);
  }
  if (r.num_groups > 1) {
    if (r.top_groups < 1 || r.top_groups > r.num_groups) {
      return StrCat("top_groups ", r.top_groups, " is outside [1, num_groups ", r.num_groups, "]");
    }
    const int32_t per_group = r.num_experts / r.num_groups;
    if (per_group < 2) {
      return StrCat("num_groups ", r.num_groups, " leaves ", per_group,
                    " expert per group; a group is scored by its best two");
    }
    if (r.top_groups * per_group < r.top_k) {
      return StrCat("top_k ", r.top_k, " exceeds the ", r.top_groups * per_group,
                    " experts of top_groups ", r.top_groups, " groups");
    }
  }
  if (!std::isfinite(r.scaling) || r.scaling <= 0.0f) {
    return StrCat("scaling ", r.scaling, " is not a positive finite number");
  }
  return "";
}

std::string ExpertRoutingString(const ExpertRouting& r) {
  std::string s = StrCat(std::string(RoutingScoreName(r.score)), " top-", r.top_k, " of ",
                         r.num_experts);
  if (r.num_groups > 1) s += StrCat(" in the best ", r.top_groups, " of ", r.num_groups, " groups");
  if (r.select_on_logits) s += ", chosen on the logits";
  if (r.renormalize) s += ", renormalized";
  if (r.scaling != 1.0f) s += StrCat(", scaled by ", r.scaling);
  if (r.weight_on_input) s += ", weights on the experts' inputs";
  return s;
}

void RouteTokens(const ExpertRouting& r, const float* logits, int64_t tokens,
                 const float* correction_bias, int32_t* ids, float* weights) {
  TP_CHECK(ExpertRoutingProblem(r).empty(), "RouteTokens: invalid routing rule");
  const int32_t e_count = r.num_experts, k = r.top_k;
  std::vector<float> score(e_count), select(e_count);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits + t * e_count;
    if (r.score == RoutingScore::kSoftmax) {
      float max = -std::numeric_limits<float>::infinity();
      for (int32_t e = 0; e < e_count; ++e) max = std::max(max, l[e]);
      float sum = 0.0f;
      for (int32_t e = 0; e < e_count; ++e) {
        score[e] = std::exp(l[e] - max);
        sum += score[e];
      }
      for (int32_t e = 0; e < e_count; ++e) score[e] /= sum;
    } else {
      for (int32_t e = 0; e < e_count; ++e) score[e] = 1.0f / (1.0f + std::exp(-l[e]));
    }
    for (int32_t e = 0; e < e_count; ++e) {
      select[e] = r.select_on_logits ? l[e] : score[e];
      if (correction_bias != nullptr) select[e] += correction_bias[e];
    }
    std::vector<int32_t> eligible = Range(0, e_count);
    if (r.num_groups > 1) {
      const int32_t per_group = e_count / r.num_groups;
      std::vector<float> group_score(r.num_groups);
      for (int32_t g = 0; g < r.num_groups; ++g) {
        int32_t best[2];
        TopK(select.data(), Range(g * per_group, (g + 1) * per_group), 2, best);
        group_score[g] = select[best[0]] + select[best[1]];
      }
      std::vector<int32_t> kept(r.top_groups);
      TopK(group_score.data(), Range(0, r.num_groups), r.top_groups, kept.data());
      std::sort(kept.begin(), kept.end());
      eligible.clear();
      for (int32_t g : kept) {
        for (int32_t e = g * per_group; e < (g + 1) * per_group; ++e) eligible.push_back(e);
      }
    }
    int32_t* chosen = ids + t * k;
    float* w = weights + t * k;
    TopK(select.data(), std::move(eligible), k, chosen);
    float sum = 0.0f;
    for (int32_t j = 0; j < k; ++j) {
      w[j] = score[chosen[j]];
      sum += w[j];
    }
    const float denom = r.renormalize ? std::max(sum, kMinWeightSum) : 1.0f;
    for (int32_t j = 0; j < k; ++j) w[j] = w[j] / denom * r.scaling;
  }
}

}  // namespace tpserve
