// Renders memory plans for people: a per-GPU table readable at a glance (what each byte is
// for, what is left, how many users fit, roofline figures with their constants). The same
// numbers for tools are in plan_json.h. Used by the `vram` calculator.
//
//   Roofline roofline = EstimateRoofline(plan, RooflineAssumptions{});
//   std::cout << RenderPlanTable(plan, roofline);
//
// Thread-safe: pure functions.
#ifndef TPSERVE_PLANNER_PLAN_REPORT_H_
#define TPSERVE_PLANNER_PLAN_REPORT_H_

#include <string>
#include <vector>

#include "planner/fit.h"
#include "planner/memory_plan.h"
#include "planner/roofline.h"

namespace tpserve {

std::string RenderPlanTable(const MemoryPlan& plan, const Roofline& roofline);
// For a model with multi-head latent attention (or a plan with data-parallel attention) on
// several ranks of one stage: the plan's weights and KV capacity beside those of the other
// attention layout (split by heads, the cache copied on every rank; or --attention_dp, each
// rank caching its own sequences), each from PlanMemory. "" otherwise.
std::string AttentionLayoutLines(const MemoryPlan& plan);
std::string RenderFit(const FitResult& fit);
std::string RenderSuggestions(const std::vector<Suggestion>& suggestions);

// 1234567 -> "1,234,567".
std::string WithThousands(int64_t value);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_PLAN_REPORT_H_
