// Measures the CUDA backend against the two ceilings of its GPU (kernels/cuda/README.md):
//   1. device-to-device copy bandwidth (bytes read + written), the decode ceiling;
//   2. decode-sized MatMuls per matrix of an 8B-shape layer (m = 1..16), fp8 and int4 g128:
//      the mixed-input GEMM beside the GEMV it replaced, in GB/s of weights streamed;
//   3. a whole batch-1 (and batch-8) decode step of an 8B-shape fp8 model through the Backend
//      ops in LlamaModel's order: time per step, host time to enqueue it, and the share of the
//      bandwidth roofline (weight bytes + KV bytes over the measured copy bandwidth);
//   4. 4096-row GEMMs of the same shapes: the fp8 MatMul path (quantize x + cuBLASLt fp8 GEMM
//      with the scales inside), the cuBLASLt fp8 GEMM alone, and bf16, in TFLOP/s;
//   5. paged attention of one layer (FlashInfer): decode rows at 8K context (GB/s of keys and
//      values against the copy ceiling) and a 2048-token prompt (TFLOP/s against the bf16 peak).
// Timing: CUDA events around many repetitions after warm-up; weights rotate over copies larger
// than L2 so that GEMV numbers are HBM numbers. Random inputs (no zeros).
//
//   cuda_bench [--device=0] [--quick]
//   TPSERVE_CUDA_GRAPHS=0 cuda_bench      # without the decode step recorded as a CUDA graph
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/quantize.h"
#include "kernels/rope_table.h"

namespace tpserve {
namespace {

#define BENCH_CHECK(expr)                                                           \
  do {                                                                              \
    const auto bench_status_ = (expr);                                              \
    if (!bench_status_.ok()) {                                                      \
      std::printf("FAILED %s: %s\n", #expr, bench_status_.ToString().c_str());      \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

#define CUDA_CHECK(expr)                                                                  \
  do {                                                                                    \
    const cudaError_t bench_err_ = (expr);                                                \
    if (bench_err_ != cudaSuccess) {                                                      \
      std::printf("FAILED %s: %s\n", #expr, cudaGetErrorString(bench_err_));             \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// 8B shapes (Llama 3.1 8B): hidden 4096, 32 heads / 8 KV heads of 128, ffn 14336.
constexpr int64_t kHidden = 4096, kHeads = 32, kKvHeads = 8, kHeadDim = 128, kFfn = 14336;
constexpr int64_t kVocab = 128256, kLayers = 32;

struct MatrixShape {
  const char* name;
  int64_t n, k;
};
constexpr MatrixShape kLayerMatrices[] = {{"q", 4096, 4096},     {"k", 1024, 4096},
                                          {"v", 1024, 4096},     {"o", 4096, 4096},
                                          {"gate", 14336, 4096}, {"up", 14336, 4096},
                                          {"down", 4096, 14336}};

// Random valid e4m3 codes (no NaN), uploaded once and copied around on the device.
std::vector<uint8_t> RandomFp8(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    b = static_cast<uint8_t>(rng());
    if ((b & 0x7F) == 0x7F) b = 0x38;  // NaN -> 1.0
  }
  return v;
}

// n random bf16 values: a block of 2^20 draws repeated (drawing hundreds of millions of
// normals on the host would dominate the run).
std::vector<uint16_t> RandomBf16(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> block(std::min<int64_t>(n, 1 << 20));
  for (auto& x : block) x = F32ToBF16(d(rng));
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = block[i % block.size()];
  return v;
}

struct Timer {
  cudaStream_t stream;
  cudaEvent_t start, stop;
  explicit Timer(void* s) : stream(static_cast<cudaStream_t>(s)) {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  template <typename F>
  double Ms(int warmup, int iters, F f) {
    for (int i = 0; i < warmup; ++i) f(i);
    CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < iters; ++i) f(i);
    CUDA_CHECK(cudaEventRecord(stop, stream));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / iters;
  }
};

double CopyBandwidth(Backend& be, Timer& t) {
  const int64_t bytes = 2LL << 30;
  auto a = be.Allocate(bytes, "copy a");
  auto b = be.Allocate(bytes, "copy b");
  BENCH_CHECK(a.status());
  BENCH_CHECK(b.status());
  be.FillZero(a->data(), bytes);
  const double ms = t.Ms(2, 10, [&](int) {
    be.Copy2D(b->data(), bytes, a->data(), bytes, bytes, 1);
  });
  BENCH_CHECK(be.Synchronize());
  const double gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
  std::printf("copy D2D 2 GiB: %.3f ms, %.0f GB/s (read + write)\n", ms, gbs);
  return gbs;
}

// `copies` layers' worth of one matrix shape, each placed as the model's loader places it
// (Backend::PlaceWeight: int4 and fp8 in the mixed-input GEMM's form on a Hopper GPU), and the
// same bytes in their stored form only (`gemv`: the GEMV path the mixed GEMM replaces).
struct BenchMatrices {
  std::vector<PlacedWeight> placed, stored;  // stored: int4's own placement (fp8 shares)
  std::vector<WeightMatrix> copies;           // placed[i].matrix
  std::vector<WeightMatrix> gemv;             // the stored form of copy i
  int64_t stored_bytes = 0;                   // one copy's checkpoint bytes
};

// A random weight in `format` (fp8 per channel or int4 g128), scales 1/64 (int4 zero 8).
HostMatrix RandomWeight(const TensorFormat& format, int64_t n, int64_t k, uint32_t seed) {
  HostMatrix h;
  WeightMatrix& w = h.matrix;
  w.format = format;
  w.rows = n;
  w.cols = k;
  if (format.kind == FormatKind::kInt4Group) {
    w.row_bytes = k / 2;
    w.scale_stride = k / format.group_size;
    h.values = RandomFp8(n * k / 2, seed);  // any byte is two valid codes
    std::vector<uint16_t> s(n * w.scale_stride, F32ToF16(1.0f / 64)), z(s.size(), F32ToF16(8));
    h.scales.assign(reinterpret_cast<const uint8_t*>(s.data()),
                    reinterpret_cast<const uint8_t*>(s.data() + s.size()));
    h.zeros.assign(reinterpret_cast<const uint8_t*>(z.data()),
                   reinterpret_cast<const uint8_t*>(z.data() + z.size()));
    w.zeros = h.zeros.data();
  } else {
    w.row_bytes = k;
    w.scale_stride = 1;
    h.values = RandomFp8(n * k, seed);
    const std::vector<float> s(n, 1.0f / 64);
    h.scales.assign(reinterpret_cast<const uint8_t*>(s.data()),
                    reinterpret_cast<const uint8_t*>(s.data() + s.size()));
  }
  w.data = h.values.data();
  w.scales = h.scales.data();
  return h;
}

BenchMatrices MakeMatrices(Backend& be, const TensorFormat& format, int64_t n, int64_t k,
                           int copies, uint32_t seed) {
  BenchMatrices m;
  const HostMatrix host = RandomWeight(format, n, k, seed);
  m.stored_bytes = WeightMatrixBytes(host.matrix);
  for (int c = 0; c < copies; ++c) {
    auto placed = be.PlaceWeight(host, WeightUse::kMatMul, "bench weights");
    BENCH_CHECK(placed.status());
    m.placed.push_back(*std::move(placed));
    m.copies.push_back(m.placed.back().matrix);
    if (format.kind == FormatKind::kInt4Group) {  // its stored form is not kept: place it too
      auto stored = PlaceStoredWeight(be, host, "bench weights, stored form");
      BENCH_CHECK(stored.status());
      m.stored.push_back(*std::move(stored));
      m.gemv.push_back(m.stored.back().matrix);
    } else {
      m.gemv.push_back(m.copies.back());
      m.gemv.back().prepared = nullptr;
    }
  }
  return m;
}

BenchMatrices MakeFp8(Backend& be, int64_t n, int64_t k, int copies, uint32_t seed) {
  return MakeMatrices(be, TensorFormat::Of(FormatKind::kFp8PerChannel), n, k, copies, seed);
}

// Decode-sized MatMuls per matrix of an 8B layer: the path the model runs (the mixed-input
// GEMM where it takes the weight) beside the GEMV it replaced, in GB/s of checkpoint bytes.
void GemvBench(Backend& be, Timer& t, double copy_gbs) {
  auto x = Upload(be, RandomBf16(16 * kFfn, 1, 1.0f).data(), 16 * kFfn * 2, "x");
  auto y = be.Allocate(16 * kFfn * 4, "y");
  BENCH_CHECK(x.status());
  BENCH_CHECK(y.status());
  for (const TensorFormat& format :
       {TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Int4(128)}) {
    std::printf("\n%s decode MatMul (mixed-input GEMM vs GEMV), weights rotated over copies > "
                "L2:\n", TensorFormatName(format).c_str());
    std::printf("%-6s %6s %6s %4s %10s %8s %8s %10s %8s %8s\n", "matrix", "n", "k", "m",
                "mixed us", "GB/s", "%copy", "GEMV us", "GB/s", "%copy");
    for (const MatrixShape& shape : kLayerMatrices) {
      const int copies =
          static_cast<int>(std::max<int64_t>(4, (512LL << 20) / (shape.n * shape.k)));
      BenchMatrices w = MakeMatrices(be, format, shape.n, shape.k, copies, 7);
      const double bytes = static_cast<double>(w.stored_bytes);
      for (int64_t m : {1, 2, 4, 8, 16}) {
        const double mixed = t.Ms(copies, 20 * copies, [&](int i) {
          be.MatMul(x->data(), m, w.copies[i % copies], y->data(), DType::kBF16);
        });
        const double gemv = t.Ms(copies, 20 * copies, [&](int i) {
          be.MatMul(x->data(), m, w.gemv[i % copies], y->data(), DType::kBF16);
        });
        const double mixed_gbs = bytes / (mixed * 1e-3) / 1e9;
        const double gemv_gbs = bytes / (gemv * 1e-3) / 1e9;
        std::printf("%-6s %6lld %6lld %4lld %10.2f %8.0f %7.0f%% %10.2f %8.0f %7.0f%%\n",
                    shape.name, static_cast<long long>(shape.n), static_cast<long long>(shape.k),
                    static_cast<long long>(m), mixed * 1e3, mixed_gbs,
                    100.0 * mixed_gbs / copy_gbs, gemv * 1e3, gemv_gbs,
                    100.0 * gemv_gbs / copy_gbs);
      }
    }
    BENCH_CHECK(be.Synchronize());
  }
}

// One decode step of an 8B-shape fp8 model (bf16 LM head, bf16 KV cache with `context` tokens
// per sequence), through the Backend ops in the order LlamaModel::Forward issues them.
struct DecodeModel {
  std::vector<BenchMatrices> layers;  // [kind] with kLayers copies each
  DeviceBuffer norm, inv_freq, embedding, kv, x, h, q, k, v, attn, gate, up, proj, partials,
      logits;
  WeightMatrix embed, head;
  std::vector<float> host_logits;
};

// Row-parallel layers reduce over one chunk per KV-head group even on one rank (LlamaModel's
// ReductionChunks): 8 for the 8B shape.
constexpr int64_t kReductionChunks = kKvHeads;

void DecodeBench(Backend& be, double copy_gbs, int64_t batch, int64_t context, int steps,
                 bool captured) {
  DecodeModel d;
  for (const MatrixShape& shape : kLayerMatrices) {
    d.layers.push_back(MakeFp8(be, shape.n, shape.k, kLayers, 11));
  }
  auto alloc = [&](DeviceBuffer* b, int64_t bytes) {
    auto r = be.Allocate(bytes, "decode bench");
    BENCH_CHECK(r.status());
    *b = std::move(*r);
  };
  std::vector<float> ones(kHidden, 1.0f);
  auto norm = Upload(be, ones.data(), kHidden * 4, "norm");
  BENCH_CHECK(norm.status());
  d.norm = std::move(*norm);
  const std::vector<float> freqs = RopeInverseFrequencies(kHeadDim, 500000.0, Llama3RopeScaling{});
  auto inv = Upload(be, freqs.data(), static_cast<int64_t>(freqs.size()) * 4, "inv_freq");
  BENCH_CHECK(inv.status());
  d.inv_freq = std::move(*inv);
  const std::vector<uint16_t> table = RandomBf16(kVocab * kHidden, 3, 0.05f);
  auto emb = Upload(be, table.data(), kVocab * kHidden * 2, "embedding");
  BENCH_CHECK(emb.status());
  d.embedding = std::move(*emb);
  d.embed.format = TensorFormat::Of(FormatKind::kBF16);
  d.embed.data = d.embedding.data();
  d.embed.rows = kVocab;
  d.embed.cols = kHidden;
  d.embed.row_bytes = kHidden * 2;
  d.head = d.embed;  // read like an untied bf16 head: every byte once per step
  const int64_t bs = 16, blocks_per_seq = (context + 1 + bs - 1) / bs;
  const int64_t pool_elems = batch * blocks_per_seq * bs * kKvHeads * kHeadDim;
  alloc(&d.kv, kLayers * 2 * pool_elems * 2);
  be.FillZero(d.kv.data(), kLayers * 2 * pool_elems * 2);
  alloc(&d.x, batch * kHidden * 2);
  alloc(&d.h, batch * kHidden * 2);
  alloc(&d.q, batch * kHeads * kHeadDim * 2);
  alloc(&d.k, batch * kKvHeads * kHeadDim * 2);
  alloc(&d.v, batch * kKvHeads * kHeadDim * 2);
  alloc(&d.attn, batch * kHeads * kHeadDim * 2);
  alloc(&d.gate, batch * kFfn * 2);
  alloc(&d.up, batch * kFfn * 2);
  alloc(&d.proj, batch * kHidden * 2);
  alloc(&d.partials, kReductionChunks * batch * kHidden * 4);
  alloc(&d.logits, batch * kVocab * 4);
  d.host_logits.resize(batch * kVocab);

  std::vector<int32_t> ids(batch), positions(batch, static_cast<int32_t>(context)), rows(batch);
  std::vector<std::vector<int32_t>> tables(batch);
  std::vector<AttentionSequence> seqs(batch);
  for (int64_t b = 0; b < batch; ++b) {
    ids[b] = static_cast<int32_t>(1000 + 7 * b);
    rows[b] = static_cast<int32_t>(b);
    for (int64_t i = 0; i < blocks_per_seq; ++i) {
      tables[b].push_back(static_cast<int32_t>(b * blocks_per_seq + i));
    }
    seqs[b] = AttentionSequence{b, 1, context, tables[b]};
  }
  // The ops of one step after BeginStep, as LlamaModel::Forward queues them on one rank.
  auto ops = [&]() -> absl::Status {
    be.EmbeddingRows(d.embed, 0, d.x.data());
    for (int64_t l = 0; l < kLayers; ++l) {
      auto w = [&](int kind) -> const WeightMatrix& { return d.layers[kind].copies[l]; };
      uint8_t* pool = d.kv.as<uint8_t>() + l * 2 * pool_elems * 2;
      const KvPoolView view{pool, pool + pool_elems * 2, DType::kBF16, 1.0f, 1.0f,
                            batch * blocks_per_seq, bs, kKvHeads, kHeadDim};
      be.RmsNorm(d.x.data(), d.norm.as<float>(), batch, kHidden, 1e-5f, d.h.data());
      be.MatMul(d.h.data(), batch, w(0), d.q.data(), DType::kBF16);
      be.MatMul(d.h.data(), batch, w(1), d.k.data(), DType::kBF16);
      be.MatMul(d.h.data(), batch, w(2), d.v.data(), DType::kBF16);
      be.Rope(d.q.data(), kHeads, kHeadDim, d.inv_freq.as<float>(), RopeLayout::kRotateHalf);
      be.Rope(d.k.data(), kKvHeads, kHeadDim, d.inv_freq.as<float>(), RopeLayout::kRotateHalf);
      be.WriteKv(d.k.data(), d.v.data(), view);
      be.PagedAttention(d.q.data(), kHeads, {.scale = 1.0f / std::sqrt(float(kHeadDim))}, view,
                        d.attn.data());
      be.MatMulChunked(d.attn.data(), batch, w(3), kReductionChunks, d.partials.as<float>());
      be.SumChunks(d.partials.as<float>(), kReductionChunks, batch * kHidden, d.proj.data());
      be.Add(d.x.data(), d.proj.data(), batch * kHidden, d.x.data());
      be.RmsNorm(d.x.data(), d.norm.as<float>(), batch, kHidden, 1e-5f, d.h.data());
      be.MatMul(d.h.data(), batch, w(4), d.gate.data(), DType::kBF16);
      be.MatMul(d.h.data(), batch, w(5), d.up.data(), DType::kBF16);
      be.GatedActivation(Activation::kSilu, d.gate.data(), d.up.data(), batch * kFfn,
                         d.gate.data());
      be.MatMulChunked(d.gate.data(), batch, w(6), kReductionChunks, d.partials.as<float>());
      be.SumChunks(d.partials.as<float>(), kReductionChunks, batch * kHidden, d.proj.data());
      be.Add(d.x.data(), d.proj.data(), batch * kHidden, d.x.data());
    }
    be.GatherLogitRows(d.x.data(), kHidden, d.h.data());
    be.RmsNorm(d.h.data(), d.norm.as<float>(), batch, kHidden, 1e-5f, d.h.data());
    be.MatMul(d.h.data(), batch, d.head, d.logits.data(), DType::kF32);
    return absl::OkStatus();
  };
  auto step = [&]() {
    be.BeginStep(StepInputs{ids, positions, seqs, rows});
    if (captured) {
      BENCH_CHECK(be.RunCaptured(&d, batch, ops));
    } else {
      BENCH_CHECK(ops());
    }
  };
  // Eager logits of this step (the same KV slot is rewritten with the same values every step),
  // the reference a recorded replay must reproduce.
  std::vector<float> eager(batch * kVocab);
  be.BeginStep(StepInputs{ids, positions, seqs, rows});
  BENCH_CHECK(ops());
  BENCH_CHECK(be.CopyToHost(eager.data(), d.logits.data(), batch * kVocab * 4));
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < 3; ++i) {
    step();
    BENCH_CHECK(be.CopyToHost(d.host_logits.data(), d.logits.data(), batch * kVocab * 4));
  }
  double enqueue_ms = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < steps; ++i) {
    const auto e0 = Clock::now();
    step();
    enqueue_ms += std::chrono::duration<double, std::milli>(Clock::now() - e0).count();
    BENCH_CHECK(be.CopyToHost(d.host_logits.data(), d.logits.data(), batch * kVocab * 4));
  }
  const double step_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / steps;
  double max_diff = 0.0, max_logit = 0.0;
  for (int64_t i = 0; i < batch * kVocab; ++i) {
    max_diff = std::max(max_diff, double{std::fabs(d.host_logits[i] - eager[i])});
    max_logit = std::max(max_logit, double{std::fabs(eager[i])});
  }
  double weight_bytes = static_cast<double>(kVocab) * kHidden * 2;
  for (const MatrixShape& s : kLayerMatrices) weight_bytes += double(kLayers) * s.n * s.k;
  const double kv_bytes = double(batch) * kLayers * 2 * (context + 1) * kKvHeads * kHeadDim * 2;
  const double floor_ms = (weight_bytes + kv_bytes) / (copy_gbs * 1e9) * 1e3;
  std::printf("decode step %s, 8B fp8 (bf16 head, bf16 KV), batch %lld, context %lld: %.3f "
              "ms/step (host enqueue %.3f ms); bytes %.2f GB; roofline at copy bandwidth %.3f ms "
              "= %.0f%% of roofline; at 4.8 TB/s %.3f ms = %.0f%%; logits vs eager max |diff| "
              "%.3g (max |logit| %.3g)\n",
              captured ? "(CUDA graph)" : "(eager)", static_cast<long long>(batch),
              static_cast<long long>(context), step_ms,
              enqueue_ms / steps, (weight_bytes + kv_bytes) / 1e9, floor_ms,
              100.0 * floor_ms / step_ms, (weight_bytes + kv_bytes) / 4.8e12 * 1e3,
              100.0 * (weight_bytes + kv_bytes) / 4.8e12 * 1e3 / step_ms, max_diff, max_logit);
  be.ForgetCaptured(&d);  // its buffers go with `d`
}

// Paged attention of one layer, 8B shapes (32 heads over 8 KV heads of 128, bf16 KV in blocks
// of 16): decode rows at 8,192 keys, batch 1 and 8, in GB/s of K and V read (issue 18's goal:
// >= 80% of the copy ceiling), and one 2048-token prompt from position 0, in TFLOP/s of causal
// attention, 2 x 2 x heads x T^2 x head_dim / 2 (goal: >= 50% of the 989 TFLOP/s bf16 peak).
void AttentionBench(Backend& be, Timer& t, double copy_gbs) {
  constexpr int64_t kBlock = 16, kContext = 8192, kBatch = 8, kPrompt = 2048;
  constexpr int64_t kBlocksPerSeq = kContext / kBlock;
  const int64_t pool_bytes = kBatch * kBlocksPerSeq * kBlock * kKvHeads * kHeadDim * 2;
  auto k = be.Allocate(pool_bytes, "k pool");
  auto v = be.Allocate(pool_bytes, "v pool");
  auto q = Upload(be, RandomBf16(kPrompt * kHeads * kHeadDim, 12, 1.0f).data(),
                  kPrompt * kHeads * kHeadDim * 2, "q");
  auto out = be.Allocate(kPrompt * kHeads * kHeadDim * 2, "attention out");
  BENCH_CHECK(k.status());
  BENCH_CHECK(v.status());
  BENCH_CHECK(q.status());
  BENCH_CHECK(out.status());
  const std::vector<uint16_t> kv = RandomBf16(pool_bytes / 2, 13, 1.0f);
  be.CopyToDevice(k->data(), kv.data(), pool_bytes);
  be.CopyToDevice(v->data(), kv.data(), pool_bytes);
  const KvPoolView pool{k->data(), v->data(), DType::kBF16, 1.0f, 1.0f,
                        kBatch * kBlocksPerSeq, kBlock, kKvHeads, kHeadDim};
  std::vector<std::vector<int32_t>> tables(kBatch);
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t i = 0; i < kBlocksPerSeq; ++i) {
      tables[b].push_back(static_cast<int32_t>(b * kBlocksPerSeq + i));
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::printf("\npaged attention, one layer (%lld heads / %lld KV heads x %lld, bf16 KV):\n",
              static_cast<long long>(kHeads), static_cast<long long>(kKvHeads),
              static_cast<long long>(kHeadDim));
  for (int64_t batch : {int64_t{1}, kBatch}) {
    std::vector<AttentionSequence> seqs;
    for (int64_t b = 0; b < batch; ++b) seqs.push_back({b, 1, kContext - 1, tables[b]});
    be.BeginStep(StepInputs{{}, {}, seqs, {}});
    const double ms = t.Ms(3, 50, [&](int) {
      be.PagedAttention(q->data(), kHeads, {.scale = scale}, pool, out->data());
    });
    BENCH_CHECK(be.Synchronize());
    const double bytes = 2.0 * batch * kContext * kKvHeads * kHeadDim * 2;
    const double gbs = bytes / (ms * 1e-3) / 1e9;
    std::printf("decode  batch %lld x %lld keys: %8.1f us, %6.0f GB/s, %3.0f%% of copy\n",
                static_cast<long long>(batch), static_cast<long long>(kContext), ms * 1e3, gbs,
                100.0 * gbs / copy_gbs);
  }
  const std::vector<AttentionSequence> prompt = {{0, kPrompt, 0, tables[0]}};
  be.BeginStep(StepInputs{{}, {}, prompt, {}});
  const double ms = t.Ms(3, 20, [&](int) {
    be.PagedAttention(q->data(), kHeads, {.scale = scale}, pool, out->data());
  });
  BENCH_CHECK(be.Synchronize());
  const double flops = 2.0 * 2.0 * kHeads * kPrompt * kPrompt * kHeadDim / 2;
  std::printf("prefill %lld tokens (causal): %8.1f us, %6.0f TFLOP/s, %3.0f%% of 989\n",
              static_cast<long long>(kPrompt), ms * 1e3, flops / (ms * 1e-3) / 1e12,
              100.0 * flops / (ms * 1e-3) / 989e12);
}

void GemmBench(Backend& be, Timer& t) {
  const int64_t m = 4096;
  std::printf("\n4096-row GEMMs (dense peaks: fp8 1979, bf16 989 TFLOP/s, H100/H200 SXM datasheet):\n");
  std::printf("%-6s %6s %6s %12s %12s %12s\n", "matrix", "n", "k", "fp8 MatMul", "fp8 GEMM",
              "bf16 GEMM");
  auto x = Upload(be, RandomBf16(m * kFfn, 5, 1.0f).data(), m * kFfn * 2, "x");
  auto y = be.Allocate(m * kFfn * 4, "y");
  auto x8 = Upload(be, RandomFp8(m * kFfn, 6).data(), m * kFfn, "x8");
  BENCH_CHECK(x.status());
  BENCH_CHECK(y.status());
  BENCH_CHECK(x8.status());
  auto gemm = cuda::CublasLtGemm::Create();
  BENCH_CHECK(gemm.status());
  for (const MatrixShape& s : {kLayerMatrices[0], kLayerMatrices[4], kLayerMatrices[6]}) {
    BenchMatrices w = MakeFp8(be, s.n, s.k, 1, 9);
    const double flops = 2.0 * m * s.n * s.k;
    const double full = t.Ms(3, 20, [&](int) {
      be.MatMul(x->data(), m, w.copies[0], y->data(), DType::kBF16);
    });
    cuda::GemmArgs g;
    g.type = cuda::GemmType::kE4M3;
    g.out = cuda::GemmType::kBF16;
    g.m = m;
    g.n = s.n;
    g.k = s.k;
    g.w = w.copies[0].data;
    g.ldw = s.k;
    g.x = x8->data();
    g.ldx = s.k;
    g.y = y->data();
    g.ldy = s.n;
    // The cuBLASLt fp8 GEMM alone, unscaled, bf16 out (f32 where bf16 is refused).
    absl::Status st = (*gemm)->Run(g, be.stream());
    if (!st.ok()) {
      g.out = cuda::GemmType::kF32;
      st = (*gemm)->Run(g, be.stream());
    }
    BENCH_CHECK(st);
    const double alone = t.Ms(3, 20, [&](int) { BENCH_CHECK((*gemm)->Run(g, be.stream())); });
    auto wb = Upload(be, RandomBf16(s.n * s.k, 8, 0.05f).data(), s.n * s.k * 2, "bf16 weights");
    BENCH_CHECK(wb.status());
    cuda::GemmArgs b = g;
    b.type = cuda::GemmType::kBF16;
    b.out = cuda::GemmType::kBF16;
    b.w = wb->data();
    b.x = x->data();
    const double bf16 = t.Ms(3, 20, [&](int) { BENCH_CHECK((*gemm)->Run(b, be.stream())); });
    BENCH_CHECK(be.Synchronize());
    std::printf("%-6s %6lld %6lld %7.3f ms %4.0fT %7.3f ms %4.0fT %7.3f ms %4.0fT\n", s.name,
                static_cast<long long>(s.n), static_cast<long long>(s.k), full,
                flops / full / 1e9, alone, flops / alone / 1e9, bf16, flops / bf16 / 1e9);
  }
}

}  // namespace
}  // namespace tpserve

int main(int argc, char** argv) {
  int device = 0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--device=", 9) == 0) device = std::atoi(argv[i] + 9);
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
  }
  auto be = tpserve::CreateCudaBackend(device);
  if (!be.ok()) {
    // As gpu_bench: no driver or no such device is a skip (exit 77), anything else a failure.
    const bool skip = absl::IsFailedPrecondition(be.status());
    std::printf("cuda_bench: %s: CreateCudaBackend(%d): %s\n", skip ? "SKIP" : "FAIL", device,
                be.status().ToString().c_str());
    return skip ? 77 : 1;
  }
  std::printf("%s\n", std::string((*be)->name()).c_str());
  tpserve::Timer timer((*be)->stream());
  const double copy_gbs = tpserve::CopyBandwidth(**be, timer);
  tpserve::GemvBench(**be, timer, copy_gbs);
  tpserve::GemmBench(**be, timer);
  tpserve::AttentionBench(**be, timer, copy_gbs);
  std::printf("\n");
  // Also the recorded (CUDA graph) step, checked against eager logits (not with
  // TPSERVE_CUDA_GRAPHS=0).
  for (bool captured : {false, true}) {
    if (captured && !(*be)->SupportsStepCapture()) continue;
    for (int64_t batch : {1, 8}) {
      tpserve::DecodeBench(**be, copy_gbs, batch, 1024, quick ? 5 : 20, captured);
    }
  }
  return 0;
}
