// Prefill and decode throughput of SmolLM2 on the CPU backend, at batch 1, for each thread
// count given. Not a test: timings are only printed (see docs/PERFORMANCE.md and
// bench/run_bench.sh, which also runs llama.cpp on the same file and settings).
//
//   bazel run //bench:model_bench -- --threads=1,2 --prompt_tokens=512 --decode_tokens=64
//   bazel run -c opt //bench:model_bench -- --threads=2 --weights=bf16 --step_tokens=1,2,4,5,8,16
//
// The prompt is a fixed pseudo-random id sequence (the same formula as llama_cpp_bench.py),
// decode feeds back the greedy token. Each figure is the best of --repeats runs. Beside the
// wall-clock rates, *_cpu_ms_tok is the process CPU time per token (all threads): on a machine
// shared with other jobs it stays near the undisturbed cost, where wall time counts the waits
// for a core too.
//
// Beside each thread count: the DRAM ceiling measured in the same run (a streaming read of
// --stream_mib by that many threads; decode cannot beat bytes per token / that bandwidth), and
// with --batches, aggregate decode of B sequences at --batch_context cached positions each
// (random KV, bench/model_timings.h) against batch 1 at the same context.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "bench/model_timings.h"
#include "checkpoint/model_files.h"
#include "checkpoint/stored_formats.h"
#include "comm/communicator.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "worker/generate.h"
#include "worker/llama_model.h"

ABSL_FLAG(std::string, model, "",
          "GGUF path (default $TPSERVE_MODEL_DIR or ~/.cache/tpserve, SmolLM2 Q4_1)");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated thread counts");
ABSL_FLAG(int64_t, prompt_tokens, 512, "prefill length");
ABSL_FLAG(int64_t, decode_tokens, 64, "tokens decoded after the prompt");
ABSL_FLAG(int, repeats, 3, "runs per figure; the best is reported");
ABSL_FLAG(std::string, weights, "",
          "weight format: as stored (default) or a preset to quantize on load (fp8, int4, bf16...)");
ABSL_FLAG(std::string, kv_dtype, "f16", "KV cache dtype: f32, f16, bf16 or fp8 (the engine's default: f16)");
ABSL_FLAG(int64_t, stream_mib, 1024, "buffer of the DRAM streaming-read ceiling (0: skip)");
ABSL_FLAG(std::string, batches, "", "comma-separated batch sizes for aggregate decode (e.g. 8,16)");
ABSL_FLAG(int64_t, batch_context, 256, "cached positions of each sequence in the batched decode");
ABSL_FLAG(std::string, step_tokens, "",
          "comma-separated new-token counts m (e.g. 1,2,4,5,8,16): the median wall time of a step "
          "of m new tokens of one sequence, each with its logits (a verification step), after "
          "the prompt, and its cost against m = 1");
ABSL_FLAG(int, step_rounds, 15, "timed rounds of --step_tokens (each round times every m once)");
ABSL_FLAG(bool, profile, false,
          "also time every backend op and print where a decode step's time goes");

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

std::string DefaultModelPath() {
  const char* dir = std::getenv("TPSERVE_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string base =
      dir != nullptr ? dir : std::string(home ? home : ".") + "/.cache/tpserve";
  return base + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

volatile uint64_t g_stream_sink = 0;

// Bytes per second `threads` threads read from a `bytes` buffer, best of three passes: what
// one decode step's weights and KV could stream at most.
double StreamReadBytesPerSecond(int threads, int64_t bytes) {
  const int64_t words = bytes / 8;
  std::vector<uint64_t> buffer(words);
  for (int64_t i = 0; i < words; ++i) buffer[i] = static_cast<uint64_t>(i);  // touch every page
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const int64_t begin = words * t / threads, end = words * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0, d = 0;  // four independent chains
        for (int64_t i = begin; i + 4 <= end; i += 4) {
          a ^= buffer[i];
          b ^= buffer[i + 1];
          c ^= buffer[i + 2];
          d ^= buffer[i + 3];
        }
        g_stream_sink = a ^ b ^ c ^ d;  // a volatile store keeps the reads
      });
    }
    for (std::thread& t : pool) t.join();
    best = std::max(best, static_cast<double>(words * 8) / Seconds(start, Clock::now()));
  }
  return best;
}

// Weight bytes a decode step of one token reads on this rank: all but the embedding table, of
// which it reads one row per token (unless the LM head is the same table), and of a mixture of
// experts' routed experts only the top_k of num_experts the token chooses in each layer.
int64_t DecodeWeightBytes(const LlamaModel& model) {
  const MemoryFootprint fp = model.footprint();
  const auto role_bytes = [&](TensorRole r) {
    return fp.weight_bytes_by_role[static_cast<int>(r)];
  };
  int64_t bytes = fp.weight_bytes_resident;
  if (!model.config().tie_word_embeddings) bytes -= role_bytes(TensorRole::kEmbedding);
  const ExpertRouting& routing = model.config().moe.routing;
  if (routing.num_experts > 0) {
    const int64_t experts = role_bytes(TensorRole::kExpertGate) +
                            role_bytes(TensorRole::kExpertUp) + role_bytes(TensorRole::kExpertDown);
    bytes -= experts - experts * routing.top_k / routing.num_experts;
  }
  return bytes;
}

struct Figures {
  double prefill_tokens_per_s = 0;
  double decode_tokens_per_s = 0;
  double prefill_cpu_ms_per_token = 1e30;
  double decode_cpu_ms_per_token = 1e30;
  double decode_seconds = 0;
  CpuOpProfile decode_profile;  // with --profile: the decode steps' ops
};

// One line per op that took time, per decode token, and what no op accounts for (the model's
// host work between ops, the thread pool's hand-offs inside none, the logits copy).
void PrintProfile(const Figures& f, int64_t tokens) {
  const CpuOpProfile& p = f.decode_profile;
  const double per_token_ms = 1e3 * f.decode_seconds / tokens;
  std::printf("  decode step %.3f ms:", per_token_ms);
  for (int op = 0; op < CpuOpProfile::kNumOps; ++op) {
    if (p.calls[op] == 0) continue;
    std::printf(" %s %.3f (%lld)", CpuOpProfile::Name(op), 1e3 * p.seconds[op] / tokens,
                static_cast<long long>(p.calls[op] / tokens));
  }
  std::printf(" | outside ops %.3f ms\n", per_token_ms - 1e3 * p.TotalSeconds() / tokens);
}

// A KV cache for one sequence of `tokens` positions, in blocks of 16, and its block table.
struct OneSequence {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> table;
};
absl::StatusOr<OneSequence> OneSequenceCache(LlamaModel& model, Backend& backend,
                                             DType kv_dtype, int64_t tokens) {
  const int64_t block = 16;
  const int64_t blocks = (tokens + block - 1) / block;
  TP_ASSIGN_OR_RETURN(auto cache,
                      KvCache::Create(model.KvShape(blocks, block, kv_dtype), backend));
  OneSequence seq{std::move(cache), std::vector<int32_t>(blocks)};
  for (int64_t i = 0; i < blocks; ++i) seq.table[i] = static_cast<int32_t>(i);
  return seq;
}

absl::StatusOr<Figures> RunOnce(LlamaModel& model, CpuBackend& backend, DType kv_dtype,
                                const std::vector<int32_t>& prompt, int64_t decode_tokens) {
  const int64_t total = static_cast<int64_t>(prompt.size()) + decode_tokens;
  TP_ASSIGN_OR_RETURN(OneSequence seq, OneSequenceCache(model, backend, kv_dtype, total));
  auto& cache = seq.cache;
  const std::vector<int32_t>& table = seq.table;
  std::vector<float> logits(model.config().vocab_size);

  const Clock::time_point t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  StepBatch prefill;
  prefill.Add(/*seq_id=*/0, 0, prompt, table);
  if (absl::Status s = model.Forward(prefill, cache.get(), logits.data()); !s.ok()) return s;
  backend.ResetProfile();
  const Clock::time_point t1 = Clock::now();
  const double cpu1 = ProcessCpuSeconds();
  for (int64_t i = 0; i < decode_tokens; ++i) {
    StepBatch step;
    step.Add(/*seq_id=*/0, static_cast<int64_t>(prompt.size()) + i,
             std::vector<int32_t>{ArgMax(logits)}, table);
    if (absl::Status s = model.Forward(step, cache.get(), logits.data()); !s.ok()) return s;
  }
  const Clock::time_point t2 = Clock::now();
  const double cpu2 = ProcessCpuSeconds();
  return Figures{prompt.size() / Seconds(t0, t1),         decode_tokens / Seconds(t1, t2),
                 1e3 * (cpu1 - cpu0) / prompt.size(),     1e3 * (cpu2 - cpu1) / decode_tokens,
                 Seconds(t1, t2),                          backend.profile()};
}

// Steps of m new tokens of one sequence after `prompt`, every row with its logits, as a step
// that verifies m - 1 drafts: the median of `rounds` timings per m, rounds interleaving the m
// values so that a slow spell of the machine reaches all of them. Each step overwrites the same
// KV slots, so every m sees the same context.
absl::Status PrintStepCosts(LlamaModel& model, CpuBackend& backend, DType kv_dtype,
                            const std::vector<int32_t>& prompt, const std::vector<int64_t>& ms,
                            int rounds, int threads) {
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  TP_ASSIGN_OR_RETURN(OneSequence seq,
                      OneSequenceCache(model, backend, kv_dtype,
                                       static_cast<int64_t>(prompt.size()) + max_m));
  auto& cache = seq.cache;
  const std::vector<int32_t>& table = seq.table;
  std::vector<float> logits(max_m * model.config().vocab_size);
  StepBatch prefill;
  prefill.Add(/*seq_id=*/0, 0, prompt, table);
  TP_RETURN_IF_ERROR(model.Forward(prefill, cache.get(), logits.data()));
  std::vector<std::vector<double>> seconds(ms.size());
  std::vector<CpuOpProfile> profiles(ms.size());  // with --profile: each m's timed steps
  for (int r = -2; r < rounds; ++r) {  // two untimed rounds first
    for (size_t i = 0; i < ms.size(); ++i) {
      std::vector<int32_t> tokens(ms[i]);
      for (int64_t t = 0; t < ms[i]; ++t) tokens[t] = prompt[t % prompt.size()];
      StepBatch step;
      step.Add(/*seq_id=*/0, static_cast<int64_t>(prompt.size()), tokens, table,
               /*num_logits=*/ms[i]);
      backend.ResetProfile();
      const Clock::time_point t0 = Clock::now();
      TP_RETURN_IF_ERROR(model.Forward(step, cache.get(), logits.data()));
      if (r < 0) continue;
      seconds[i].push_back(Seconds(t0, Clock::now()));
      for (int op = 0; op < CpuOpProfile::kNumOps; ++op) {
        profiles[i].seconds[op] += backend.profile().seconds[op];
        profiles[i].calls[op] += backend.profile().calls[op];
      }
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double one = median(seconds[std::find(ms.begin(), ms.end(), 1) - ms.begin()]);
  for (size_t i = 0; i < ms.size(); ++i) {
    const double t = median(seconds[i]);
    std::printf("  step threads=%d context=%zu m=%lld: %.2f ms median of %d, x_m1 %.2f\n",
                threads, prompt.size(), static_cast<long long>(ms[i]), 1e3 * t, rounds,
                t / one);
    if (profiles[i].TotalSeconds() == 0) continue;
    std::printf("   ");
    for (int op = 0; op < CpuOpProfile::kNumOps; ++op) {
      if (profiles[i].calls[op] == 0) continue;
      std::printf(" %s %.3f", CpuOpProfile::Name(op), 1e3 * profiles[i].seconds[op] / rounds);
    }
    std::printf(" (ms per step, mean)\n");
  }
  return absl::OkStatus();
}

// Aggregate decode of `batch` sequences against one, each at `context` cached positions.
absl::Status PrintBatchedDecode(const ModelSpec& config, const ModelFiles& files,
                                const WeightFormats& formats, DType kv_dtype, int threads,
                                int64_t batch, int64_t context) {
  CpuBackend backend(CpuBackendOptions{.num_threads = threads});
  SingleRankCommunicator comm;
  TimingOptions t{.prefill_tokens = 16, .context_tokens = context, .batch = batch,
                  .decode_steps = 16, .warmup = 1, .runs = 3};
  LlamaLoadOptions load;
  load.max_tokens_per_step = TimingMaxStepTokens(t);
  load.max_logit_rows = TimingMaxLogitRows(t);
  load.formats = formats;
  load.scheme = files.scheme;
  TP_ASSIGN_OR_RETURN(auto model,
                      LlamaModel::Load(config, *files.weights, {0, 1}, &backend, &comm, load));
  TP_ASSIGN_OR_RETURN(auto cache, KvCache::Create(model->KvShape(TimingKvBlocks(t),
                                                                 t.block_size_tokens, kv_dtype),
                                                  backend));
  TP_RETURN_IF_ERROR(FillKvCache(backend, *cache, 1));
  TP_ASSIGN_OR_RETURN(ModelTimings times, TimeModel(*model, backend, *cache, t));
  const double one = 1.0 / times.decode_one.Median();
  const double many = batch / times.decode_batch.Median();
  std::printf("  batched decode threads=%d context=%lld: batch 1 %.1f tok/s, batch %lld %.1f "
              "tok/s aggregate (%.2fx)\n",
              threads, static_cast<long long>(context), one, static_cast<long long>(batch),
              many, many / one);
  return absl::OkStatus();
}

int Main() {
  std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) path = DefaultModelPath();
  auto files = OpenModelFiles(path);
  if (!files.ok()) {
    std::fprintf(stderr, "%s\n", std::string(files.status().message()).c_str());
    return 1;
  }
  const ModelSpec* config = &files->config;
  auto formats = ResolveWeightFormats(files->stored_formats, absl::GetFlag(FLAGS_weights),
                                      files->config, 1);
  auto kv_dtype = ParseKvDtype(absl::GetFlag(FLAGS_kv_dtype));
  if (!formats.ok() || !kv_dtype.ok()) {
    std::fprintf(stderr, "%s\n", std::string((formats.ok() ? kv_dtype.status()
                                                          : formats.status()).message()).c_str());
    return 1;
  }
  const int64_t prompt_len = absl::GetFlag(FLAGS_prompt_tokens);
  std::vector<int32_t> prompt(prompt_len);
  for (int64_t i = 0; i < prompt_len; ++i) {
    prompt[i] = static_cast<int32_t>((i * 7919 + 13) % config->vocab_size);
  }
  std::vector<int64_t> step_tokens;
  for (absl::string_view m : absl::StrSplit(absl::GetFlag(FLAGS_step_tokens), ',',
                                            absl::SkipEmpty())) {
    int64_t tokens = 0;
    if (!absl::SimpleAtoi(m, &tokens) || tokens < 1 || tokens > 4096) {
      std::fprintf(stderr, "--step_tokens: entry '%s' is not a count in [1, 4096]\n",
                   std::string(m).c_str());
      return 1;
    }
    step_tokens.push_back(tokens);
  }
  if (!step_tokens.empty() &&
      std::find(step_tokens.begin(), step_tokens.end(), 1) == step_tokens.end()) {
    step_tokens.insert(step_tokens.begin(), 1);  // the ratios' denominator
  }
  if (absl::GetFlag(FLAGS_step_rounds) < 1) {
    std::fprintf(stderr, "--step_rounds: %d is below 1\n", absl::GetFlag(FLAGS_step_rounds));
    return 1;
  }
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_threads), ',')) {
    int threads = 0;
    if (!absl::SimpleAtoi(t, &threads) || threads < 1) {
      std::fprintf(stderr, "bad --threads entry\n");
      return 1;
    }
    CpuBackend backend(
        CpuBackendOptions{.num_threads = threads, .profile = absl::GetFlag(FLAGS_profile)});
    SingleRankCommunicator comm;
    LlamaLoadOptions load;
    load.max_tokens_per_step = std::max<int64_t>(prompt_len, 1);
    for (int64_t m : step_tokens) load.max_tokens_per_step = std::max(load.max_tokens_per_step, m);
    load.formats = *formats;
    load.scheme = files->scheme;
    auto model = LlamaModel::Load(*config, *files->weights, {0, 1}, &backend, &comm, load);
    if (!model.ok()) {
      std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
      return 1;
    }
    Figures best;
    for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      auto f = RunOnce(**model, backend, *kv_dtype, prompt, absl::GetFlag(FLAGS_decode_tokens));
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", std::string(f.status().message()).c_str());
        return 1;
      }
      best.prefill_tokens_per_s = std::max(best.prefill_tokens_per_s, f->prefill_tokens_per_s);
      if (f->decode_tokens_per_s > best.decode_tokens_per_s) {
        best.decode_seconds = f->decode_seconds;
        best.decode_profile = f->decode_profile;
      }
      best.decode_tokens_per_s = std::max(best.decode_tokens_per_s, f->decode_tokens_per_s);
      best.prefill_cpu_ms_per_token =
          std::min(best.prefill_cpu_ms_per_token, f->prefill_cpu_ms_per_token);
      best.decode_cpu_ms_per_token =
          std::min(best.decode_cpu_ms_per_token, f->decode_cpu_ms_per_token);
    }
    std::printf("tpserve   %-10s weights=%s kv=%s threads=%d prompt=%lld prefill_tok_s=%.1f "
                "decode_tok_s=%.1f prefill_cpu_ms_tok=%.2f decode_cpu_ms_tok=%.2f\n",
                std::string(backend.name()).c_str(), formats->preset.c_str(),
                absl::GetFlag(FLAGS_kv_dtype).c_str(), threads,
                static_cast<long long>(prompt_len), best.prefill_tokens_per_s,
                best.decode_tokens_per_s, best.prefill_cpu_ms_per_token,
                best.decode_cpu_ms_per_token);
    if (absl::GetFlag(FLAGS_profile)) PrintProfile(best, absl::GetFlag(FLAGS_decode_tokens));
    if (!step_tokens.empty()) {
      if (absl::Status s = PrintStepCosts(**model, backend, *kv_dtype, prompt, step_tokens,
                                          absl::GetFlag(FLAGS_step_rounds), threads);
          !s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    const int64_t stream_bytes = absl::GetFlag(FLAGS_stream_mib) << 20;
    if (stream_bytes > 0) {
      // Mean context of the decode run: the prompt plus half the decoded tokens.
      const int64_t context = prompt_len + absl::GetFlag(FLAGS_decode_tokens) / 2;
      const int64_t kv_bytes =
          context * KvBytesPerToken(config->num_layers, KvEntryOf(*config, 1), *kv_dtype);
      const int64_t step_bytes = DecodeWeightBytes(**model) + kv_bytes;
      const double bw = StreamReadBytesPerSecond(threads, stream_bytes);
      std::printf("  dram ceiling: streaming read %.2f GB/s with %d thread(s); a decode step "
                  "reads %.1f MB (weights %.1f + KV %.1f at %lld positions) -> at most %.1f "
                  "tok/s; measured %.1f = %.0f%%\n",
                  bw / 1e9, threads, step_bytes / 1e6, DecodeWeightBytes(**model) / 1e6,
                  kv_bytes / 1e6, static_cast<long long>(context), bw / step_bytes,
                  best.decode_tokens_per_s, 100 * best.decode_tokens_per_s * step_bytes / bw);
    }
    for (absl::string_view b : absl::StrSplit(absl::GetFlag(FLAGS_batches), ',',
                                              absl::SkipEmpty())) {
      int64_t batch = 0;
      if (!absl::SimpleAtoi(b, &batch) || batch < 1) {
        std::fprintf(stderr, "bad --batches entry\n");
        return 1;
      }
      if (absl::Status s = PrintBatchedDecode(*config, *files, *formats, *kv_dtype, threads,
                                              batch, absl::GetFlag(FLAGS_batch_context));
          !s.ok()) {
        std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
