// The capacity report a planner looks at: memory plans drawn as inline SVG in one
// self-contained HTML page (no script, nothing fetched when viewed). Every figure on it comes
// from the MemoryPlan the engine allocates from and its Roofline; the page draws them and
// prints the same text report `vram` prints, so picture and table cannot disagree.
//
//   CapacityReport report;
//   report.layouts.push_back({"8 x h100-80g (tp=8), fp8", plan, EstimateRoofline(plan, a)});
//   TP_ASSIGN_OR_RETURN(CapacityCurve curve, PlanCapacityCurve(plan.inputs, "8 x h100-80g"));
//   report.curves.push_back(curve);
//   std::string html = RenderCapacityReportHtml(report);
//
// The charts:
//   memory    one stacked bar per layout, one rank of its binding stage: reserve, weights by
//             role, step buffers, communicator, draft model, KV pool, unallocated, safety
//             margin; a dashed line at the device's memory and a marker at what the target
//             needs. Heights are bytes to scale (one scale for all bars).
//   capacity  concurrent sequences that fit (log scale) against context (1K .. the model's
//             maximum, log scale), one line per layout, the target marked.
//   roofline  per-user and aggregate decode tokens/s and time to first token per layout.
// Thread-safe: pure functions.
#ifndef TPSERVE_PLANNER_CAPACITY_REPORT_H_
#define TPSERVE_PLANNER_CAPACITY_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/memory_plan.h"
#include "planner/roofline.h"

namespace tpserve {

// One compared configuration: a GPU count and weights format, planned.
struct ReportLayout {
  std::string label;  // "8 x h100-80g (tp=8), fp8"
  MemoryPlan plan;
  Roofline roofline;
};

struct CapacityPoint {
  int64_t context_tokens = 0;
  int64_t max_sequences = 0;  // the plan's max_concurrent_sequences at that context
};

struct CapacityCurve {
  std::string label;
  std::vector<CapacityPoint> points;  // ascending context
};

struct CapacityReport {
  std::string version;       // tpserve's
  std::string command_line;  // what made the report, as typed
  std::vector<ReportLayout> layouts;
  std::vector<CapacityCurve> curves;  // one per layout, same order
  std::string text_report;            // what `vram` printed for the same request
};

// One segment of a memory bar: a line of the plan, in bytes on one rank.
struct MemorySegment {
  std::string name;   // "runtime reserve", "weights: q", "KV cache pool", ...
  std::string color;  // "#rrggbb"
  int64_t bytes = 0;
};

// The stage a layout's bar shows: the one with the least room for KV (stage 0 without
// pipeline stages).
const StageMemory& BindingStage(const MemoryPlan& plan);

// The bar's segments bottom to top, zero-byte lines left out. They sum to the device's bytes
// when the plan's fixed parts fit (unallocated >= 0), to the fixed parts' bytes when not.
std::vector<MemorySegment> MemorySegments(const MemoryPlan& plan);

// What one rank needs for the target: everything but the KV pool (safety margin included)
// plus the KV of the target sequences.
int64_t TargetNeedBytes(const StageMemory& m);

// Re-plans `inputs` at contexts 1,024, 2,048, ... up to the model's maximum (and at the
// inputs' own context), keeping everything else. Errors as PlanMemory's.
absl::StatusOr<CapacityCurve> PlanCapacityCurve(const PlanInputs& inputs, std::string label);

std::string RenderMemorySvg(const CapacityReport& report);
std::string RenderCapacitySvg(const CapacityReport& report);
std::string RenderRooflineSvg(const CapacityReport& report);
std::string RenderCapacityReportHtml(const CapacityReport& report);

// &, <, >, " and ' as XML entities.
std::string XmlEscape(std::string_view text);

}  // namespace tpserve

#endif  // TPSERVE_PLANNER_CAPACITY_REPORT_H_
