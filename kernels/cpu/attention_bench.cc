// Micro-benchmark of CpuBackend::PagedAttention at decode (one query token per sequence) for
// each KV cache dtype, context length and thread count. Not a test: timings are only printed
// (docs/PERFORMANCE.md).
//
//   bazel run -c opt //kernels/cpu:attention_bench -- --contexts=512,2048 --kv_dtypes=f32,f16
//
// Shapes: SmolLM2-135M (9 query heads, 3 KV heads, head_dim 64) and Llama-3-8B (32 / 8 / 128),
// one layer, block size 16, a shuffled block table. Each figure is the best of --repeats runs
// of at least --min_seconds; cpu_us is process CPU time per call over all threads (on a shared
// machine it stays near the undisturbed cost).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/quantize.h"

ABSL_FLAG(std::string, contexts, "512,1024,2048", "comma-separated context lengths");
ABSL_FLAG(std::string, kv_dtypes, "f32,f16,bf16", "comma-separated KV dtypes");
ABSL_FLAG(std::string, threads, "1,2", "comma-separated thread counts");
ABSL_FLAG(int64_t, batch, 1, "sequences decoding together");
ABSL_FLAG(int, repeats, 5, "timed runs per figure; the best is reported");
ABSL_FLAG(double, min_seconds, 0.2, "minimum length of one timed run");

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int64_t num_heads, num_kv_heads, head_dim;
};

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  for (absl::string_view t : absl::StrSplit(s, ',')) {
    int64_t v = 0;
    if (absl::SimpleAtoi(t, &v) && v > 0) out.push_back(v);
  }
  return out;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::vector<uint8_t> RandomPool(DType dtype, int64_t elems, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(elems);
  for (float& v : values) v = dist(rng);
  std::vector<uint8_t> pool(elems * BlockBytes(dtype));
  QuantizeRow(dtype, values.data(), pool.data(), elems);
  return pool;
}

void BenchOne(const Shape& s, DType dtype, int64_t context, int threads) {
  const int64_t block = 16, batch = absl::GetFlag(FLAGS_batch);
  const int64_t blocks_per_seq = (context + block - 1) / block;
  const int64_t num_blocks = batch * blocks_per_seq;
  const int64_t pool_elems = num_blocks * block * s.num_kv_heads * s.head_dim;
  std::vector<uint8_t> k = RandomPool(dtype, pool_elems, 1), v = RandomPool(dtype, pool_elems, 2);
  std::vector<int32_t> table(num_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(3));
  std::vector<AttentionSequence> seqs;
  for (int64_t b = 0; b < batch; ++b) {
    seqs.push_back(AttentionSequence{
        b, 1, context - 1,
        absl::Span<const int32_t>(table.data() + b * blocks_per_seq, blocks_per_seq)});
  }
  const KvPoolView pool{k.data(), v.data(), dtype, 1.0f, 1.0f, num_blocks, block,
                        s.num_kv_heads, s.head_dim};
  std::vector<float> q(batch * s.num_heads * s.head_dim, 0.1f);
  std::vector<float> out(q.size());
  CpuBackend backend(CpuBackendOptions{.num_threads = threads});
  backend.BeginStep(StepInputs{{}, {}, seqs, {}});
  const Backend::AttentionParams params{1.0f / std::sqrt(static_cast<float>(s.head_dim))};
  backend.PagedAttention(q.data(), s.num_heads, params, pool, out.data());  // warm up
  double best_wall = 1e30, best_cpu = 1e30;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    int64_t calls = 0;
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    double elapsed = 0;
    do {
      backend.PagedAttention(q.data(), s.num_heads, params, pool, out.data());
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < absl::GetFlag(FLAGS_min_seconds));
    best_wall = std::min(best_wall, elapsed / calls);
    best_cpu = std::min(best_cpu, (ProcessCpuSeconds() - cpu0) / calls);
  }
  const double kv_bytes = 2.0 * batch * context * s.num_kv_heads * s.head_dim * BlockBytes(dtype);
  std::printf("%-8s %-5s %6lld %3d %10.1f %8.2f %10.1f\n", s.name,
              std::string(KvDtypeName(dtype)).c_str(), static_cast<long long>(context), threads,
              best_wall * 1e6, kv_bytes / best_wall * 1e-9, best_cpu * 1e6);
  std::fflush(stdout);
}

int Main() {
  const Shape shapes[] = {{"smollm2", 9, 3, 64}, {"llama8b", 32, 8, 128}};
  std::printf("%-8s %-5s %6s %3s %10s %8s %10s\n", "shape", "kv", "ctx", "thr", "us/call",
              "KV GB/s", "cpu_us");
  for (const Shape& s : shapes) {
    for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_kv_dtypes), ',')) {
      const absl::StatusOr<DType> dtype = ParseKvDtype(std::string(name));
      if (!dtype.ok()) {
        std::fprintf(stderr, "%s\n", std::string(dtype.status().message()).c_str());
        return 1;
      }
      for (int64_t context : ParseList(absl::GetFlag(FLAGS_contexts))) {
        for (int64_t t : ParseList(absl::GetFlag(FLAGS_threads))) {
          BenchOne(s, *dtype, context, static_cast<int>(t));
        }
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
