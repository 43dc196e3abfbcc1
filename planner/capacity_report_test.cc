#include "planner/capacity_report.h"

#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "planner/test_models.h"

namespace tpserve {
namespace {

PlanInputs Llama405B(int tp, const char* weights) {
  PlanInputs in;
  in.model = Llama31_405B();
  in.weights = *WeightFormatsPreset(weights);
  in.device = *GpuPreset("h100-80g");
  in.tp = tp;
  in.max_context_tokens = 8192;
  in.target_concurrent_sequences = 10;
  return in;
}

const MemorySegment* Find(const std::vector<MemorySegment>& segments, std::string_view name) {
  for (const MemorySegment& s : segments) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(CapacityReportTest, SegmentsAreThePlansLinesBottomToTop) {
  const MemoryPlan plan = *PlanMemory(Llama405B(8, "fp8"));
  ASSERT_TRUE(plan.meets_target);
  const std::vector<MemorySegment> segments = MemorySegments(plan);
  ASSERT_GE(segments.size(), 4u);
  EXPECT_EQ(segments.front().name, "runtime reserve");
  EXPECT_EQ(segments.back().name, "safety margin");
  const StageMemory& m = plan.stages[0];
  EXPECT_EQ(segments.front().bytes, m.runtime_reserve_bytes);
  // Every role of the sharding table, as many bytes as the rank holds of it.
  for (const RoleShard& r : plan.sharding.stages[0].roles) {
    const MemorySegment* s =
        Find(segments, std::string("weights: ") + std::string(TensorRoleName(r.role)));
    if (r.bytes_per_rank == 0) {
      EXPECT_EQ(s, nullptr);
    } else {
      ASSERT_NE(s, nullptr) << TensorRoleName(r.role);
      EXPECT_EQ(s->bytes, r.bytes_per_rank);
    }
  }
  // The pool: the blocks the block manager gets, each of the KV cache's own size.
  const MemorySegment* kv = Find(segments, "KV cache pool");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->bytes, plan.num_kv_blocks * KvBytesPerToken(plan.inputs) * 16);
  EXPECT_EQ(Find(segments, "draft model weights"), nullptr);
  EXPECT_EQ(std::string(kv->color), "#f2c12e");
}

TEST(CapacityReportTest, AnOverfullPlanStacksItsFixedPartsAboveTheDevice) {
  const MemoryPlan plan = *PlanMemory(Llama405B(4, "fp8"));
  ASSERT_FALSE(plan.weights_fit);
  const std::vector<MemorySegment> segments = MemorySegments(plan);
  EXPECT_EQ(Find(segments, "KV cache pool"), nullptr);
  EXPECT_EQ(Find(segments, "unallocated"), nullptr);
  int64_t total = 0;
  for (const MemorySegment& s : segments) total += s.bytes;
  EXPECT_GT(total, plan.stages[0].device_bytes);
  EXPECT_GT(TargetNeedBytes(plan.stages[0]), total);  // and the target's KV on top
}

TEST(CapacityReportTest, TheBarOfAPipelineIsItsBindingStage) {
  PlanInputs in = Llama405B(8, "fp8");
  in.pp = 2;
  const MemoryPlan plan = *PlanMemory(in);
  const StageMemory& binding = BindingStage(plan);
  for (const StageMemory& m : plan.stages) {
    EXPECT_LE(binding.available_for_kv_bytes, m.available_for_kv_bytes);
  }
  // The last stage holds the LM head: less room for KV than the first.
  EXPECT_EQ(binding.stage, 1);
}

TEST(CapacityReportTest, CapacityCurveReplansAtEachContext) {
  const PlanInputs in = Llama405B(8, "fp8");
  const CapacityCurve curve = *PlanCapacityCurve(in, "8 x h100");
  std::vector<int64_t> contexts;
  for (const CapacityPoint& p : curve.points) contexts.push_back(p.context_tokens);
  EXPECT_EQ(contexts, (std::vector<int64_t>{1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072}));
  for (size_t i = 1; i < curve.points.size(); ++i) {
    EXPECT_LE(curve.points[i].max_sequences, curve.points[i - 1].max_sequences);
  }
  for (const CapacityPoint& p : curve.points) {
    PlanInputs at = in;
    at.max_context_tokens = p.context_tokens;
    EXPECT_EQ(p.max_sequences, PlanMemory(at)->max_concurrent_sequences) << p.context_tokens;
  }
  // An off-grid target context is a point of its own.
  PlanInputs odd = in;
  odd.max_context_tokens = 10000;
  const CapacityCurve with_target = *PlanCapacityCurve(odd, "x");
  EXPECT_EQ(with_target.points.size(), 9u);
  EXPECT_EQ(with_target.points[4].context_tokens, 10000);
  EXPECT_EQ(with_target.points[4].max_sequences, PlanMemory(odd)->max_concurrent_sequences);
}

CapacityReport ThreeLayouts() {
  CapacityReport report;
  report.version = "9.9.9";
  report.command_line = "vram --model=405b --gpus=4,8,8x2 --note='<&>'";
  report.text_report = "VERDICT   a < b & c\n";
  for (auto [tp, pp] : {std::pair{4, 1}, std::pair{8, 1}, std::pair{8, 2}}) {
    PlanInputs in = Llama405B(tp, "fp8");
    in.pp = pp;
    const MemoryPlan plan = *PlanMemory(in);
    report.layouts.push_back(
        {"layout " + std::to_string(tp * pp), plan, EstimateRoofline(plan, {})});
    report.curves.push_back(*PlanCapacityCurve(in, report.layouts.back().label));
  }
  return report;
}

int Count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(CapacityReportTest, ChartsHaveOneBarAndOneLinePerLayout) {
  const CapacityReport report = ThreeLayouts();
  const std::string memory = RenderMemorySvg(report);
  EXPECT_EQ(Count(memory, "<g class=\"bar\""), 3);
  EXPECT_EQ(Count(memory, "<line class=\"capacity\""), 3);
  EXPECT_EQ(Count(memory, "<line class=\"target\""), 3);
  EXPECT_EQ(memory.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  const std::string capacity = RenderCapacitySvg(report);
  EXPECT_EQ(Count(capacity, "<g class=\"series\""), 3);
  EXPECT_EQ(Count(capacity, "<circle class=\"point\""), 3 * 8);
  EXPECT_EQ(Count(capacity, "<g class=\"target\" data-context=\"8192\" data-sequences=\"10\""), 1);
  const std::string roofline = RenderRooflineSvg(report);
  EXPECT_EQ(Count(roofline, "<rect class=\"speed\""), 3 * 3);
}

TEST(CapacityReportTest, PageIsSelfContainedAndEscapesWhatItQuotes) {
  const std::string html = RenderCapacityReportHtml(ThreeLayouts());
  EXPECT_EQ(Count(html, "<svg "), 3);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(Count(html, "https?://"), 3);  // the SVG namespace, once per chart; nothing fetched
  EXPECT_NE(html.find("tpserve 9.9.9"), std::string::npos);
  EXPECT_NE(html.find("vram --model=405b --gpus=4,8,8x2 --note=&#39;&lt;&amp;&gt;&#39;"),
            std::string::npos);
  EXPECT_NE(html.find("VERDICT   a &lt; b &amp; c"), std::string::npos);
  EXPECT_EQ(html.find("<&>"), std::string::npos);
}

TEST(CapacityReportTest, XmlEscapeCoversTheFiveSpecialCharacters) {
  EXPECT_EQ(XmlEscape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
  EXPECT_EQ(XmlEscape("plain 1,234"), "plain 1,234");
}

}  // namespace
}  // namespace tpserve
