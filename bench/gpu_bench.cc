// GPU benchmark at Llama 3.1 8B's shapes with random weights, through the real load path
// (LlamaModel::Load on a WeightSource, quantize on load) on one device and a single-rank
// communicator: batch-1 decode tokens/s and its fraction of the HBM roofline, batch-N decode
// tokens/s, and prefill TFLOP/s against the dense peak of the weight format. Each weight format
// is loaded, measured and freed in turn. Prints a table; --json writes a summary.
//
//   gpu_bench --json=/tmp/bench.json                                   # H200: 8B shapes
//   gpu_bench --backend=cpu --layers=2 --hidden=256 --heads=4 --kv_heads=2 --head_dim=64
//             --ffn=512 --vocab=1024 --prefill_tokens=64 --context=32 --batch=4
//             --decode_steps=2 --runs=2 --warmup=1 --copy_mib=64      # the code path, on a CPU
//
// HBM roofline: bytes a decode step must read (bench/roofline_counts.h) / median step time,
// over the bandwidth of a large device-to-device copy measured in the same run (bytes read plus
// bytes written). Step times are wall times of a whole Forward (logits on the host, stream
// synchronised); medians over --runs runs after --warmup untimed ones.
// Exit status: 0 measured, 1 a failure, 77 skipped (no device, or no CUDA backend in this
// build or yet); the JSON says which and why in every case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "bench/model_timings.h"
#include "bench/roofline_counts.h"
#include "bench/synthetic_weights.h"
#include "comm/communicator.h"
#include "kernels/backend_factory.h"
#include "model/weight_formats.h"
#include "nlohmann/json.hpp"

#if TPSERVE_WITH_CUDA
#include <cuda_runtime.h>
#endif

ABSL_FLAG(std::string, backend, "cuda", "cuda or cpu");
ABSL_FLAG(int, device, 0, "CUDA device ordinal");
ABSL_FLAG(int, threads, 0, "CPU backend threads (0: every core)");
ABSL_FLAG(std::string, formats, "fp8,bf16", "weight presets to measure, in order");
ABSL_FLAG(std::string, preset, "llama-3.1-8b", "model shape; the size flags below override it");
ABSL_FLAG(int64_t, layers, 0, "decoder layers (0: the preset's)");
ABSL_FLAG(int64_t, hidden, 0, "hidden size");
ABSL_FLAG(int64_t, heads, 0, "query heads");
ABSL_FLAG(int64_t, kv_heads, 0, "KV heads");
ABSL_FLAG(int64_t, head_dim, 0, "head dimension");
ABSL_FLAG(int64_t, ffn, 0, "SwiGLU intermediate size");
ABSL_FLAG(int64_t, vocab, 0, "vocabulary size");
ABSL_FLAG(int64_t, prefill_tokens, 2048, "prefill length");
ABSL_FLAG(int64_t, context, 1024, "tokens already cached for each decoding sequence");
ABSL_FLAG(int64_t, batch, 32, "sequences of the batched decode");
ABSL_FLAG(int64_t, decode_steps, 16, "decode steps per run");
ABSL_FLAG(int, warmup, 2, "untimed runs first");
ABSL_FLAG(int, runs, 5, "timed runs; medians are reported");
ABSL_FLAG(std::string, kv_dtype, "auto", "bf16, f16, f32, fp8, or auto (bf16, else f16, else f32)");
ABSL_FLAG(int64_t, copy_mib, 4096, "size of the device-to-device copy that measures HBM bandwidth");
ABSL_FLAG(double, peak_bf16_tflops, 989.4, "dense BF16 peak (H200 SXM datasheet)");
ABSL_FLAG(double, peak_fp8_tflops, 1978.9, "dense FP8 peak (H200 SXM datasheet)");
ABSL_FLAG(double, datasheet_hbm_gbps, 4800, "HBM bandwidth on the datasheet (reported beside)");
ABSL_FLAG(std::string, json, "", "write the summary JSON here");
ABSL_FLAG(uint64_t, seed, 1, "weights and token ids");

namespace tpserve {
namespace {

using Json = nlohmann::ordered_json;
constexpr int kExitSkipped = 77;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

absl::StatusOr<ModelSpec> BenchConfig() {
  absl::StatusOr<ModelSpec> c = ModelSpecPreset(absl::GetFlag(FLAGS_preset));
  if (!c.ok()) return c.status();
  auto set = [](int64_t flag, int64_t& field) {
    if (flag > 0) field = flag;
  };
  set(absl::GetFlag(FLAGS_layers), c->num_layers);
  set(absl::GetFlag(FLAGS_hidden), c->hidden_size);
  set(absl::GetFlag(FLAGS_heads), c->num_heads);
  set(absl::GetFlag(FLAGS_kv_heads), c->num_kv_heads);
  set(absl::GetFlag(FLAGS_head_dim), c->head_dim);
  set(absl::GetFlag(FLAGS_ffn), c->intermediate_size);
  set(absl::GetFlag(FLAGS_vocab), c->vocab_size);
  if (c->bos_token_id >= c->vocab_size) c->bos_token_id = -1;  // special ids mean nothing here
  if (c->eos_token_id >= c->vocab_size) c->eos_token_id = -1;
  c->extra_eos_token_ids.clear();
  c->name = "synthetic " + c->name + " shape";
  if (absl::Status s = c->Validate(); !s.ok()) return s;
  return c;
}

// Read + written bytes per second of a device-to-device copy of `bytes` (median of 10).
absl::StatusOr<double> CopyBandwidth(Backend& backend, int64_t bytes) {
  absl::StatusOr<DeviceBuffer> src = backend.Allocate(bytes, "copy source");
  if (!src.ok()) return src.status();
  absl::StatusOr<DeviceBuffer> dst = backend.Allocate(bytes, "copy destination");
  if (!dst.ok()) return dst.status();
  backend.FillZero(src->data(), bytes);
  StepTimes times;
  for (int rep = 0; rep < 13; ++rep) {  // 3 warm-ups
    double seconds = 0;
#if TPSERVE_WITH_CUDA
    if (backend.kind() == BackendKind::kCuda) {  // events on the backend's stream
      auto stream = static_cast<cudaStream_t>(backend.stream());
      cudaEvent_t start, stop;
      cudaEventCreate(&start);
      cudaEventCreate(&stop);
      cudaEventRecord(start, stream);
      cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, stream);
      cudaEventRecord(stop, stream);
      float ms = 0;
      const cudaError_t e = cudaEventSynchronize(stop);
      cudaEventElapsedTime(&ms, start, stop);
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      if (e != cudaSuccess) return absl::InternalError(cudaGetErrorString(e));
      seconds = ms / 1e3;
    }
#endif
    if (backend.kind() != BackendKind::kCuda) {
      const double t0 = Now();
      backend.Copy2D(dst->data(), bytes, src->data(), bytes, bytes, 1);
      if (absl::Status s = backend.Synchronize(); !s.ok()) return s;
      seconds = Now() - t0;
    }
    if (rep >= 3) times.seconds.push_back(seconds);
  }
  return 2.0 * static_cast<double>(bytes) / times.Median();
}

absl::StatusOr<DType> KvDtype(const Backend& backend) {
  const std::string flag = absl::GetFlag(FLAGS_kv_dtype);
  if (flag != "auto") return ParseKvDtype(flag);
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32}) {
    if (backend.SupportsKvDtype(d)) return d;
  }
  return absl::UnimplementedError("the backend supports none of bf16, f16, f32 for the KV cache");
}

Json StepJson(const StepTimes& t, int64_t tokens_per_step) {
  return Json{{"step_ms_median", t.Median() * 1e3},
              {"step_ms_min", t.Min() * 1e3},
              {"step_ms_max", t.Max() * 1e3},
              {"steps_timed", t.seconds.size()},
              {"tokens_per_s", tokens_per_step / t.Median()}};
}

struct BenchContext {
  ModelSpec config;
  TimingOptions timing;
  Backend* backend = nullptr;
  const WeightSource* source = nullptr;
  double copy_bytes_per_s = 0;
};

// Loads `preset`, times it, and returns its JSON; "status" says ok / skipped / failed.
Json RunFormat(const BenchContext& ctx, const std::string& preset) {
  Json out{{"status", "failed"}};
  const double t0 = Now();
  const std::clock_t cpu0 = std::clock();  // the loader's host work (quantize on load)
  absl::StatusOr<WeightFormats> formats = WeightFormatsPreset(preset);
  absl::StatusOr<DType> kv = KvDtype(*ctx.backend);
  if (!formats.ok() || !kv.ok()) {
    out["error"] = std::string((formats.ok() ? kv.status() : formats.status()).message());
    return out;
  }
  SingleRankCommunicator comm;
  LlamaLoadOptions load;
  load.formats = *formats;
  load.max_tokens_per_step = TimingMaxStepTokens(ctx.timing);
  load.max_logit_rows = TimingMaxLogitRows(ctx.timing);
  absl::StatusOr<std::unique_ptr<LlamaModel>> model =
      LlamaModel::Load(ctx.config, *ctx.source, {0, 1}, ctx.backend, &comm, load);
  if (!model.ok()) {
    if (model.status().code() == absl::StatusCode::kUnimplemented) out["status"] = "skipped";
    out["error"] = std::string(model.status().message());
    return out;
  }
  out["load_s"] = Now() - t0;
  out["load_cpu_s"] = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const MemoryFootprint fp = (*model)->footprint();
  out["weight_bytes"] = fp.weight_bytes_resident;
  out["kv_dtype"] = std::string(KvDtypeName(*kv));
  absl::StatusOr<std::unique_ptr<KvCache>> cache = KvCache::Create(
      (*model)->KvShape(TimingKvBlocks(ctx.timing), ctx.timing.block_size_tokens, *kv),
      *ctx.backend);
  absl::Status filled =
      cache.ok() ? FillKvCache(*ctx.backend, **cache, ctx.timing.seed) : cache.status();
  if (!filled.ok()) {
    out["error"] = std::string(filled.message());
    return out;
  }
  absl::StatusOr<ModelTimings> t = TimeModel(**model, *ctx.backend, **cache, ctx.timing);
  if (!t.ok()) {
    out["error"] = std::string(t.status().message());
    return out;
  }
  const TimingOptions& o = ctx.timing;
  const int64_t kv_bytes = BlockBytes(*kv);
  const int64_t mean_context = o.context_tokens + (o.decode_steps + 1) / 2;
  for (auto [key, batch, times] : {std::tuple{"decode_batch1", int64_t{1}, &t->decode_one},
                                   std::tuple{"decode_batchN", o.batch, &t->decode_batch}}) {
    Json d = StepJson(*times, batch);
    const double bytes =
        DecodeBytesRead(ctx.config, fp.weight_bytes_by_role, {batch, mean_context, kv_bytes});
    d["batch"] = batch;
    d["bytes_per_step"] = bytes;
    d["achieved_gbps"] = bytes / times->Median() / 1e9;
    d["fraction_of_copy_bandwidth"] = bytes / times->Median() / ctx.copy_bytes_per_s;
    out[key] = d;
  }
  const double flops = PrefillFlops(ctx.config, o.prefill_tokens, 1);
  const bool fp8 = preset.rfind("fp8", 0) == 0;
  const double peak =
      fp8 ? absl::GetFlag(FLAGS_peak_fp8_tflops) : absl::GetFlag(FLAGS_peak_bf16_tflops);
  Json p = StepJson(t->prefill, o.prefill_tokens);
  p["flops"] = flops;
  p["tflops"] = flops / t->prefill.Median() / 1e12;
  p["peak_tflops_used"] = peak;
  p["peak_name"] = fp8 ? "dense FP8" : "dense BF16";
  p["fraction_of_peak"] = flops / t->prefill.Median() / 1e12 / peak;
  out["prefill"] = p;
  out["logits_finite"] = t->logits_finite;
  out["status"] = t->logits_finite ? "ok" : "failed";
  if (!t->logits_finite) out["error"] = "non-finite logits";
  out["seconds"] = Now() - t0;
  return out;
}

void PrintTable(const Json& summary) {
  std::printf("\n%-6s %7s %8s | %9s %8s %6s | %9s %8s | %9s %8s %7s\n", "format", "load_s",
              "weightGB", "dec1tok/s", "dec1_ms", "%HBM", "decNtok/s", "decN_ms", "prefillms",
              "TFLOP/s", "%peak");
  for (const auto& [name, f] : summary["formats"].items()) {
    if (f["status"] != "ok") {
      std::printf("%-6s %s: %s\n", name.c_str(), f["status"].get<std::string>().c_str(),
                  f.value("error", std::string()).c_str());
      continue;
    }
    const Json &d1 = f["decode_batch1"], &dn = f["decode_batchN"], &p = f["prefill"];
    std::printf("%-6s %7.1f %8.2f | %9.1f %8.3f %5.1f%% | %9.1f %8.3f | %9.2f %8.1f %6.1f%%\n",
                name.c_str(), f["load_s"].get<double>(), f["weight_bytes"].get<double>() / 1e9,
                d1["tokens_per_s"].get<double>(), d1["step_ms_median"].get<double>(),
                100 * d1["fraction_of_copy_bandwidth"].get<double>(),
                dn["tokens_per_s"].get<double>(), dn["step_ms_median"].get<double>(),
                p["step_ms_median"].get<double>(), p["tflops"].get<double>(),
                100 * p["fraction_of_peak"].get<double>());
  }
}

int Finish(Json& summary, int code, double t0) {
  summary["total_s"] = Now() - t0;
  const std::string path = absl::GetFlag(FLAGS_json);
  if (!path.empty()) {
    std::ofstream(path) << summary.dump(2) << "\n";
    std::printf("gpu_bench: summary written to %s\n", path.c_str());
  }
  std::printf("gpu_bench: %s in %.1f s\n", summary["status"].get<std::string>().c_str(),
              summary["total_s"].get<double>());
  return code;
}

int Main() {
  const double t0 = Now();
  Json summary{{"status", "failed"}};
  absl::StatusOr<ModelSpec> config = BenchConfig();
  absl::StatusOr<BackendKind> kind = ParseBackendKind(absl::GetFlag(FLAGS_backend));
  if (!config.ok() || !kind.ok()) {
    summary["error"] = std::string((config.ok() ? kind.status() : config.status()).message());
    std::fprintf(stderr, "gpu_bench: %s\n", summary["error"].get<std::string>().c_str());
    return Finish(summary, 1, t0);
  }
  const ModelSpec& c = *config;
  summary["shape"] = {{"name", c.name},
                      {"layers", c.num_layers},
                      {"hidden", c.hidden_size},
                      {"heads", c.num_heads},
                      {"kv_heads", c.num_kv_heads},
                      {"head_dim", c.head_dim},
                      {"ffn", c.intermediate_size},
                      {"vocab", c.vocab_size},
                      {"params", c.NumParameters()},
                      {"linear_params", c.NumActiveLinearParameters()}};
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  absl::StatusOr<std::unique_ptr<Backend>> backend = CreateBackend(
      {.kind = *kind, .num_threads = threads, .device_ordinal = absl::GetFlag(FLAGS_device)});
  if (!backend.ok()) {
    const absl::StatusCode code = backend.status().code();
    const bool skip =
        code == absl::StatusCode::kUnimplemented || code == absl::StatusCode::kFailedPrecondition;
    summary["status"] = skip ? "skipped" : "failed";
    summary["error"] = std::string(backend.status().message());
    summary["error_code"] = absl::StatusCodeToString(code);
    std::printf("gpu_bench: %s (%s): %s\n", skip ? "SKIP" : "FAIL",
                summary["error_code"].get<std::string>().c_str(),
                summary["error"].get<std::string>().c_str());
    return Finish(summary, skip ? kExitSkipped : 1, t0);
  }
  BenchContext ctx;
  ctx.config = c;
  ctx.backend = backend->get();
  ctx.timing = {.prefill_tokens = absl::GetFlag(FLAGS_prefill_tokens),
                .context_tokens = absl::GetFlag(FLAGS_context),
                .batch = absl::GetFlag(FLAGS_batch),
                .decode_steps = absl::GetFlag(FLAGS_decode_steps),
                .warmup = absl::GetFlag(FLAGS_warmup),
                .runs = absl::GetFlag(FLAGS_runs),
                .seed = absl::GetFlag(FLAGS_seed)};
  summary["device"] = std::string(ctx.backend->name());
  summary["settings"] = {{"prefill_tokens", ctx.timing.prefill_tokens},
                         {"context_tokens", ctx.timing.context_tokens},
                         {"batch", ctx.timing.batch},
                         {"decode_steps", ctx.timing.decode_steps},
                         {"warmup", ctx.timing.warmup},
                         {"runs", ctx.timing.runs}};
  summary["peaks"] = {{"bf16_dense_tflops", absl::GetFlag(FLAGS_peak_bf16_tflops)},
                      {"fp8_dense_tflops", absl::GetFlag(FLAGS_peak_fp8_tflops)},
                      {"datasheet_hbm_gbps", absl::GetFlag(FLAGS_datasheet_hbm_gbps)}};
  const int64_t copy_bytes = absl::GetFlag(FLAGS_copy_mib) << 20;
  absl::StatusOr<double> bw = CopyBandwidth(*ctx.backend, copy_bytes);
  if (!bw.ok()) {
    summary["error"] = std::string(bw.status().message());
    return Finish(summary, 1, t0);
  }
  ctx.copy_bytes_per_s = *bw;
  summary["hbm_copy"] = {{"gbps", *bw / 1e9},
                         {"bytes_copied", copy_bytes},
                         {"counting", "bytes read + bytes written"}};
  std::printf("gpu_bench: %s | %s: %d layers, hidden %lld, %.2fB params | copy %.0f GB/s\n",
              summary["device"].get<std::string>().c_str(), c.name.c_str(),
              static_cast<int>(c.num_layers), static_cast<long long>(c.hidden_size),
              c.NumParameters() / 1e9, *bw / 1e9);
  std::unique_ptr<SyntheticLlamaSource> source =
      SyntheticLlamaSource::Create(c, {.seed = absl::GetFlag(FLAGS_seed)});
  ctx.source = source.get();
  std::printf("gpu_bench: random weight pool %.2f GB filled in %.2f s\n",
              source->pool_bytes() / 1e9, source->fill_seconds());
  int ok = 0, failed = 0;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_formats), ',')) {
    std::printf("gpu_bench: %s: loading and timing...\n", std::string(name).c_str());
    std::fflush(stdout);
    Json f = RunFormat(ctx, std::string(name));
    ok += f["status"] == "ok";
    failed += f["status"] == "failed";
    summary["formats"][std::string(name)] = f;
  }
  // A format the backend cannot hold yet is skipped, not failed; all skipped skips the bench.
  summary["status"] = failed > 0 ? "failed" : ok > 0 ? "ok" : "skipped";
  PrintTable(summary);
  return Finish(summary, failed > 0 ? 1 : ok > 0 ? 0 : kExitSkipped, t0);
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tpserve::Main();
}
