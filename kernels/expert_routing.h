// How a mixture-of-experts layer picks each token's experts and weighs their outputs: the one
// description of the rule that the model description (model/config.h) sets per family and every
// backend applies (Backend::RouteExperts), with the host reference (RouteTokens) the backends
// are checked against.
//
//   ExpertRouting r{.score = RoutingScore::kSoftmax, .num_experts = 8, .top_k = 2,
//                   .renormalize = true};                                   // Mixtral
//   RouteTokens(r, logits, /*tokens=*/t, /*correction_bias=*/nullptr, ids, weights);
//
// The rules, per token, over its router logits l[e] (f32, one per expert):
//   score        softmax(l) (Mixtral, Qwen MoE) or sigmoid(l) (DeepSeek-V3, GLM-4.5, Llama 4)
//   selection    score[e] + correction_bias[e] where the model has one (DeepSeek-V3's
//                e_score_correction_bias: used for choosing, never for weighting); Llama 4
//                selects on the logits themselves (the same order as its sigmoid scores)
//   groups       num_groups > 1 (DeepSeek-V3's n_group / topk_group): the experts cut into
//                num_groups equal groups, each group scored by the sum of its two best
//                selection values, only the best top_groups groups' experts eligible
//   choice       the top_k eligible experts by selection value, best first
//   weights      score[e] of each chosen expert; divided by their sum when `renormalize`
//                (Mixtral, Qwen3-MoE's norm_topk_prob; the sum clamped below at 2^-14 as
//                llama.cpp does); times `scaling` (DeepSeek-V3's routed_scaling_factor)
//   applied      to each chosen expert's output, the outputs summed (Mixtral, Qwen, GLM); or,
//                with `weight_on_input` (Llama 4), to its input: expert(w * x), the outputs
//                summed unweighted (Backend::MoeExperts takes it as its own argument)
// Ties (equal selection values, equal group scores) go to the lowest expert or group id, so the
// choice is deterministic and a token's routing never depends on the other tokens of its batch.
// Thread-safe: a value type and pure functions.
#ifndef TPSERVE_KERNELS_EXPERT_ROUTING_H_
#define TPSERVE_KERNELS_EXPERT_ROUTING_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace tpserve {

enum class RoutingScore : uint8_t {
  kSoftmax,  // over all experts' logits
  kSigmoid,  // of each logit on its own
};

std::string_view RoutingScoreName(RoutingScore s);

struct ExpertRouting {
  RoutingScore score = RoutingScore::kSoftmax;
  int32_t num_experts = 0;
  int32_t top_k = 0;
  int32_t num_groups = 1;  // 1: no group limit
  int32_t top_groups = 1;  // groups eligible when num_groups > 1
  bool renormalize = false;
  float scaling = 1.0f;
  bool select_on_logits = false;  // Llama 4
  bool weight_on_input = false;   // Llama 4: expert(w * x) rather than w * expert(x)

  friend bool operator==(const ExpertRouting&, const ExpertRouting&) = default;
};

// Empty when `r` is a rule RouteTokens can apply, else what is wrong, naming the field, its value
// and the bound ("top_k 9 exceeds num_experts 8"; groups that do not divide the experts, fewer
// eligible experts than top_k, a non-finite or non-positive scaling).
std::string ExpertRoutingProblem(const ExpertRouting& r);

// "softmax top-2 of 8, renormalized" (with groups, scaling, logit selection, weights on the
// inputs when set).
std::string ExpertRoutingString(const ExpertRouting& r);

// For each of `tokens` rows of `logits` (f32 [tokens, num_experts]): ids [tokens, top_k] (best
// first) and weights [tokens, top_k] by the rules above. correction_bias: f32 [num_experts] or
// nullptr. A NaN logit ranks below every number. REQUIRES: ExpertRoutingProblem(r) is empty.
void RouteTokens(const ExpertRouting& r, const float* logits, int64_t tokens,
                 const float* correction_bias, int32_t* ids, float* weights);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_EXPERT_ROUTING_H_
