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

TEST(MetricsTest, EscapesLabelValues) {
  MetricsRegistry r;
  r.GetCounter("t_total", "x", {{"code", "a\"b\\c\nd"}})->Add();
  EXPECT_NE(r.Render().find("t_total{code=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos)
      << r.Render();
}

}  // namespace
}  // namespace tpserve
