// Structured output's costs on SmolLM2's 49,152-token vocabulary:
//   --mode=mask    compile time per corpus case (cold) and the time to fill one token mask,
//                  walking each case's example token by token (tests/structured/walks.json:
//                  the same ids bench/structured_peer_bench.py walks through XGrammar's and
//                  llguidance's Python wheels);
//   --mode=decode  decode tok/s of the served engine (the real model in this process) with and
//                  without a constraint, at --streams concurrent requests, and with jump-forward
//                  on and off.
//
//   bazel run -c opt //bench:structured_bench -- --mode=mask --corpus_dir=$PWD/tests/structured
//   bazel run -c opt //bench:structured_bench -- --mode=decode --streams=1,8
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "bench/engine_bench_support.h"
#include "coordinator/admission.h"
#include "coordinator/engine.h"
#include "coordinator/model_bundle.h"
#include "coordinator/structured/compiler.h"
#include "coordinator/structured/corpus.h"
#include "coordinator/structured/matcher.h"
#include "model/bundled_model.h"
#include "worker/local_executor.h"

ABSL_FLAG(std::string, mode, "mask", "mask or decode");
ABSL_FLAG(std::string, model, "", "GGUF file (default: the bundled SmolLM2)");
ABSL_FLAG(std::string, corpus_dir, "tests/structured", "where corpus.json and walks.json are");
ABSL_FLAG(int, repeats, 3, "mask: walks per case; decode: runs per setting (median reported)");
ABSL_FLAG(std::string, streams, "1,8", "decode: concurrent requests");
ABSL_FLAG(int, max_tokens, 64, "decode: tokens per request at most");
ABSL_FLAG(int, threads, 0, "decode: threads of the one rank (0: all cores)");

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

absl::Status RunMask(const ModelBundle& bundle, const std::vector<CorpusCase>& cases) {
  const int32_t vocab = static_cast<int32_t>(bundle.files.config.vocab_size);
  const std::vector<int32_t> eos = bundle.EosTokenIds();
  std::vector<double> all_mask_us;
  std::printf("| case | compile ms | mask us p50 | mask us p99 | steps |\n|---|---|---|---|---|\n");
  for (const CorpusCase& c : cases) {
    std::vector<double> compile_ms, mask_us;
    for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
      // A fresh compiler each time: a cold compile, not a cache hit.
      TP_ASSIGN_OR_RETURN(std::unique_ptr<ConstraintCompiler> compiler,
                          ConstraintCompiler::Create(*bundle.tokenizer, vocab, eos));
      const Clock::time_point t0 = Clock::now();
      TP_ASSIGN_OR_RETURN(std::shared_ptr<const CompiledConstraint> compiled,
                          compiler->Compile(c.spec));
      compile_ms.push_back(Seconds(Clock::now() - t0) * 1e3);
      ConstraintMatcher m(compiled);
      std::vector<int32_t> mask(TokenMaskWords(vocab));
      std::vector<int32_t> walk = c.walk;
      walk.push_back(eos[0]);
      for (int32_t id : walk) {
        const Clock::time_point m0 = Clock::now();
        m.FillMask(absl::MakeSpan(mask));
        mask_us.push_back(Seconds(Clock::now() - m0) * 1e6);
        if (!m.Accept(id)) return absl::InternalError(c.name + ": the walk left the grammar");
      }
    }
    all_mask_us.insert(all_mask_us.end(), mask_us.begin(), mask_us.end());
    std::printf("| %s | %.1f | %.1f | %.1f | %zu |\n", c.name.c_str(), Percentile(compile_ms, 0.5),
                Percentile(mask_us, 0.5), Percentile(mask_us, 0.99), c.walk.size() + 1);
  }
  std::printf("\nall %zu masks: p50 %.1f us, p99 %.1f us\n", all_mask_us.size(),
              Percentile(all_mask_us, 0.5), Percentile(all_mask_us, 0.99));
  return absl::OkStatus();
}

struct DecodeResult {
  double tok_s = 0;
  std::vector<int64_t> per_request;  // tokens each request generated
  int64_t tokens = 0;
  int64_t steps = 0;
  int64_t jumped = 0;
  double mask_wait_ms_per_step = 0;  // the step waited for masks after the forward pass
  int valid_end = 0;  // constrained requests that ended their document
};

// `lengths`, when given, fixes each free-text request's length (ignore_eos): the same
// per-request token counts as a constrained run, so both keep the same batch occupancy.
absl::StatusOr<DecodeResult> ServeOnce(const ModelBundle& bundle, const ConstraintCompiler* compiler,
                                       const std::vector<CorpusCase>& cases, int streams,
                                       bool constrained, bool jump_forward,
                                       const std::vector<int64_t>& lengths) {
  RankLoad load;
  load.num_kv_blocks = 256;
  load.block_size_tokens = 16;
  load.max_tokens_per_step = 1024;
  load.model.max_logit_rows = streams;
  load.threads_per_rank = absl::GetFlag(FLAGS_threads) > 0
                                 ? absl::GetFlag(FLAGS_threads)
                                 : static_cast<int>(std::thread::hardware_concurrency());
  TP_ASSIGN_OR_RETURN(std::unique_ptr<LocalExecutor> exec,
                      LocalExecutor::Create(bundle.files, load));
  EngineOptions eo;
  eo.num_kv_blocks = 256;
  eo.block_size_tokens = 16;
  eo.context_length = 2048;
  eo.scheduler.max_num_seqs = streams;
  eo.scheduler.max_tokens_per_step = 1024;
  eo.eos_token_ids = bundle.EosTokenIds();
  eo.jump_forward = jump_forward;
  Engine engine(eo, std::move(exec), &*bundle.tokenizer);
  const Admitter door = bundle.Door(eo.context_length, engine.kv_capacity(), compiler);
  std::vector<Clock::time_point> first(streams), last(streams);
  std::vector<int64_t> tokens(streams, 0);
  std::vector<bool> started(streams, false);
  DecodeResult result;
  std::vector<const CorpusCase*> schemas;
  for (const CorpusCase& c : cases) {
    if (c.spec.kind == ConstraintKind::kJsonSchema) schemas.push_back(&c);
  }
  if (schemas.empty()) return absl::InternalError("no json_schema cases");
  for (int i = 0; i < streams; ++i) {
    const CorpusCase* c = schemas[i % schemas.size()];  // the json_schema cases, in turn
    tpserve::v1::GenerateRequest proto;
    tpserve::v1::ChatMessage* m = proto.mutable_chat()->add_messages();
    m->set_role("user");
    m->set_content(c->prompt);
    proto.mutable_sampling()->set_temperature(0.0f);
    proto.set_max_new_tokens(absl::GetFlag(FLAGS_max_tokens));
    if (constrained) {
      proto.set_json_schema(c->spec.text);
    } else {
      proto.set_ignore_eos(true);
      if (!lengths.empty()) proto.set_max_new_tokens(static_cast<int32_t>(lengths[i]));
    }
    TP_ASSIGN_OR_RETURN(AdmittedRequest r, door.Admit(proto));
    TP_RETURN_IF_ERROR(engine
                           .Submit(std::move(r),
                                   [&, i](GenerationEvent e) {
                                     const Clock::time_point now = Clock::now();
                                     if (!e.token_ids.empty() && !started[i]) first[i] = now;
                                     started[i] = started[i] || !e.token_ids.empty();
                                     // Every token generated, the constrained run's EOS
                                     // included (its step is work like any other).
                                     if (e.finish != FinishReason::kNone) {
                                       tokens[i] = e.usage.completion_tokens;
                                       last[i] = now;
                                     }
                                     if (e.structured.has_value() && e.structured->completed) {
                                       ++result.valid_end;
                                     }
                                   })
                           .status());
  }
  while (engine.Step()) {
  }
  // Decode throughput: tokens generated after each request's first, over the span from the
  // earliest first token to the latest end (prefill excluded, as in model_bench). A constrained
  // request's EOS counts: the free-text run then generates as many tokens (ignore_eos), so both
  // take the same steps with the same batch.
  const Clock::time_point start = *std::min_element(first.begin(), first.end());
  const Clock::time_point end = *std::max_element(last.begin(), last.end());
  for (int64_t t : tokens) result.tokens += std::max<int64_t>(0, t - 1);
  result.per_request = tokens;
  result.tok_s = result.tokens / Seconds(end - start);
  result.steps = engine.stats().steps;
  result.jumped = engine.stats().jump_forward_tokens;
  result.mask_wait_ms_per_step = engine.stats().mask_wait_s * 1e3 / std::max<int64_t>(1, result.steps);
  return result;
}

absl::Status RunDecode(const ModelBundle& bundle, const std::vector<CorpusCase>& cases) {
  const int32_t vocab = static_cast<int32_t>(bundle.files.config.vocab_size);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<ConstraintCompiler> compiler,
                      ConstraintCompiler::Create(*bundle.tokenizer, vocab, bundle.EosTokenIds()));
  std::printf("| streams | setting | decode tok/s (median) | tokens | steps | jump-forward tokens | "
              "mask wait ms/step | completed |\n|---|---|---|---|---|---|---|---|\n");
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_streams), ',')) {
    int streams = 0;
    if (!absl::SimpleAtoi(s, &streams) || streams < 1) {
      return absl::InvalidArgumentError("--streams: a list of positive integers");
    }
    // The constrained run first: the free-text run then generates exactly as many tokens per
    // request (the same batch shrinking as documents end), so only the constraint differs.
    struct Setting { const char* name; bool constrained, jump; };
    std::vector<int64_t> lengths;
    for (const Setting& setting : {Setting{"json_schema, jump-forward off", true, false},
                                   Setting{"free text, same lengths", false, false},
                                   Setting{"json_schema, jump-forward on", true, true}}) {
      std::vector<DecodeResult> runs;
      for (int rep = 0; rep < absl::GetFlag(FLAGS_repeats); ++rep) {
        TP_ASSIGN_OR_RETURN(DecodeResult r, ServeOnce(bundle, compiler.get(), cases, streams,
                                                      setting.constrained, setting.jump,
                                                      setting.constrained ? std::vector<int64_t>{}
                                                                          : lengths));
        runs.push_back(r);
      }
      if (setting.constrained && !setting.jump) lengths = runs[0].per_request;
      std::sort(runs.begin(), runs.end(),
                [](const DecodeResult& a, const DecodeResult& b) { return a.tok_s < b.tok_s; });
      const DecodeResult& med = runs[runs.size() / 2];
      std::printf("| %d | %s | %.1f | %lld | %lld | %lld | %.3f | %d/%d |\n", streams, setting.name,
                  med.tok_s, static_cast<long long>(med.tokens), static_cast<long long>(med.steps),
                  static_cast<long long>(med.jumped), med.mask_wait_ms_per_step,
                  setting.constrained ? med.valid_end : 0,
                  setting.constrained ? streams : 0);
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

absl::Status Main() {
  std::string path = absl::GetFlag(FLAGS_model);
  TP_ASSIGN_OR_RETURN(ModelBundle bundle, LoadBenchModel(path));
  const std::string dir = absl::GetFlag(FLAGS_corpus_dir);
  TP_ASSIGN_OR_RETURN(std::vector<CorpusCase> cases,
                      LoadCorpus(dir + "/corpus.json", dir + "/walks.json"));
  if (absl::GetFlag(FLAGS_mode) == "mask") return RunMask(bundle, cases);
  if (absl::GetFlag(FLAGS_mode) == "decode") return RunDecode(bundle, cases);
  return absl::InvalidArgumentError("--mode: mask or decode");
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = tpserve::Main();
  if (!s.ok()) {
    std::fprintf(stderr, "structured_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
