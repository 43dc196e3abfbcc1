// Accuracy of each weight format and KV dtype against an exact F32 model of the same weights:
// perplexity, mean KL divergence and top-1 agreement per token, teacher-forced over texts.
// Not a test: figures go to docs/ACCURACY.md (bench/run_accuracy.sh runs this and llama.cpp).
//
//   bazel run -c opt //bench:accuracy -- (on one line)
//       --model=$HOME/.cache/tpserve/SmolLM2-135M-Instruct.Q4_1.gguf
//       --text=tests/accuracy/english.txt,tests/accuracy/korean.txt
//       --configs=fp8/f32,int4/f32,f32/fp8 --reference=f32/f32
//
// A config is WEIGHTS/KV: WEIGHTS "" or "checkpoint" holds them as stored, or names a preset
// (quantized on load from the checkpoint); KV is a --kv_dtype name. Each text is tokenized
// with the model's tokenizer and cut into windows of --window tokens, each scored from an
// empty cache (positions 0..window-1); every token after a window's first is predicted.
// KL(reference || config) uses the reference's full distribution at every position.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "checkpoint/stored_formats.h"
#include "comm/communicator.h"
#include "coordinator/model_bundle.h"
#include "kernels/cpu/cpu_backend.h"
#include "worker/llama_model.h"

ABSL_FLAG(std::string, model, "", "a .gguf file or a Hugging Face directory");
ABSL_FLAG(std::string, text, "", "comma-separated text files to score");
ABSL_FLAG(std::string, configs, "fp8/f32,int4/f32,f32/f16,f32/fp8",
          "comma-separated WEIGHTS/KV configurations to compare with the reference");
ABSL_FLAG(std::string, reference, "f32/f32", "the WEIGHTS/KV configuration taken as exact");
ABSL_FLAG(std::string, extra_models, "",
          "comma-separated NAME=PATH checkpoints of the same model to score too (e.g. an AWQ "
          "export), held as stored with the reference's KV dtype");
ABSL_FLAG(int64_t, window, 512, "tokens per scored window");
ABSL_FLAG(int64_t, max_windows, 4, "windows per text at most");
ABSL_FLAG(int, threads, 2, "CPU threads");

namespace tpserve {
namespace {

struct Scored {
  std::string name;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<SingleRankCommunicator> comm;
  std::unique_ptr<LlamaModel> model;
  DType kv = DType::kF32;
  std::shared_ptr<const WeightSource> weights;  // keeps an extra checkpoint's views alive
  double nll = 0, kl = 0;
  int64_t agree = 0, tokens = 0;
};

absl::StatusOr<std::unique_ptr<Scored>> Load(const std::string& name, const ModelFiles& files,
                                             const std::string& weights, const std::string& kv,
                                             int64_t window) {
  auto s = std::make_unique<Scored>();
  s->name = name;
  s->weights = files.weights;
  TP_ASSIGN_OR_RETURN(s->kv, ParseKvDtype(kv));
  s->backend = std::make_unique<CpuBackend>(CpuBackendOptions{absl::GetFlag(FLAGS_threads)});
  s->comm = std::make_unique<SingleRankCommunicator>();
  LlamaLoadOptions load;
  load.max_tokens_per_step = window;
  TP_ASSIGN_OR_RETURN(load.formats,
                      ResolveWeightFormats(files.stored_formats, weights, files.config, 1));
  load.scheme = files.scheme;
  TP_ASSIGN_OR_RETURN(s->model, LlamaModel::Load(files.config, *files.weights, {0, 1},
                                                 s->backend.get(), s->comm.get(), load));
  return s;
}

// Logits [n, vocab] of `tokens` from an empty cache.
absl::StatusOr<std::vector<float>> Logits(Scored& s, const std::vector<int32_t>& tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size()), bs = 16;
  TP_ASSIGN_OR_RETURN(std::unique_ptr<KvCache> cache,
                      KvCache::Create(s.model->KvShape((n + bs - 1) / bs, bs, s.kv), *s.backend));
  StepBatch batch;
  std::vector<int32_t> table((n + bs - 1) / bs);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  batch.Add(/*seq_id=*/0, 0, tokens, table, std::ssize(tokens));
  std::vector<float> logits(n * s.model->config().vocab_size);
  TP_RETURN_IF_ERROR(s.model->Forward(batch, cache.get(), logits.data()));
  return logits;
}

// In place: row -> log softmax(row), in f64.
void LogSoftmax(float* row, int64_t v, std::vector<double>* out) {
  double max = row[0];
  for (int64_t i = 1; i < v; ++i) max = std::max(max, double{row[i]});
  double sum = 0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(row[i] - max);
  const double lse = max + std::log(sum);
  out->resize(v);
  for (int64_t i = 0; i < v; ++i) (*out)[i] = row[i] - lse;
}

int64_t ArgMax(const std::vector<double>& v) {
  return std::max_element(v.begin(), v.end()) - v.begin();
}

absl::Status ScoreWindow(const std::vector<int32_t>& tokens, Scored& ref,
                         std::vector<std::unique_ptr<Scored>>& others) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t vocab = ref.model->config().vocab_size;
  TP_ASSIGN_OR_RETURN(std::vector<float> ref_logits, Logits(ref, tokens));
  std::vector<std::vector<float>> logits;
  for (auto& o : others) {
    TP_ASSIGN_OR_RETURN(std::vector<float> l, Logits(*o, tokens));
    logits.push_back(std::move(l));
  }
  std::vector<double> p, q;
  for (int64_t t = 0; t + 1 < n; ++t) {
    LogSoftmax(ref_logits.data() + t * vocab, vocab, &p);
    const int32_t next = tokens[t + 1];
    ref.nll -= p[next];
    ++ref.tokens;
    ++ref.agree;
    const int64_t ref_top = ArgMax(p);
    for (size_t i = 0; i < others.size(); ++i) {
      Scored& o = *others[i];
      LogSoftmax(logits[i].data() + t * vocab, vocab, &q);
      double kl = 0;
      for (int64_t j = 0; j < vocab; ++j) kl += std::exp(p[j]) * (p[j] - q[j]);
      o.kl += kl;
      o.nll -= q[next];
      o.agree += ArgMax(q) == ref_top;
      ++o.tokens;
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> List(const std::string& comma_separated) {
  return absl::StrSplit(comma_separated, ',', absl::SkipEmpty());
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot read --text file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status Run() {
  TP_ASSIGN_OR_RETURN(ModelBundle bundle, LoadModelBundle(absl::GetFlag(FLAGS_model)));
  const int64_t window = absl::GetFlag(FLAGS_window);
  auto split_config = [](const std::string& c) -> std::pair<std::string, std::string> {
    const std::vector<std::string> parts = absl::StrSplit(c, '/');
    return {parts[0], parts.size() > 1 ? parts[1] : "f32"};
  };
  const auto [ref_w, ref_kv] = split_config(absl::GetFlag(FLAGS_reference));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<Scored> ref,
                      Load("reference " + absl::GetFlag(FLAGS_reference), bundle.files, ref_w,
                           ref_kv, window));
  std::vector<std::unique_ptr<Scored>> others;
  for (const std::string& c : List(absl::GetFlag(FLAGS_configs))) {
    const auto [w, kv] = split_config(c);
    TP_ASSIGN_OR_RETURN(std::unique_ptr<Scored> s, Load(c, bundle.files, w, kv, window));
    others.push_back(std::move(s));
  }
  for (const std::string& m : List(absl::GetFlag(FLAGS_extra_models))) {
    const std::vector<std::string> kv = absl::StrSplit(m, absl::MaxSplits('=', 1));
    TP_ASSIGN_OR_RETURN(ModelFiles files, OpenModelFiles(kv.at(1)));
    TP_ASSIGN_OR_RETURN(std::unique_ptr<Scored> s, Load(kv.at(0), files, "", ref_kv, window));
    others.push_back(std::move(s));
  }
  std::printf("%-28s %-10s %8s %10s %9s %12s %8s\n", "config", "text", "tokens", "ppl",
              "ppl vs", "mean KL", "top-1");
  for (const std::string& path : List(absl::GetFlag(FLAGS_text))) {
    TP_ASSIGN_OR_RETURN(std::string text, ReadText(path));
    EncodeOptions options;
    TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, bundle.tokenizer->Encode(text, options));
    ref->nll = ref->kl = 0;
    ref->agree = ref->tokens = 0;
    for (auto& o : others) {
      o->nll = o->kl = 0;
      o->agree = o->tokens = 0;
    }
    for (int64_t w = 0; w < absl::GetFlag(FLAGS_max_windows); ++w) {
      const int64_t begin = w * window;
      if (begin + 2 > static_cast<int64_t>(ids.size())) break;
      const int64_t end = std::min<int64_t>(ids.size(), begin + window);
      TP_RETURN_IF_ERROR(ScoreWindow(std::vector<int32_t>(ids.begin() + begin, ids.begin() + end),
                                     *ref, others));
    }
    const std::string name = path.substr(path.find_last_of('/') + 1);
    const double ref_ppl = std::exp(ref->nll / ref->tokens);
    std::printf("%-28s %-10s %8lld %10.4f %8.2f%% %12s %7.2f%%\n", ref->name.c_str(),
                name.c_str(), static_cast<long long>(ref->tokens), ref_ppl, 0.0, "0", 100.0);
    for (auto& o : others) {
      const double ppl = std::exp(o->nll / o->tokens);
      std::printf("%-28s %-10s %8lld %10.4f %+8.2f%% %12.6f %7.2f%%\n", o->name.c_str(),
                  name.c_str(), static_cast<long long>(o->tokens), ppl,
                  100.0 * (ppl / ref_ppl - 1.0), o->kl / o->tokens,
                  100.0 * o->agree / o->tokens);
    }
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status s = tpserve::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "accuracy: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
