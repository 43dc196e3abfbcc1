#include "coordinator/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string Escape(const std::string& s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (quote && c == '"') out += "\\\"";
    else out += c;
  }
  return out;
}

// Every digit the value has: the shortest text that reads back as the same double (StrCat's
// six significant digits printed a counter of 352,321,536 as 3.52322e+08).
std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

std::string LabelText(const MetricLabels& labels,
                      const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::pair<std::string, std::string>& l) {
    absl::StrAppend(&out, first ? "" : ",", l.first, "=\"", Escape(l.second, true), "\"");
    first = false;
  };
  for (const auto& l : labels) add(l);
  if (extra != nullptr) add(*extra);
  return out + "}";
}

}  // namespace

void Counter::Add(double v) {
  if (!(v >= 0)) return;  // also drops NaN
  absl::MutexLock lock(&mu_);
  value_ += v;
}

double Counter::value() const {
  absl::MutexLock lock(&mu_);
  return value_;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double v) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  ++counts_[bucket];
  sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(running += c);
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
          1.0,   2.5,    5.0,   10.0, 25.0,  60.0, 120.0};
}

MetricsRegistry::Series* MetricsRegistry::FindOrAdd(const std::string& name, Type type,
                                                    const std::string& help,
                                                    const MetricLabels& labels, bool* added) {
  auto [it, inserted] = families_.try_emplace(name, Family{type, help, {}});
  Family& family = it->second;
  for (auto& s : family.series) {
    if (s->labels == labels) {
      *added = false;
      return s.get();
    }
  }
  family.series.push_back(std::make_unique<Series>());
  family.series.back()->labels = labels;
  *added = true;
  return family.series.back().get();
}

Counter* MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  bool added = false;
  Series* s = FindOrAdd(name, Type::kCounter, help, labels, &added);
  if (added) s->counter = std::make_unique<Counter>();
  return s->counter.get();
}

Histogram* MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& upper_bounds,
                                         MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  bool added = false;
  Series* s = FindOrAdd(name, Type::kHistogram, help, labels, &added);
  if (added) s->histogram = std::make_unique<Histogram>(upper_bounds);
  return s->histogram.get();
}

void MetricsRegistry::AddGaugeFunction(const std::string& name, const std::string& help,
                                       std::function<double()> read, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  bool added = false;
  FindOrAdd(name, Type::kGauge, help, labels, &added)->read = std::move(read);
}

void MetricsRegistry::AddCounterFunction(const std::string& name, const std::string& help,
                                         std::function<double()> read, MetricLabels labels) {
  absl::MutexLock lock(&mu_);
  bool added = false;
  FindOrAdd(name, Type::kCounter, help, labels, &added)->read = std::move(read);
}

std::string MetricsRegistry::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    const char* type = family.type == Type::kCounter ? "counter"
                       : family.type == Type::kGauge ? "gauge"
                                                     : "histogram";
    absl::StrAppend(&out, "# HELP ", name, " ", Escape(family.help, false), "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", type, "\n");
    for (const auto& s : family.series) {
      if (s->histogram != nullptr) {
        const Histogram::Snapshot h = s->histogram->snapshot();
        for (size_t i = 0; i <= h.upper_bounds.size(); ++i) {
          const std::pair<std::string, std::string> le{
              "le", i < h.upper_bounds.size() ? FormatValue(h.upper_bounds[i]) : "+Inf"};
          absl::StrAppend(&out, name, "_bucket", LabelText(s->labels, &le), " ", h.cumulative[i],
                          "\n");
        }
        absl::StrAppend(&out, name, "_sum", LabelText(s->labels), " ", FormatValue(h.sum), "\n");
        absl::StrAppend(&out, name, "_count", LabelText(s->labels), " ", h.count, "\n");
        continue;
      }
      const double v = s->counter != nullptr ? s->counter->value() : s->read();
      absl::StrAppend(&out, name, LabelText(s->labels), " ", FormatValue(v), "\n");
    }
  }
  return out;
}

}  // namespace tpserve
