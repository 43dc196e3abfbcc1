// Structured output on JSONSchemaBench (../shared/jsonschemabench: 9,557 real-world schemas in
// ten sets; see its SOURCES.md):
//   --mode=coverage  every schema judged as a request's json_schema is (the schema policy,
//                    XGrammar's grammar and its warnings: CheckJsonSchemaConstraint), strict and
//                    not; one JSON line per schema into --out, and a table per set. Also the most
//                    common reasons strict refuses.
//   --mode=generate  the schemas of --sample (bench/jsonschemabench_peers.py sample: a pinned
//                    sample with the prompt each gets) served by the engine on SmolLM2, greedy,
//                    up to --max_tokens, strict or not; one JSON line per schema into --out, in
//                    the format bench/jsonschemabench_peers.py validate reads.
//
//   bazel run -c opt //bench:jsonschemabench -- --mode=coverage --out=/tmp/jsb_ours.jsonl
//   bazel run -c opt //bench:jsonschemabench -- --mode=generate --sample=/tmp/jsb_sample.jsonl \
//       --out=/tmp/jsb_out_tpserve.jsonl
// Relative paths are taken from the workspace (BUILD_WORKSPACE_DIRECTORY under bazel run).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "bench/engine_bench_support.h"
#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/structured/compiler.h"
#include "formats/test_files.h"
#include "model/bundled_model.h"
#include "nlohmann/json.hpp"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, mode, "coverage", "coverage or generate");
ABSL_FLAG(std::string, data_dir, "../shared/jsonschemabench", "JSONSchemaBench's sets");
ABSL_FLAG(std::string, out, "", "JSON lines, one per schema");
ABSL_FLAG(std::string, sets, "", "coverage: these sets only (comma-separated; all if empty)");
ABSL_FLAG(int, limit, 0, "coverage: at most this many schemas per set (0: all)");
ABSL_FLAG(std::string, sample, "", "generate: the sample (JSON lines: set, name, path, prompt)");
ABSL_FLAG(bool, strict, true, "generate: send the schemas strict");
ABSL_FLAG(int, max_tokens, 160, "generate: tokens per request at most");
ABSL_FLAG(int, streams, 4, "generate: requests served at once");
ABSL_FLAG(std::string, model, "", "GGUF file (default: the bundled SmolLM2)");

namespace tpserve {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string FromWorkspace(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return ws != nullptr ? StrCat(ws, "/", path) : path;
}

// A refusal's message with the parts that differ per schema (pointers, quoted values) blanked,
// so that reasons can be counted.
std::string ReasonOf(std::string message) {
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '"') {
      quoted = !quoted;
      if (quoted) out += "\"…";
      if (!quoted) out += '"';
      continue;
    }
    if (quoted) {
      // keep keyword names: short identifiers
      continue;
    }
    out += c;
  }
  // "at /a/b/c:" -> "at …:"
  std::string result;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 4, "at /") == 0) {
      result += "at …";
      i += 3;
      while (i + 1 < out.size() && out[i + 1] != ':' && out[i + 1] != ' ') ++i;
      continue;
    }
    result += out[i];
  }
  return result.substr(0, 160);
}

struct SetCount {
  int schemas = 0, strict_ok = 0, loose_ok = 0, with_annotations = 0, with_dropped = 0;
};

absl::Status RunCoverage() {
  const std::string dir = FromWorkspace(absl::GetFlag(FLAGS_data_dir));
  std::vector<std::string> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) sets.push_back(entry.path().filename().string());
  }
  std::sort(sets.begin(), sets.end());
  const std::string only = absl::GetFlag(FLAGS_sets);
  std::ofstream out;
  if (!absl::GetFlag(FLAGS_out).empty()) out.open(FromWorkspace(absl::GetFlag(FLAGS_out)));
  std::map<std::string, SetCount> counts;
  std::map<std::string, int> reasons;
  for (const std::string& set : sets) {
    if (!only.empty() && ("," + only + ",").find("," + set + ",") == std::string::npos) continue;
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(fs::path(dir) / set)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (absl::GetFlag(FLAGS_limit) > 0 && files.size() > size_t(absl::GetFlag(FLAGS_limit))) {
      files.resize(absl::GetFlag(FLAGS_limit));
    }
    SetCount& count = counts[set];
    for (const std::string& file : files) {
      TP_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(file));
      Json line = {{"set", set}, {"name", fs::path(file).filename().string()}};
      ++count.schemas;
      for (bool strict : {true, false}) {
        ConstraintSpec spec;
        spec.kind = ConstraintKind::kJsonSchema;
        spec.text = text;
        spec.strict = strict;
        spec.field = "json_schema";
        absl::StatusOr<SchemaCheck> check = CheckJsonSchemaConstraint(spec);
        const char* key = strict ? "strict" : "loose";
        line[key] = check.ok() ? "ok" : "refused";
        if (!check.ok()) {
          line[StrCat(key, "_error")] = std::string(check.status().message()).substr(0, 300);
          if (strict) ++reasons[ReasonOf(std::string(check.status().message()))];
          continue;
        }
        (strict ? count.strict_ok : count.loose_ok) += 1;
        if (!strict) {
          line["dropped"] = check->dropped.size();
          count.with_dropped += check->dropped.empty() ? 0 : 1;
        } else {
          line["annotations"] = check->annotations.size();
          count.with_annotations += check->annotations.empty() ? 0 : 1;
        }
      }
      if (out.is_open()) out << line.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    }
  }
  std::printf(
      "| set | schemas | tpserve strict | tpserve not strict | strict, with annotations | "
      "not strict, with dropped keywords |\n|---|---|---|---|---|---|\n");
  SetCount total;
  auto pct = [](int a, int b) { return b == 0 ? 0.0 : 100.0 * a / b; };
  for (const auto& [set, c] : counts) {
    std::printf("| %s | %d | %.1f%% | %.1f%% | %d | %d |\n", set.c_str(), c.schemas,
                pct(c.strict_ok, c.schemas), pct(c.loose_ok, c.schemas), c.with_annotations,
                c.with_dropped);
    total.schemas += c.schemas;
    total.strict_ok += c.strict_ok;
    total.loose_ok += c.loose_ok;
    total.with_annotations += c.with_annotations;
    total.with_dropped += c.with_dropped;
  }
  std::printf("| all | %d | %.1f%% | %.1f%% | %d | %d |\n", total.schemas,
              pct(total.strict_ok, total.schemas), pct(total.loose_ok, total.schemas),
              total.with_annotations, total.with_dropped);
  std::vector<std::pair<int, std::string>> by_count;
  for (const auto& [reason, n] : reasons) by_count.push_back({n, reason});
  std::sort(by_count.rbegin(), by_count.rend());
  std::printf("\nstrict refusals by reason (top 25):\n");
  for (size_t i = 0; i < by_count.size() && i < 25; ++i) {
    std::printf("%6d  %s\n", by_count[i].first, by_count[i].second.c_str());
  }
  return absl::OkStatus();
}

absl::Status RunGenerate() {
  std::string path = absl::GetFlag(FLAGS_model);
  TP_ASSIGN_OR_RETURN(ModelBundle bundle, LoadBenchModel(path));
  const int32_t vocab = static_cast<int32_t>(bundle.files.config.vocab_size);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<ConstraintCompiler> compiler,
                      ConstraintCompiler::Create(*bundle.tokenizer, vocab, bundle.EosTokenIds()));
  TP_ASSIGN_OR_RETURN(std::string sample_text,
                      ReadFileBytes(FromWorkspace(absl::GetFlag(FLAGS_sample))));
  std::vector<Json> sample;
  std::istringstream lines(sample_text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) sample.push_back(Json::parse(line));
  }
  const int streams = std::max(1, absl::GetFlag(FLAGS_streams));
  RankLoad load;
  load.num_kv_blocks = 1024;
  load.block_size_tokens = 16;
  load.max_tokens_per_step = 2048;
  load.model.max_logit_rows = streams;
  load.threads_per_rank = BenchThreads(0);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<LocalExecutor> exec,
                      LocalExecutor::Create(bundle.files, load));
  EngineOptions eo;
  eo.num_kv_blocks = 1024;
  eo.block_size_tokens = 16;
  eo.context_length = 4096;
  eo.scheduler.max_num_seqs = streams;
  eo.scheduler.max_tokens_per_step = 2048;
  eo.eos_token_ids = bundle.EosTokenIds();
  Engine engine(eo, std::move(exec), &*bundle.tokenizer);
  const Admitter door = bundle.Door(eo.context_length, engine.kv_capacity(), compiler.get());
  const bool strict = absl::GetFlag(FLAGS_strict);
  const std::string engine_name = strict ? "tpserve-strict" : "tpserve";
  std::vector<Json> results(sample.size());
  std::vector<std::string> texts(sample.size());
  int in_flight = 0;  // the engine's callbacks run inside Step, on this thread
  for (size_t i = 0; i < sample.size(); ++i) {
    const Json& s = sample[i];
    Json& r = results[i];
    r = {{"set", s["set"]}, {"name", s["name"]}, {"engine", engine_name}};
    TP_ASSIGN_OR_RETURN(std::string schema, ReadFileBytes(s["path"].get<std::string>()));
    tpserve::v1::GenerateRequest proto;
    proto.set_text(s["prompt"].get<std::string>());
    proto.set_allow_special_tokens(true);
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(absl::GetFlag(FLAGS_max_tokens));
    proto.set_json_schema(schema);
    proto.set_strict(strict);
    absl::StatusOr<AdmittedRequest> admitted = door.Admit(proto);
    if (!admitted.ok()) {
      r["status"] = "refused";
      r["error"] = std::string(admitted.status().message()).substr(0, 300);
      continue;
    }
    TP_RETURN_IF_ERROR(engine
                           .Submit(std::move(*admitted),
                                   [&, i](GenerationEvent e) {
                                     texts[i] += e.text;
                                     if (e.finish == FinishReason::kNone) return;
                                     --in_flight;
                                     results[i]["tokens"] = e.usage.completion_tokens;
                                     results[i]["status"] =
                                         e.finish == FinishReason::kLength ? "cut" : "finished";
                                     if (!e.error.ok()) {
                                       results[i]["status"] = "error";
                                       results[i]["error"] = std::string(e.error.message());
                                     }
                                     if (e.structured.has_value()) {
                                       results[i]["annotations"] = e.structured->annotations;
                                       results[i]["dropped"] = e.structured->dropped_keywords;
                                     }
                                   })
                           .status());
    ++in_flight;
    // Keep at most `streams` in flight: step until one finishes.
    while (in_flight >= streams && engine.Step()) {
    }
  }
  while (engine.Step()) {
  }
  std::ofstream out(FromWorkspace(absl::GetFlag(FLAGS_out)));
  std::map<std::string, int> status;
  for (size_t i = 0; i < results.size(); ++i) {
    results[i]["text"] = texts[i];
    ++status[results[i].value("status", "?")];
    out << results[i].dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  }
  for (const auto& [k, n] : status) std::printf("%s: %d\n", k.c_str(), n);
  return absl::OkStatus();
}

absl::Status Main() {
  if (absl::GetFlag(FLAGS_mode) == "coverage") return RunCoverage();
  if (absl::GetFlag(FLAGS_mode) == "generate") return RunGenerate();
  return absl::InvalidArgumentError("--mode: coverage or generate");
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = tpserve::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "jsonschemabench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
