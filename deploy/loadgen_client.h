// Drives a tpserve cluster through the public gRPC API (tpserve.v1.TpServe/Generate) with
// `concurrency` streams and records what each request measured (deploy/loadgen.h).
//
//   LoadOptions o;  o.address = "127.0.0.1:50051";  o.concurrency = 8;  o.max_requests = 32;
//   TP_ASSIGN_OR_RETURN(LoadResult r, RunLoad(o));
//   LoadSummary s = Summarize(r.records, r.window_s, slo);
//
// Closed loop (rate == 0): each stream sends its next request when the last one finished.
// Open loop (rate > 0): requests arrive as a Poisson process and each is sent at its arrival
// time, or as soon as one of the `concurrency` streams is free after it. Requests are raw text
// prompts (no chat template) with max_new_tokens = the wanted output length and ignore_eos, so
// every successful request streams exactly that many tokens unless the context window ends it.
//
// Threading: RunLoad blocks; it runs one thread per stream and joins them before returning.
#ifndef TPSERVE_DEPLOY_LOADGEN_CLIENT_H_
#define TPSERVE_DEPLOY_LOADGEN_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "deploy/loadgen.h"
#include "deploy/loadgen_workload.h"

namespace tpserve {

struct LoadOptions {
  std::string address;
  int concurrency = 1;
  int64_t max_requests = 32;                       // 0: no count limit
  absl::Duration duration = absl::ZeroDuration();  // 0: no time limit; no new sends after it
  double rate = 0.0;                               // requests/s; 0 = closed loop
  LengthMix prompt_mix;
  LengthMix output_mix;
  float temperature = 0.0f;  // 0 = greedy
  uint64_t seed = 1;         // the workload's and the sampler's
  bool ignore_eos = true;
  int warmup_requests = 0;  // sent one at a time before the window, not recorded
  absl::Duration request_timeout = absl::Minutes(10);
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in workload order
  double window_s = 0.0;               // first send to last final status
};

// INVALID_ARGUMENT for options out of range, UNAVAILABLE when a warm-up request fails (the
// server is not serving). Failures of measured requests are in the records, never dropped.
absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_LOADGEN_CLIENT_H_
