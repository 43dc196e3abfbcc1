// A load run as a human table and as JSON. The llama.cpp peer (bench/loadgen_common.py) writes
// the same table and JSON schema (only "tool" and "target" differ), so the two can be diffed.
//
//   std::fputs(RenderTable(info, summary).c_str(), stdout);
//   std::ofstream(path) << RunToJson(info, summary, records).dump(2);
//
// JSON: {"tool", "target", "config": {...RunInfo}, "summary": {...LoadSummary, latencies in ms
// as {"count","mean","p50","p90","p99"}}, "requests": [one object per request]}. A statistic
// with no sample (e.g. ITL of one-token outputs) is null.
//
// Thread-safe: pure functions.
#ifndef TPSERVE_DEPLOY_LOADGEN_REPORT_H_
#define TPSERVE_DEPLOY_LOADGEN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/loadgen.h"
#include "nlohmann/json.hpp"

namespace tpserve {

// What was run, for the table's header and the JSON's "config".
struct RunInfo {
  std::string tool;    // "tpserve" or "llama.cpp"
  std::string target;  // an address or a model file
  int concurrency = 1;
  int64_t max_requests = 0;
  double duration_s = 0.0;
  double rate = 0.0;
  std::string prompt_tokens;  // the mix as given, e.g. "64:0.5,512:0.5"
  std::string output_tokens;
  double temperature = 0.0;
  uint64_t seed = 1;
  bool ignore_eos = true;
  int warmup_requests = 0;
};

std::string RenderTable(const RunInfo& info, const LoadSummary& summary);
nlohmann::json RunToJson(const RunInfo& info, const LoadSummary& summary,
                         const std::vector<RequestRecord>& records);

}  // namespace tpserve

#endif  // TPSERVE_DEPLOY_LOADGEN_REPORT_H_
