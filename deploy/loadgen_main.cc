// Load generator for a running tpserve cluster: N concurrent Generate streams, closed loop or
// Poisson arrivals, a mix of prompt and output lengths; prints TTFT / ITL / E2E percentiles,
// throughput and goodput under an SLO (definitions in deploy/loadgen.h), optionally as JSON.
// Exits 1 if any request failed (unless --allow_errors), 2 for bad flags, 3 if it cannot serve.
//
//   bazel run -c opt //deploy:loadgen -- --concurrency=8 --requests=32
//   bazel run -c opt //deploy:loadgen -- --rate=2 --duration_s=60 --output_tokens=128
//   bazel run -c opt //deploy:loadgen -- --prompt_tokens=64:0.5,512:0.5 --json_out=/tmp/run.json
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "deploy/loadgen.h"
#include "deploy/loadgen_client.h"
#include "deploy/loadgen_report.h"
#include "deploy/loadgen_workload.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051", "the cluster's public API");
ABSL_FLAG(int, concurrency, 1, "concurrent streams (requests in flight at most)");
ABSL_FLAG(int64_t, requests, 32, "requests to send (0 = no count limit; see --duration_s)");
ABSL_FLAG(double, duration_s, 0, "send no new request after this many seconds (0 = no limit)");
ABSL_FLAG(double, rate, 0, "Poisson arrivals, requests/s; 0 = closed loop");
ABSL_FLAG(std::string, prompt_tokens, "200", "prompt length, or a mix TOKENS:WEIGHT,...");
ABSL_FLAG(std::string, output_tokens, "128", "output length (max_new_tokens), or a mix");
ABSL_FLAG(double, temperature, 0, "0 = greedy");
ABSL_FLAG(uint64_t, seed, 1, "seeds the workload and each request's sampler (seed + index)");
ABSL_FLAG(bool, ignore_eos, true, "generate the full output length even past EOS");
ABSL_FLAG(int, warmup_requests, 1, "short requests sent first, outside the measurement");
ABSL_FLAG(double, request_timeout_s, 600, "per-request deadline");
ABSL_FLAG(double, slo_ttft_ms, 2000, "goodput: a good request's TTFT is at most this (0 = any)");
ABSL_FLAG(double, slo_itl_ms, 200, "goodput: and its ITL statistic at most this (0 = any)");
ABSL_FLAG(std::string, slo_itl_stat, "mean", "the per-request ITL statistic: mean or p90");
ABSL_FLAG(std::string, json_out, "", "also write the run as JSON here");
ABSL_FLAG(bool, allow_errors, false, "exit 0 even if some requests failed");

namespace tpserve {
namespace {

int Fail(const absl::Status& s, int code) {
  std::fprintf(stderr, "loadgen: %s\n", std::string(s.message()).c_str());
  return code;
}

int Main() {
  LoadOptions o;
  o.address = absl::GetFlag(FLAGS_address);
  o.concurrency = absl::GetFlag(FLAGS_concurrency);
  o.max_requests = absl::GetFlag(FLAGS_requests);
  o.duration = absl::Seconds(absl::GetFlag(FLAGS_duration_s));
  o.rate = absl::GetFlag(FLAGS_rate);
  o.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  o.seed = absl::GetFlag(FLAGS_seed);
  o.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  o.warmup_requests = absl::GetFlag(FLAGS_warmup_requests);
  o.request_timeout = absl::Seconds(absl::GetFlag(FLAGS_request_timeout_s));
  absl::StatusOr<LengthMix> prompts =
      ParseLengthMix(absl::GetFlag(FLAGS_prompt_tokens), "--prompt_tokens");
  if (!prompts.ok()) return Fail(prompts.status(), 2);
  absl::StatusOr<LengthMix> outputs =
      ParseLengthMix(absl::GetFlag(FLAGS_output_tokens), "--output_tokens");
  if (!outputs.ok()) return Fail(outputs.status(), 2);
  o.prompt_mix = *prompts;
  o.output_mix = *outputs;
  Slo slo;
  slo.ttft_ms = absl::GetFlag(FLAGS_slo_ttft_ms);
  slo.itl_ms = absl::GetFlag(FLAGS_slo_itl_ms);
  absl::StatusOr<ItlStat> stat = ParseItlStat(absl::GetFlag(FLAGS_slo_itl_stat));
  if (!stat.ok()) return Fail(stat.status(), 2);
  slo.itl_stat = *stat;

  absl::StatusOr<LoadResult> result = RunLoad(o);
  if (!result.ok()) {
    return Fail(result.status(),
                result.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 3);
  }
  const LoadSummary summary = Summarize(result->records, result->window_s, slo);
  RunInfo info;
  info.tool = "tpserve";
  info.target = o.address;
  info.concurrency = o.concurrency;
  info.max_requests = o.max_requests;
  info.duration_s = absl::GetFlag(FLAGS_duration_s);
  info.rate = o.rate;
  info.prompt_tokens = absl::GetFlag(FLAGS_prompt_tokens);
  info.output_tokens = absl::GetFlag(FLAGS_output_tokens);
  info.temperature = absl::GetFlag(FLAGS_temperature);
  info.seed = o.seed;
  info.ignore_eos = o.ignore_eos;
  info.warmup_requests = o.warmup_requests;
  std::fputs(RenderTable(info, summary).c_str(), stdout);
  int shown = 0;  // the first few failures verbatim; the table has every count
  for (const RequestRecord& r : result->records) {
    if (!r.ok() && shown++ < 10) {
      std::fprintf(stderr, "loadgen: request %lld: %s: %s\n", static_cast<long long>(r.index),
                   r.status.c_str(), r.error_message.c_str());
    }
  }
  const std::string json_out = absl::GetFlag(FLAGS_json_out);
  if (!json_out.empty()) {
    std::ofstream out(json_out);
    out << RunToJson(info, summary, result->records).dump(2) << "\n";
    if (!out) return Fail(absl::UnavailableError(absl::StrCat("cannot write ", json_out)), 3);
  }
  if (summary.requests_failed > 0 && !absl::GetFlag(FLAGS_allow_errors)) return 1;
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tpserve load generator: loadgen --address=HOST:PORT --concurrency=N --requests=TOTAL");
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
