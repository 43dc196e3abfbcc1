// Memory plans, fits and suggestions as JSON for tools (the `vram --json` output): every
// byte count of the table, the inputs and every constant the roofline used.
//
//   nlohmann::json j = PlanToJson(plan, EstimateRoofline(plan, RooflineAssumptions{}));
//   int64_t blocks = j["num_kv_blocks"];
//
// Byte counts are integers; times in seconds; rates in bytes/s or FLOP/s.
// Thread-safe: pure functions.
#ifndef TPSERVE_PLANNER_PLAN_JSON_H_
#define TPSERVE_PLANNER_PLAN_JSON_H_

#include <vector>

#include "nlohmann/json.hpp"
#include "planner/fit.h"
#include "planner/memory_plan.h"
#include "planner/roofline.h"

namespace tpserve {

nlohmann::json PlanToJson(const MemoryPlan& plan, const Roofline& roofline);
// {"found", "weights_only_min_gpus", "rejected", "plan" (PlanToJson, when found)}.
nlohmann::json FitToJson(const FitResult& fit, const RooflineAssumptions& assumptions);
// [{"change", "plan"}...]; each plan without its roofline.
nlohmann::json SuggestionsToJson(const std::vector<Suggestion>& suggestions);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_PLAN_JSON_H_
