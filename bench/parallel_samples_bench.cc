// Several samples of one long prompt: one request with n choices against n requests of one
// choice each (the same seeds: the same tokens), on the real model in this process, served by
// the Engine as the server does.
//
//   bazel run -c opt //bench:parallel_samples_bench -- --prompt_tokens=1000 --n=4 --repeats=3
//
// Modes, each on a fresh engine (empty prefix cache), medians of the repeats:
//   n=N          one request, n = N: choice 0 computes the prompt, the others take its full
//                blocks from the prefix cache once it has;
//   N together   N requests of n = 1 submitted at once: each computes the whole prompt (a
//                block is shared only once it is computed, and they compute it in the same
//                steps);
//   N in turn    N requests of n = 1, each after the previous ended: the 2nd..Nth find the
//                prompt in the prefix cache, but decode alone.
// Reported: wall time to the last token, prompt tokens computed (not taken from the cache) and
// decode steps.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "bench/engine_bench_support.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "model/bundled_model.h"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, model, "", "GGUF file (default: the bundled SmolLM2)");
ABSL_FLAG(int, prompt_tokens, 1000, "approximate length of the prompt");
ABSL_FLAG(int, n, 4, "samples of the prompt");
ABSL_FLAG(int, new_tokens, 32, "tokens each sample generates (EOS ignored)");
ABSL_FLAG(int, repeats, 3, "runs per mode; medians are reported");
ABSL_FLAG(int, threads, 0, "threads of the one rank (0: all cores)");
ABSL_FLAG(std::string, dump_prompt, "",
          "also write the prompt's token ids here as a JSON list (for "
          "bench/llama_cpp_samples_bench.py, the peer)");

namespace tpserve {
namespace {

constexpr int32_t kBlockTokens = 16;
constexpr uint64_t kSeed = 1234;

enum class Mode { kOneRequest, kTogether, kInTurn };

struct Run {
  double wall_s = 0;
  int64_t prompt_tokens_computed = 0;
  int64_t steps = 0;
};

absl::StatusOr<Run> Serve(const ModelBundle& bundle, Mode mode, const std::vector<int32_t>& prompt,
                          int n, int new_tokens, int threads) {
  const int32_t num_blocks =
      static_cast<int32_t>(n * (prompt.size() + new_tokens) / kBlockTokens + 2 * n + 8);
  RankLoad load;
  load.threads_per_rank = threads;
  load.num_kv_blocks = num_blocks;
  load.block_size_tokens = kBlockTokens;
  load.max_tokens_per_step = 512;
  load.model.max_logit_rows = n;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<LocalExecutor> exec,
                      LocalExecutor::Create(bundle.files, load));
  EngineOptions eo;
  eo.num_kv_blocks = num_blocks;
  eo.block_size_tokens = kBlockTokens;
  eo.context_length = 4096;
  eo.scheduler.max_num_seqs = n;
  eo.scheduler.max_tokens_per_step = 512;
  eo.eos_token_ids = bundle.EosTokenIds();
  Engine engine(eo, std::move(exec), &*bundle.tokenizer);
  const Admitter door = bundle.Door(eo.context_length, engine.kv_capacity());

  auto submit = [&](int choices, uint64_t seed) -> absl::Status {
    tpserve::v1::GenerateRequest proto;
    proto.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
    proto.mutable_sampling()->set_temperature(0.9f);
    proto.mutable_sampling()->set_seed(seed);
    proto.set_max_new_tokens(new_tokens);
    proto.set_ignore_eos(true);
    proto.set_n(choices);
    TP_ASSIGN_OR_RETURN(AdmittedRequest r, door.Admit(proto));
    return engine.Submit(std::move(r), [](GenerationEvent) {}).status();
  };
  auto drain = [&engine] {
    while (engine.Step()) {
    }
  };
  const absl::Time start = absl::Now();
  switch (mode) {
    case Mode::kOneRequest:
      TP_RETURN_IF_ERROR(submit(n, kSeed));
      drain();
      break;
    case Mode::kTogether:
      for (int i = 0; i < n; ++i) TP_RETURN_IF_ERROR(submit(1, kSeed + i));
      drain();
      break;
    case Mode::kInTurn:
      for (int i = 0; i < n; ++i) {
        TP_RETURN_IF_ERROR(submit(1, kSeed + i));
        drain();
      }
      break;
  }
  const EngineStats stats = engine.stats();
  return Run{absl::ToDoubleSeconds(absl::Now() - start), stats.prefix_cache_misses_tokens,
             stats.steps};
}

int Main() {
  std::string path = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelBundle> bundle = LoadBenchModel(path);
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  const int threads = BenchThreads(absl::GetFlag(FLAGS_threads));
  const int n = absl::GetFlag(FLAGS_n);
  const int new_tokens = absl::GetFlag(FLAGS_new_tokens);
  absl::StatusOr<std::vector<int32_t>> prompt =
      ShopPrompt(*bundle, absl::GetFlag(FLAGS_prompt_tokens), "Suggest a book for a rainy day.");
  if (!prompt.ok()) {
    std::fprintf(stderr, "cannot encode the prompt: %s\n",
                 std::string(prompt.status().message()).c_str());
    return 1;
  }
  if (!absl::GetFlag(FLAGS_dump_prompt).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_dump_prompt)) << "[" << absl::StrJoin(*prompt, ", ") << "]\n";
  }
  std::printf("model %s, %d threads, a prompt of %zu tokens, %d samples of %d tokens\n",
              path.c_str(), threads, prompt->size(), n, new_tokens);
  std::printf("%-12s %10s %16s %8s\n", "mode", "wall s", "prompt computed", "steps");
  for (Mode mode : {Mode::kOneRequest, Mode::kTogether, Mode::kInTurn}) {
    std::vector<double> wall;
    Run last;
    for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
      absl::StatusOr<Run> r = Serve(*bundle, mode, *prompt, n, new_tokens, threads);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      wall.push_back(r->wall_s);
      last = *r;
    }
    const std::string name = mode == Mode::kOneRequest ? "n=" + std::to_string(n)
                             : mode == Mode::kTogether ? std::to_string(n) + " together"
                                                       : std::to_string(n) + " in turn";
    std::printf("%-12s %10.2f %16lld %8lld\n", name.c_str(), Median(wall),
                static_cast<long long>(last.prompt_tokens_computed),
                static_cast<long long>(last.steps));
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
