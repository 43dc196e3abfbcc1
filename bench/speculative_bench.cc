// Speculative decoding on the real model in this process, served by the Engine as the server
// does: the same greedy requests with speculation off, with prompt lookup (n-gram) and with a
// draft model, at several stream counts, per task. The target is SmolLM2 held as --weights
// (bf16 by default, quantized on load from the GGUF); the draft is the GGUF as stored (Q4_1).
// Greedy tokens are the same in every mode (the bench checks it), so tokens/s compare like for
// like.
//
//   bazel run -c opt //bench:speculative_bench -- --streams=1,4,8,16 --dump_prompts=/tmp/p.json
//
// Tasks: input-grounded ones (summarise a given text, edit given code, extract from a given
// document), where the output quotes the input, and open-ended chat. With N streams, N copies
// of the task's request run at once. Reported per (task, streams, mode): wall seconds to the
// last token (median of the timed rounds of one warm engine), tokens/s, the speed-up over off,
// the drafts' acceptance rate and the mean accepted length (tokens per verifying step), steps,
// and the milliseconds per target step and per draft-model step (the rest of the wall time).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "bench/engine_bench_support.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/speculative/draft_model.h"
#include "model/weight_formats.h"
#include "nlohmann/json.hpp"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, model, "", "GGUF file (default: the bundled SmolLM2)");
ABSL_FLAG(std::string, weights, "bf16", "the target's weights, a preset (\"\" = as stored)");
ABSL_FLAG(std::string, streams, "1,4,8,16", "concurrent requests, comma-separated");
ABSL_FLAG(std::string, modes, "off,ngram,draft", "speculation modes to run");
ABSL_FLAG(std::string, tasks, "", "tasks to run (default: all)");
ABSL_FLAG(int, new_tokens, 96, "max new tokens per request (greedy; EOS ends it)");
ABSL_FLAG(int, k, 4, "--num_speculative_tokens");
ABSL_FLAG(bool, adaptive, true, "adaptive K");
ABSL_FLAG(int, max_batch, 4, "--speculative_max_batch (0 = no limit)");
ABSL_FLAG(int, repeats, 3, "timed rounds per configuration, after an untimed one; medians");
ABSL_FLAG(int, threads, 0, "threads of the one rank (0: all cores)");
ABSL_FLAG(std::string, dump_prompts, "",
          "also write each task's prompt token ids here (JSON) for bench/llama_cpp_spec_bench.py");

namespace tpserve {
namespace {

constexpr int32_t kBlockTokens = 16;

struct Task {
  std::string name;
  std::string prompt;
};

std::vector<Task> Tasks() {
  return {
      {"summarise",
       "Summarise this text in two sentences, keeping its key phrases.\n\n"
       "The city library will close its main reading room for renovation from the first of "
       "March to the end of June. During the renovation, the reading room will get new "
       "lighting, new shelves and a quiet study area with forty desks. Books from the reading "
       "room will be available at the east branch, which will extend its opening hours to "
       "nine in the evening on weekdays. The library asks visitors to return borrowed books "
       "to the east branch while the main building is closed."},
      {"edit_code",
       "Rename the variable `total` to `sum_of_prices` in this Python function and print the "
       "whole function.\n\n"
       "def order_total(items, tax_rate):\n"
       "    total = 0\n"
       "    for item in items:\n"
       "        total += item.price * item.quantity\n"
       "    total = total * (1 + tax_rate)\n"
       "    return round(total, 2)\n"},
      {"extract",
       "Extract the name, email, phone number and city of each person in this document as a "
       "list of lines `name; email; phone; city`.\n\n"
       "Our team: Anna Berg (anna.berg@example.com, +46 70 123 45 67) works in Stockholm. "
       "Carlos Ruiz (carlos.ruiz@example.com, +34 612 345 678) works in Madrid. Mei Tanaka "
       "(mei.tanaka@example.com, +81 90 1234 5678) works in Osaka."},
      {"open_chat", "Tell me about your favourite season and why you like it."},
  };
}

struct Result {
  double wall_s = 0;
  int64_t tokens = 0;
  int64_t drafted = 0, accepted = 0, verify_steps = 0, steps = 0, draft_steps = 0;
  double target_step_s = 0;  // the engine's steps (Execute), summed
  std::vector<std::vector<int32_t>> outputs;
};

absl::StatusOr<std::unique_ptr<LocalExecutor>> Executor(const ModelBundle& bundle,
                                                        const std::string& weights, int threads,
                                                        int32_t blocks, int64_t rows) {
  RankLoad load;
  load.threads_per_rank = threads;
  load.num_kv_blocks = blocks;
  load.block_size_tokens = kBlockTokens;
  load.max_tokens_per_step = 512;
  load.model.max_logit_rows = static_cast<int32_t>(rows);
  load.model.weights = weights;  // "" = as stored; a preset quantizes on load
  return LocalExecutor::Create(bundle.files, load);
}

// One engine per configuration, as a server has: a first, untimed round lets the policy
// measure this machine's step costs (and fills the prefix cache with the prompt, as a warm
// server's would be), then `repeats` timed rounds; the last one's figures.
absl::StatusOr<Result> Serve(const ModelBundle& bundle, SpeculativeMethod method,
                             const std::vector<int32_t>& prompt, int streams, int threads,
                             int repeats, std::vector<double>* walls) {
  const int new_tokens = absl::GetFlag(FLAGS_new_tokens);
  const int32_t blocks =
      static_cast<int32_t>(streams * (prompt.size() + new_tokens + 32) / kBlockTokens + 4 * streams);
  const int k = absl::GetFlag(FLAGS_k);
  const int64_t rows = int64_t{streams} * (1 + k);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<LocalExecutor> target,
                      Executor(bundle, absl::GetFlag(FLAGS_weights), threads, blocks, rows));
  EngineOptions eo;
  eo.num_kv_blocks = blocks;
  eo.block_size_tokens = kBlockTokens;
  eo.context_length = 4096;
  eo.scheduler.max_num_seqs = streams;
  eo.scheduler.max_tokens_per_step = 512;
  eo.scheduler.max_logit_rows = static_cast<int32_t>(rows);
  eo.eos_token_ids = bundle.EosTokenIds();
  eo.speculative.method = method;
  eo.speculative.num_speculative_tokens = k;
  eo.speculative.adaptive = absl::GetFlag(FLAGS_adaptive);
  eo.speculative.max_batch = absl::GetFlag(FLAGS_max_batch);
  std::unique_ptr<Proposer> proposer;
  DraftModelProposer* draft_proposer = nullptr;
  if (method == SpeculativeMethod::kDraft) {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<LocalExecutor> draft,
                        Executor(bundle, "", threads, blocks, streams));
    DraftModelOptions d;
    d.max_logit_rows = streams;
    auto p = std::make_unique<DraftModelProposer>(std::move(draft), d);
    draft_proposer = p.get();
    proposer = std::move(p);
  }
  Engine engine(eo, std::move(target), &*bundle.tokenizer, std::move(proposer));
  const Admitter door = bundle.Door(eo.context_length, engine.kv_capacity());
  Result r;
  for (int round = 0; round <= repeats; ++round) {
    const EngineStats before = engine.stats();
    r = Result{};
    r.outputs.resize(streams);
    const absl::Time start = absl::Now();
    for (int i = 0; i < streams; ++i) {
      tpserve::v1::GenerateRequest proto;
      proto.mutable_token_ids()->mutable_ids()->Add(prompt.begin(), prompt.end());
      proto.mutable_sampling()->set_temperature(0.0f);
      proto.set_max_new_tokens(new_tokens);
      TP_ASSIGN_OR_RETURN(AdmittedRequest request, door.Admit(proto));
      std::vector<int32_t>* out = &r.outputs[i];
      TP_RETURN_IF_ERROR(engine.Submit(std::move(request), [out](GenerationEvent e) {
        out->insert(out->end(), e.token_ids.begin(), e.token_ids.end());
      }).status());
    }
    const int64_t draft_steps_before = draft_proposer != nullptr ? draft_proposer->steps() : 0;
    while (engine.Step()) {
    }
    r.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (round > 0) walls->push_back(r.wall_s);
    const EngineStats stats = engine.stats();
    for (const auto& o : r.outputs) r.tokens += static_cast<int64_t>(o.size());
    r.drafted = stats.spec_draft_tokens - before.spec_draft_tokens;
    r.accepted = stats.spec_accepted_tokens - before.spec_accepted_tokens;
    r.verify_steps = stats.spec_verify_steps - before.spec_verify_steps;
    r.steps = stats.steps - before.steps;
    r.target_step_s = stats.step_wall_s - before.step_wall_s;
    if (draft_proposer != nullptr) r.draft_steps = draft_proposer->steps() - draft_steps_before;
  }
  return r;
}

int Main() {
  std::string path = absl::GetFlag(FLAGS_model);
  absl::StatusOr<ModelBundle> bundle = LoadBenchModel(path);
  if (!bundle.ok()) {
    std::fprintf(stderr, "%s\n", std::string(bundle.status().message()).c_str());
    return 1;
  }
  const int threads = BenchThreads(absl::GetFlag(FLAGS_threads));
  std::vector<int> streams;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(s, &n) || n < 1) {
      std::fprintf(stderr, "--streams: bad count '%s'\n", std::string(s).c_str());
      return 2;
    }
    streams.push_back(n);
  }
  std::vector<SpeculativeMethod> modes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    absl::StatusOr<SpeculativeMethod> m = ParseSpeculativeMethod(s);
    if (!m.ok()) {
      std::fprintf(stderr, "--modes: %s\n", std::string(m.status().message()).c_str());
      return 2;
    }
    modes.push_back(*m);
  }
  const std::vector<std::string> only =
      absl::GetFlag(FLAGS_tasks).empty()
          ? std::vector<std::string>{}
          : absl::StrSplit(absl::GetFlag(FLAGS_tasks), ',');
  nlohmann::json dump = nlohmann::json::object();
  std::printf("model %s, target weights %s, draft as stored, %d threads, K=%d%s, max_batch %d, "
              "%d new tokens (greedy)\n",
              path.c_str(), absl::GetFlag(FLAGS_weights).c_str(), threads, absl::GetFlag(FLAGS_k),
              absl::GetFlag(FLAGS_adaptive) ? " adaptive" : "", absl::GetFlag(FLAGS_max_batch),
              absl::GetFlag(FLAGS_new_tokens));
  std::printf("| task | streams | mode | wall s | tokens | tokens/s | vs off | accepted | "
              "mean accepted length | steps | ms per step | ms per draft step |\n"
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Task& task : Tasks()) {
    if (!only.empty() && std::find(only.begin(), only.end(), task.name) == only.end()) continue;
    absl::StatusOr<std::vector<int32_t>> prompt =
        bundle->EncodeChat({{"user", task.prompt}});
    if (!prompt.ok()) {
      std::fprintf(stderr, "%s\n", std::string(prompt.status().message()).c_str());
      return 1;
    }
    dump[task.name] = *prompt;
    for (int n : streams) {
      double off_tps = 0;
      std::vector<std::vector<int32_t>> reference;
      for (SpeculativeMethod mode : modes) {
        std::vector<double> walls;
        absl::StatusOr<Result> r =
            Serve(*bundle, mode, *prompt, n, threads, absl::GetFlag(FLAGS_repeats), &walls);
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
          return 1;
        }
        const Result last = *std::move(r);
        if (reference.empty()) {
          reference = last.outputs;
        } else if (last.outputs != reference) {
          std::fprintf(stderr, "%s, %d streams, %s: the tokens differ from the first mode's\n",
                       task.name.c_str(), n, SpeculativeMethodName(mode));
          return 1;
        }
        const double wall = Median(walls);
        const double tps = static_cast<double>(last.tokens) / wall;
        if (mode == SpeculativeMethod::kOff) off_tps = tps;
        std::printf("| %s | %d | %s | %.2f | %lld | %.1f | %s | %s | %s | %lld | %.1f | %s |\n",
                    task.name.c_str(), n, SpeculativeMethodName(mode), wall,
                    static_cast<long long>(last.tokens), tps,
                    off_tps > 0 ? absl::StrFormat("%.2fx", tps / off_tps).c_str() : "-",
                    last.drafted > 0
                        ? absl::StrFormat("%.0f%%", 100.0 * last.accepted / last.drafted).c_str()
                        : "-",
                    last.verify_steps > 0
                        ? absl::StrFormat("%.2f", 1.0 + static_cast<double>(last.accepted) /
                                                            last.verify_steps).c_str()
                        : "-",
                    static_cast<long long>(last.steps), 1e3 * last.target_step_s / last.steps,
                    last.draft_steps > 0
                        ? absl::StrFormat("%.1f", 1e3 * (last.wall_s - last.target_step_s) /
                                                      last.draft_steps).c_str()
                        : "-");
        std::fflush(stdout);
      }
    }
  }
  if (!absl::GetFlag(FLAGS_dump_prompts).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_dump_prompts)) << dump.dump() << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
