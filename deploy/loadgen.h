// Load-generator statistics: what one streamed request measured, and the run's latency
// percentiles, throughput and goodput under a latency SLO. //deploy:loadgen fills the records
// over gRPC; bench/loadgen_common.py repeats these figures for the llama.cpp peer.
//
//   RequestRecord r;  RecordMessage(0.150, 1, &r);  RecordMessage(0.190, 1, &r);  // ...
//   LoadSummary s = Summarize(records, /*window_s=*/12.5, slo);
//
// Definitions (docs/PERFORMANCE.md repeats them):
//   TTFT  send -> arrival of the first message that carries a token.
//   ITL   the gap between consecutive token-carrying messages. A message with k > 1 tokens
//         after a gap g gives k samples of g / k (and counts as a multi-token message); extra
//         tokens in the first message give no sample. So a request's mean ITL is
//         (last token - first token) / (tokens after the first message).
//   E2E   send -> the stream's final status.
//   Percentiles interpolate linearly between the closest ranks (numpy's default).
//   ITL percentiles pool every sample of every successful request (each token weighs the same).
//   A request is good when it succeeded, its TTFT <= slo.ttft_ms and its per-request ITL
//   statistic (mean or p90, slo.itl_stat) <= slo.itl_ms; a limit <= 0 is not checked, and a
//   request with no ITL sample passes the ITL limit.
//
// Thread-safe: pure functions; a RequestRecord is written by one thread.
#ifndef TPSERVE_DEPLOY_LOADGEN_H_
#define TPSERVE_DEPLOY_LOADGEN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpserve {

// One request as the client saw it. Times are seconds since the request was sent.
struct RequestRecord {
  int64_t index = 0;                 // position in the workload
  int32_t wanted_prompt_tokens = 0;  // what the workload asked for
  int32_t wanted_output_tokens = 0;
  int32_t prompt_tokens = 0;  // the API's usage count (what was really sent)
  int32_t output_tokens = 0;  // token ids streamed back
  double send_s = 0.0;        // since the start of the measured window
  double ttft_s = -1.0;       // < 0: no token arrived
  double last_token_s = -1.0;
  double e2e_s = 0.0;
  std::vector<double> itl_s;  // see the definitions above
  int32_t multi_token_messages = 0;
  std::string status = "OK";  // a gRPC status code name, e.g. "UNAVAILABLE"
  std::string error_message;

  bool ok() const { return status == "OK"; }
};

// Adds one streamed message that arrived `t_s` after the send and carried `num_tokens` ids.
void RecordMessage(double t_s, int32_t num_tokens, RequestRecord* record);

// The p-th percentile (0 <= p <= 100) by linear interpolation; NaN when `values` is empty.
double Percentile(std::vector<double> values, double p);

struct Distribution {
  int64_t count = 0;
  double mean = 0.0;  // NaN when count == 0, like the percentiles
  double p50 = 0.0;
  double p90 = 0.0;
  double p99 = 0.0;
};
Distribution Distribute(const std::vector<double>& values);

enum class ItlStat { kMean, kP90 };
absl::StatusOr<ItlStat> ParseItlStat(const std::string& name);  // "mean" or "p90"
const char* ItlStatName(ItlStat stat);

struct Slo {
  double ttft_ms = 0.0;  // <= 0: not checked
  double itl_ms = 0.0;   // <= 0: not checked
  ItlStat itl_stat = ItlStat::kMean;
};

// The request's own ITL statistic in seconds; NaN when it has no ITL sample.
double RequestItl(const RequestRecord& record, ItlStat stat);
bool IsGood(const RequestRecord& record, const Slo& slo);

struct LoadSummary {
  int64_t requests = 0;
  int64_t requests_ok = 0;
  int64_t requests_failed = 0;
  std::map<std::string, int64_t> failures;  // status code name -> count
  int64_t prompt_tokens = 0;                // successful requests only, as the API counted
  int64_t output_tokens = 0;
  int64_t short_requests = 0;  // ok, but fewer tokens than wanted
  int64_t multi_token_messages = 0;
  double window_s = 0.0;
  double requests_per_s = 0.0;       // successful requests / window
  double output_tokens_per_s = 0.0;  // their streamed tokens / window
  Distribution ttft_ms;
  Distribution itl_ms;
  Distribution e2e_ms;
  Slo slo;
  int64_t good_requests = 0;
  double goodput_requests_per_s = 0.0;
};

// `window_s`: first send to last final status of the measured requests.
LoadSummary Summarize(const std::vector<RequestRecord>& records, double window_s, const Slo& slo);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_LOADGEN_H_
