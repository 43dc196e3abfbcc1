#include "deploy/loadgen.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> Scaled(const std::vector<double>& values, double factor) {
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(v * factor);
  return out;
}

}  // namespace

void RecordMessage(double t_s, int32_t num_tokens, RequestRecord* record) {
  if (num_tokens <= 0) return;  // e.g. the closing message with only usage
  if (num_tokens > 1) ++record->multi_token_messages;
  if (record->ttft_s < 0) {
    record->ttft_s = t_s;
  } else {
    const double gap = (t_s - record->last_token_s) / num_tokens;
    record->itl_s.insert(record->itl_s.end(), num_tokens, gap);
  }
  record->last_token_s = t_s;
  record->output_tokens += num_tokens;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Distribution Distribute(const std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  d.mean = values.empty() ? kNaN
                          : std::accumulate(values.begin(), values.end(), 0.0) /
                                static_cast<double>(values.size());
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  return d;
}

absl::StatusOr<ItlStat> ParseItlStat(const std::string& name) {
  if (name == "mean") return ItlStat::kMean;
  if (name == "p90") return ItlStat::kP90;
  return absl::InvalidArgumentError(
      absl::StrCat("--slo_itl_stat = \"", name, "\" must be \"mean\" or \"p90\""));
}

const char* ItlStatName(ItlStat stat) { return stat == ItlStat::kMean ? "mean" : "p90"; }

double RequestItl(const RequestRecord& record, ItlStat stat) {
  if (record.itl_s.empty()) return kNaN;
  if (stat == ItlStat::kP90) return Percentile(record.itl_s, 90);
  return std::accumulate(record.itl_s.begin(), record.itl_s.end(), 0.0) /
         static_cast<double>(record.itl_s.size());
}

bool IsGood(const RequestRecord& record, const Slo& slo) {
  if (!record.ok() || record.ttft_s < 0) return false;
  if (slo.ttft_ms > 0 && record.ttft_s * 1000.0 > slo.ttft_ms) return false;
  const double itl_s = RequestItl(record, slo.itl_stat);
  if (slo.itl_ms > 0 && !std::isnan(itl_s) && itl_s * 1000.0 > slo.itl_ms) return false;
  return true;
}

LoadSummary Summarize(const std::vector<RequestRecord>& records, double window_s, const Slo& slo) {
  LoadSummary s;
  s.slo = slo;
  s.window_s = window_s;
  s.requests = static_cast<int64_t>(records.size());
  std::vector<double> ttft, itl, e2e;
  for (const RequestRecord& r : records) {
    if (!r.ok()) {
      ++s.requests_failed;
      ++s.failures[r.status];
      continue;
    }
    ++s.requests_ok;
    s.prompt_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.multi_token_messages += r.multi_token_messages;
    if (r.output_tokens < r.wanted_output_tokens) ++s.short_requests;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2e.push_back(r.e2e_s);
    if (IsGood(r, slo)) ++s.good_requests;
  }
  s.ttft_ms = Distribute(Scaled(ttft, 1000.0));
  s.itl_ms = Distribute(Scaled(itl, 1000.0));
  s.e2e_ms = Distribute(Scaled(e2e, 1000.0));
  if (window_s > 0) {
    s.requests_per_s = static_cast<double>(s.requests_ok) / window_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / window_s;
    s.goodput_requests_per_s = static_cast<double>(s.good_requests) / window_s;
  }
  return s;
}

}  // namespace tpserve
