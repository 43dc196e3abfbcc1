#include "coordinator/metrics.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(MetricsTest, RendersCountersGaugesAndCumulativeHistogramsInTheTextFormat) {
  MetricsRegistry r;
  r.GetCounter("t_requests_total", "Requests.", {{"finish_reason", "stop"}})->Add(2);
  r.GetCounter("t_requests_total", "Requests.", {{"finish_reason", "length"}})->Add();
  r.GetCounter("t_requests_total", "ignored", {{"finish_reason", "stop"}})->Add();  // same series
  r.GetCounter("t_requests_total", "Requests.", {{"finish_reason", "stop"}})->Add(-5);  // ignored
  r.AddGaugeFunction("t_queue", "Queue \"depth\"\nnow.", [] { return 7.0; });
  Histogram* h = r.GetHistogram("t_latency_seconds", "Latency.", {0.1, 1.0});
  h->Observe(0.05);
  h->Observe(0.1);  // le is inclusive
  h->Observe(0.5);
  h->Observe(3.0);
  EXPECT_EQ(r.Render(),
            "# HELP t_latency_seconds Latency.\n"
            "# TYPE t_latency_seconds histogram\n"
            "t_latency_seconds_bucket{le=\"0.1\"} 2\n"
            "t_latency_seconds_bucket{le=\"1\"} 3\n"
            "t_latency_seconds_bucket{le=\"+Inf\"} 4\n"
            "t_latency_seconds_sum 3.65\n"
            "t_latency_seconds_count 4\n"
            "# HELP t_queue Queue \"depth\"\\nnow.\n"
            "# TYPE t_queue gauge\n"
            "t_queue 7\n"
            "# HELP t_requests_total Requests.\n"
            "# TYPE t_requests_total counter\n"
            "t_requests_total{finish_reason=\"stop\"} 3\n"
            "t_requests_total{finish_reason=\"length\"} 1\n");
}

// Counters past a million keep every digit (six significant digits printed 352,321,536 as
// 3.52322e+08, so a scrape saw it move in steps of 1000).
TEST(MetricsTest, LargeCountersRenderEveryDigit) {
  MetricsRegistry r;
  r.GetCounter("t_bytes_total", "Bytes.")->Add(352'321'536);
  r.GetCounter("t_bytes_total", "Bytes.")->Add(1);
  r.AddGaugeFunction("t_ratio", "Ratio.", [] { return 0.1 + 0.2; });
  const std::string text = r.Render();
  EXPECT_NE(text.find("t_bytes_total 352321537\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_ratio 0.30000000000000004\n"), std::string::npos) << text;
}

TEST(MetricsTest, EscapesLabelValues) {
  MetricsRegistry r;
  r.GetCounter("t_total", "x", {{"code", "a\"b\\c\nd"}})->Add();
  EXPECT_NE(r.Render().find("t_total{code=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos)
      << r.Render();
}

}  // namespace
}  // namespace tpserve
