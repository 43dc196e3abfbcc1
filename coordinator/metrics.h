// A small Prometheus registry: counters, gauges and histograms, rendered in the text exposition
// format (version 0.0.4) that /metrics serves. No C++ Prometheus client is packaged in Debian
// 12, and the format is a few lines of text per sample, so this is the whole client.
//
//   MetricsRegistry registry;
//   Counter* tokens = registry.AddCounter("tpserve_generation_tokens_total", "Tokens generated.");
//   Histogram* ttft = registry.AddHistogram("tpserve_time_to_first_token_seconds", "...",
//                                           LatencyBuckets());
//   tokens->Add(3);  ttft->Observe(0.12);  std::string text = registry.Render();
//
// Instruments are created once (at start-up, or lazily through the Get* calls for label values
// not known in advance) and live as long as the registry; their pointers stay valid.
// Threading: everything is thread-safe. Observe/Add take one short lock per instrument.
#ifndef TPSERVE_COORDINATOR_METRICS_H_
#define TPSERVE_COORDINATOR_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tpserve {

// Label name -> value, in the order they are rendered.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(double v = 1.0);  // v >= 0: a counter never goes down
  double value() const;

 private:
  mutable absl::Mutex mu_;
  double value_ ABSL_GUARDED_BY(mu_) = 0.0;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implicit
  void Observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket (not cumulative), then +Inf
  double sum_ ABSL_GUARDED_BY(mu_) = 0.0;
};

// Latency buckets from 1 ms to 120 s, roughly x2.5 apart.
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Returns the instrument for (name, labels), creating it (and its family) on first use.
  // A name keeps the type and help it was first registered with.
  Counter* GetCounter(const std::string& name, const std::string& help, MetricLabels labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& upper_bounds, MetricLabels labels = {});
  // A value read when /metrics is rendered (queue depth, KV blocks, counters kept elsewhere).
  void AddGaugeFunction(const std::string& name, const std::string& help,
                        std::function<double()> read, MetricLabels labels = {});
  void AddCounterFunction(const std::string& name, const std::string& help,
                          std::function<double()> read, MetricLabels labels = {});

  // The text exposition format, families in name order.
  std::string Render() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Series {
    MetricLabels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> read;
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<std::unique_ptr<Series>> series;
  };

  Series* FindOrAdd(const std::string& name, Type type, const std::string& help,
                    const MetricLabels& labels, bool* added) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_METRICS_H_
