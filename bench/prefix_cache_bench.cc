// Time to first token of two requests that share a long system prompt, with the prefix cache on
// and off: the real model in this process, served by the Engine as the server does.
//
//   bazel run -c opt //bench:prefix_cache_bench -- --system_tokens=1000 --repeats=5
//
// Each repeat builds a fresh engine (empty cache), serves request A (system prompt + question A)
// to its first token, then request B (same system prompt + question B). Medians are reported.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "bench/engine_bench_support.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "model/bundled_model.h"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, model, "", "GGUF file (default: the bundled SmolLM2)");
ABSL_FLAG(int, system_tokens, 1000, "approximate length of the shared system prompt");
ABSL_FLAG(int, repeats, 5, "cold/warm pairs per mode; medians are reported");
ABSL_FLAG(int, threads, 0, "threads of the one rank (0: all cores)");
ABSL_FLAG(std::string, dump_prompts, "",
          "also write the two prompts' token ids here as JSON {\"a\": [...], \"b\": [...]} "
          "(for bench/llama_cpp_prefix_bench.py, the peer)");

namespace tpserve {
namespace {

constexpr int32_t kBlockTokens = 16;

struct Pair {
  double cold_s = 0, warm_s = 0;
  int32_t warm_cached_tokens = 0;
};

absl::StatusOr<Pair> ServePair(const ModelBundle& bundle, bool caching,
                               const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                               int threads) {
  const int32_t num_blocks = static_cast<int32_t>(4 * (a.size() + b.size()) / kBlockTokens + 8);
  RankLoad load;
  load.threads_per_rank = threads;
  load.num_kv_blocks = num_blocks;
  load.block_size_tokens = kBlockTokens;
  load.max_tokens_per_step = 512;
  load.model.max_logit_rows = 1;
  absl::StatusOr<std::unique_ptr<LocalExecutor>> exec =
      LocalExecutor::Create(bundle.files, load);
  if (!exec.ok()) return exec.status();
  EngineOptions eo;
  eo.num_kv_blocks = num_blocks;
  eo.block_size_tokens = kBlockTokens;
  eo.context_length = 4096;
  eo.scheduler.max_num_seqs = 1;
  eo.scheduler.max_tokens_per_step = 512;
  eo.eos_token_ids = bundle.EosTokenIds();
  eo.enable_prefix_caching = caching;
  Engine engine(eo, *std::move(exec), &*bundle.tokenizer);
  Pair pair;
  for (const std::vector<int32_t>* prompt : {&a, &b}) {
    tpserve::v1::GenerateRequest proto;
    proto.mutable_token_ids()->mutable_ids()->Add(prompt->begin(), prompt->end());
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(1);
    TP_ASSIGN_OR_RETURN(AdmittedRequest r,
                        bundle.Door(eo.context_length, engine.kv_capacity()).Admit(proto));
    Usage usage;
    absl::StatusOr<int64_t> id = engine.Submit(std::move(r), [&](GenerationEvent e) {
      if (e.finish != FinishReason::kNone) usage = e.usage;
    });
    if (!id.ok()) return id.status();
    while (engine.Step()) {
    }
    (prompt == &a ? pair.cold_s : pair.warm_s) = usage.time_to_first_token_s;
    pair.warm_cached_tokens = usage.cached_tokens;
  }
  return pair;
}

int Run() {
  std::string path = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelBundle> bundle = LoadBenchModel(path);
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  const int threads = BenchThreads(absl::GetFlag(FLAGS_threads));
  const int system_tokens = absl::GetFlag(FLAGS_system_tokens);
  absl::StatusOr<std::vector<int32_t>> a =
      ShopPrompt(*bundle, system_tokens, "Where are the maps?");
  absl::StatusOr<std::vector<int32_t>> b =
      ShopPrompt(*bundle, system_tokens, "Which shelf has poetry?");
  if (!a.ok() || !b.ok()) {
    std::fprintf(stderr, "cannot encode the prompts\n");
    return 1;
  }
  if (!absl::GetFlag(FLAGS_dump_prompts).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_dump_prompts))
        << "{\"a\": [" << absl::StrJoin(*a, ", ") << "], \"b\": [" << absl::StrJoin(*b, ", ")
        << "]}\n";
  }
  std::printf("model %s, %d threads, prompts of %zu and %zu tokens, blocks of %d tokens\n",
              path.c_str(), threads, a->size(), b->size(), kBlockTokens);
  std::printf("%-6s %12s %12s %8s %14s\n", "cache", "cold TTFT ms", "warm TTFT ms", "ratio",
              "warm cached");
  for (bool caching : {false, true}) {
    std::vector<double> cold, warm;
    int32_t cached = 0;
    for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
      absl::StatusOr<Pair> p = ServePair(*bundle, caching, *a, *b, threads);
      if (!p.ok()) {
        std::fprintf(stderr, "%s\n", std::string(p.status().message()).c_str());
        return 1;
      }
      cold.push_back(p->cold_s);
      warm.push_back(p->warm_s);
      cached = p->warm_cached_tokens;
    }
    std::printf("%-6s %12.1f %12.1f %7.1fx %14d\n", caching ? "on" : "off", 1e3 * Median(cold),
                1e3 * Median(warm), Median(cold) / Median(warm), cached);
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Run();
}
