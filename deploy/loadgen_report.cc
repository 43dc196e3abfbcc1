#include "deploy/loadgen_report.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpserve {
namespace {

std::string Cell(double v) {
  return std::isnan(v) ? absl::StrFormat("%9s", "-") : absl::StrFormat("%9.1f", v);
}

std::string Row(const char* name, const Distribution& d) {
  return absl::StrFormat("%-6s %s %s %s %s %9d\n", name, Cell(d.mean), Cell(d.p50), Cell(d.p90),
                         Cell(d.p99), d.count);
}

std::string PerRequest(int64_t total, int64_t requests) {
  return requests > 0 ? absl::StrFormat("%.1f", static_cast<double>(total) / requests) : "-";
}

std::string Limit(double ms) { return ms > 0 ? absl::StrFormat("%g ms", ms) : "any"; }

// A statistic without samples is NaN here and null in the JSON.
nlohmann::json Number(double v) {
  return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v);
}

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"count", d.count},
          {"mean", Number(d.mean)},
          {"p50", Number(d.p50)},
          {"p90", Number(d.p90)},
          {"p99", Number(d.p99)}};
}

}  // namespace

std::string RenderTable(const RunInfo& info, const LoadSummary& s) {
  std::string out = absl::StrFormat("%s -> %s\n", info.tool, info.target);
  absl::StrAppendFormat(
      &out, "concurrency %d, %s, prompt tokens %s, output tokens %s, temperature %g, seed %d\n",
      info.concurrency,
      info.rate > 0 ? absl::StrFormat("Poisson arrivals at %g requests/s", info.rate)
                    : std::string("closed loop"),
      info.prompt_tokens, info.output_tokens, info.temperature, info.seed);
  absl::StrAppendFormat(&out, "requests %d: %d ok, %d failed; window %.3f s\n", s.requests,
                        s.requests_ok, s.requests_failed, s.window_s);
  absl::StrAppendFormat(&out, "throughput: %.3f requests/s, %.1f output tokens/s\n",
                        s.requests_per_s, s.output_tokens_per_s);
  absl::StrAppendFormat(&out,
                        "tokens: prompt %d (%s/request, as counted by the server), output %d "
                        "(%s/request); %d short, %d multi-token messages\n",
                        s.prompt_tokens, PerRequest(s.prompt_tokens, s.requests_ok),
                        s.output_tokens, PerRequest(s.output_tokens, s.requests_ok),
                        s.short_requests, s.multi_token_messages);
  absl::StrAppendFormat(&out, "%-6s %9s %9s %9s %9s %9s\n", "ms", "mean", "p50", "p90", "p99",
                        "count");
  out += Row("TTFT", s.ttft_ms);
  out += Row("ITL", s.itl_ms);
  out += Row("E2E", s.e2e_ms);
  absl::StrAppendFormat(&out,
                        "goodput: %d of %d requests good, %.3f requests/s (TTFT <= %s and "
                        "per-request %s ITL <= %s)\n",
                        s.good_requests, s.requests, s.goodput_requests_per_s, Limit(s.slo.ttft_ms),
                        ItlStatName(s.slo.itl_stat), Limit(s.slo.itl_ms));
  std::string failures;
  for (const auto& [code, count] : s.failures) {
    absl::StrAppend(&failures, failures.empty() ? "" : ", ", code, " ", count);
  }
  absl::StrAppend(&out, "failures: ", failures.empty() ? "none" : failures, "\n");
  return out;
}

nlohmann::json RunToJson(const RunInfo& info, const LoadSummary& s,
                         const std::vector<RequestRecord>& records) {
  nlohmann::json j;
  j["tool"] = info.tool;
  j["target"] = info.target;
  j["config"] = {{"concurrency", info.concurrency},
                 {"requests", info.max_requests},
                 {"duration_s", info.duration_s},
                 {"rate", info.rate},
                 {"prompt_tokens", info.prompt_tokens},
                 {"output_tokens", info.output_tokens},
                 {"temperature", info.temperature},
                 {"seed", info.seed},
                 {"ignore_eos", info.ignore_eos},
                 {"warmup_requests", info.warmup_requests},
                 {"slo_ttft_ms", s.slo.ttft_ms},
                 {"slo_itl_ms", s.slo.itl_ms},
                 {"slo_itl_stat", ItlStatName(s.slo.itl_stat)}};
  nlohmann::json failures = nlohmann::json::object();
  for (const auto& [code, count] : s.failures) failures[code] = count;
  j["summary"] = {{"requests", s.requests},
                  {"requests_ok", s.requests_ok},
                  {"requests_failed", s.requests_failed},
                  {"failures", failures},
                  {"window_s", s.window_s},
                  {"requests_per_s", s.requests_per_s},
                  {"output_tokens_per_s", s.output_tokens_per_s},
                  {"prompt_tokens", s.prompt_tokens},
                  {"output_tokens", s.output_tokens},
                  {"short_requests", s.short_requests},
                  {"multi_token_messages", s.multi_token_messages},
                  {"ttft_ms", DistributionJson(s.ttft_ms)},
                  {"itl_ms", DistributionJson(s.itl_ms)},
                  {"e2e_ms", DistributionJson(s.e2e_ms)},
                  {"good_requests", s.good_requests},
                  {"goodput_requests_per_s", s.goodput_requests_per_s}};
  nlohmann::json rows = nlohmann::json::array();
  for (const RequestRecord& r : records) {
    rows.push_back(
        {{"index", r.index},
         {"status", r.status},
         {"error", r.error_message},
         {"wanted_prompt_tokens", r.wanted_prompt_tokens},
         {"wanted_output_tokens", r.wanted_output_tokens},
         {"prompt_tokens", r.prompt_tokens},
         {"output_tokens", r.output_tokens},
         {"send_s", r.send_s},
         {"ttft_ms", r.ttft_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.ttft_s * 1000)},
         {"e2e_ms", r.e2e_s * 1000},
         {"itl_mean_ms", Number(RequestItl(r, ItlStat::kMean) * 1000)},
         {"itl_p90_ms", Number(RequestItl(r, ItlStat::kP90) * 1000)},
         {"good", IsGood(r, s.slo)}});
  }
  j["requests"] = std::move(rows);
  return j;
}

}  // namespace tpserve
