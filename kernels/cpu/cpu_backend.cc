#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <vector>

#include "base/status_macros.h"
#include "base/str_cat.h"

#include "kernels/check.h"
#include "kernels/step_capture.h"

namespace tpserve {
namespace {

// Element-wise ops below this size run inline: waking a worker costs more than the work.
constexpr int64_t kMinParallelElements = 1 << 15;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rotates one head: pair i is (x[a_i], x[b_i]) with a/b chosen by the layout.
void RotateHead(float* x, int64_t head_dim, const float* cos_table, const float* sin_table,
                RopeLayout layout) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t a = layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int64_t b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
    const float x0 = x[a];
    const float x1 = x[b];
    x[a] = x0 * cos_table[i] - x1 * sin_table[i];
    x[b] = x0 * sin_table[i] + x1 * cos_table[i];
  }
}

}  // namespace

const char* CpuOpProfile::Name(int op) {
  static constexpr const char* kNames[kNumOps] = {
      "matmul", "matmul_chunked", "sum_chunks", "rms_norm", "rope", "gated_activation", "add",
      "elementwise", "embedding", "gather_logit_rows", "write_kv", "attention",
      "route_experts", "moe_experts"};
  return op >= 0 && op < kNumOps ? kNames[op] : "?";
}

double CpuOpProfile::TotalSeconds() const {
  double total = 0;
  for (double s : seconds) total += s;
  return total;
}

namespace {

bool OneDnnBf16Wanted(const CpuBackendOptions& options) {
  if (options.onednn_bf16.has_value()) return *options.onednn_bf16;
  const char* env = std::getenv("TPSERVE_CPU_BF16_MATMUL");
  return env != nullptr && std::string_view(env) == "onednn";
}

}  // namespace

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : isa_(options.isa.value_or(DetectCpuIsa())),
      emulate_step_capture_(options.emulate_step_capture),
      profiling_(options.profile),
      onednn_bf16_(OneDnnBf16Wanted(options) && OneDnnBf16MatMul::Supported()),
      name_("cpu-" + std::string(CpuIsaName(isa_)) + (onednn_bf16_ ? "+onednn-bf16" : "")),
      kernels_(CpuKernelsFor(isa_)),
      pool_(options.num_threads),
      matmul_(kernels_, &pool_),
      moe_(kernels_, &matmul_),
      attention_(kernels_, &pool_) {
  TP_CHECK(CpuSupportsIsa(isa_), "CpuBackendOptions.isa is not supported by this CPU");
}

bool CpuBackend::SupportsWeight(const TensorFormat& format) const {
  return CpuMatMul::Supports(format);
}

bool CpuBackend::SupportsKvDtype(DType dtype) const { return IsKvDtype(dtype); }

absl::StatusOr<DeviceBuffer> CpuBackend::Allocate(int64_t bytes, std::string_view what) {
  TP_RETURN_IF_ERROR(RefusedInsideCapture("Allocate"));
  if (bytes < 0) {
    return absl::InvalidArgumentError(StrCat(what, ": negative size ", bytes));
  }
  // 64-byte alignment (a cache line, a full AVX-512 vector); at least one byte so every
  // buffer has a distinct address.
  const size_t size = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        StrCat(what, ": cannot allocate ", bytes, " bytes of host memory"));
  }
  return DeviceBuffer(this, p, bytes);
}

void CpuBackend::Free(void* data, int64_t) { std::free(data); }

void CpuBackend::BeginStep(const StepInputs& step) {
  TP_CHECK(!in_capture_body_, "BeginStep inside a RunCaptured body (kernels/backend.h)");
  step_ = step;
  rope_angles_.clear();
}

absl::Status CpuBackend::Synchronize() { return RefusedInsideCapture("Synchronize"); }

absl::Status CpuBackend::RefusedInsideCapture(const char* op) const {
  if (!in_capture_body_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat(op, " inside a RunCaptured body: a recorded step may not wait on the device, "
                 "allocate or begin a step (kernels/backend.h)"));
}

absl::Status CpuBackend::RunCaptured(const void* owner, int64_t key,
                                     absl::FunctionRef<absl::Status()> body) {
  if (!emulate_step_capture_) return body();
  // The CUDA backend's key: its recorded attention grid is sized for the context bucket.
  int64_t max_context = 0;
  for (const AttentionSequence& s : step_.seqs) {
    if (s.num_query_tokens == 1 && !s.padding) {
      max_context = std::max(max_context, s.start_position + 1);
    }
  }
  Recording& r = recordings_[{owner, key, CaptureContextBucket(max_context)}];
  const size_t rows = step_.positions.size(), seqs = step_.seqs.size();
  const size_t logit_rows = step_.logit_rows.size();
  if (r.runs >= 2 && (r.rows != rows || r.seqs != seqs || r.logit_rows != logit_rows)) {
    return absl::FailedPreconditionError(StrCat(
        "RunCaptured key ", key, " replayed for ", rows, " rows, ", seqs, " sequences and ",
        logit_rows, " logit rows; recorded for ", r.rows, ", ", r.seqs, " and ", r.logit_rows));
  }
  if (r.runs == 1) {  // the run the CUDA backend records: its shape is the key's from now on
    r.rows = rows;
    r.seqs = seqs;
    r.logit_rows = logit_rows;
  }
  ++(r.runs == 0 ? capture_counts_.warm_runs
                 : r.runs == 1 ? capture_counts_.recordings : capture_counts_.replays);
  ++r.runs;
  in_capture_body_ = true;
  const absl::Status status = body();
  in_capture_body_ = false;
  return status;
}

void CpuBackend::ForgetCaptured(const void* owner) {
  for (auto it = recordings_.begin(); it != recordings_.end();) {
    it = std::get<0>(it->first) == owner ? recordings_.erase(it) : std::next(it);
  }
}

void CpuBackend::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

absl::Status CpuBackend::CopyToHost(void* dst, const void* src, int64_t bytes) {
  TP_RETURN_IF_ERROR(RefusedInsideCapture("CopyToHost"));
  if (bytes > 0) std::memcpy(dst, src, bytes);
  return absl::OkStatus();
}

void CpuBackend::Copy2D(void* dst, int64_t dst_stride_bytes, const void* src,
                        int64_t src_stride_bytes, int64_t row_bytes, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<uint8_t*>(dst) + r * dst_stride_bytes,
                static_cast<const uint8_t*>(src) + r * src_stride_bytes, row_bytes);
  }
}

void CpuBackend::FillZero(void* dst, int64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, bytes);
}

void CpuBackend::ParallelChunks(int64_t count, int64_t min_chunk,
                                absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (count <= 0) return;
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(4 * pool_.num_threads(), count / std::max<int64_t>(min_chunk, 1)));
  const int64_t per_chunk = CeilDiv(count, chunks);
  pool_.ParallelFor(CeilDiv(count, per_chunk), [&](int64_t c, int) {
    fn(c * per_chunk, std::min(count, (c + 1) * per_chunk));
  });
}

absl::StatusOr<PlacedWeight> CpuBackend::PlaceWeight(const HostMatrix& host, WeightUse use,
                                                     std::string_view what) {
  if (use == WeightUse::kMatMul && InterleavesRowGroups(host.matrix.format) &&
      host.matrix.input_perm == nullptr) {
    // Only multiplied: held in CpuMatMul's interleaved form instead of the stored one, the same
    // bytes in another order (copied out of a checkpoint this rank would otherwise read in
    // place).
    auto bytes = std::make_shared<const std::vector<uint8_t>>(InterleaveRowGroups(host.matrix));
    PlacedWeight placed;
    placed.matrix = host.matrix;
    placed.matrix.data = nullptr;
    placed.matrix.prepared = bytes->data();
    placed.matrix.row_bytes = PackedRowBytes(host.matrix.format, host.matrix.cols);
    placed.bytes_copied = static_cast<int64_t>(bytes->size());
    placed.prepared = std::move(bytes);
    return placed;
  }
  // Any other use: the stored form stays (a table, an embedding tied to the LM head, is read by
  // EmbeddingRows) and a bf16 packing goes beside it.
  TP_ASSIGN_OR_RETURN(PlacedWeight placed, Backend::PlaceWeight(host, use, what));
  const WeightMatrix& w = placed.matrix;
  if (!onednn_bf16_ || w.format.kind != FormatKind::kBF16 || w.input_perm != nullptr) {
    return placed;
  }
  // One slice per pool thread: 4 per thread measured slower (each thread's weights are then
  // several short streams).
  absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> packed =
      OneDnnBf16MatMul::Pack(w, pool_.num_threads());
  // A shape oneDNN has no fast path for keeps the stored form and our kernels.
  if (!packed.ok()) return placed;
  placed.bytes_copied += (*packed)->packed_bytes();
  std::shared_ptr<const OneDnnBf16MatMul> owned = *std::move(packed);
  placed.matrix.prepared = owned.get();
  placed.prepared = std::move(owned);
  return placed;
}

const OneDnnBf16MatMul* CpuBackend::PackedBf16(const WeightMatrix& w) const {
  if (!onednn_bf16_ || w.prepared == nullptr || w.format.kind != FormatKind::kBF16) {
    return nullptr;
  }
  const auto* packed = static_cast<const OneDnnBf16MatMul*>(w.prepared);
  const bool same = packed->source() == w.data && packed->rows() == w.rows &&
                    packed->cols() == w.cols;
  return same ? packed : nullptr;
}

void CpuBackend::RunPacked(const OneDnnBf16MatMul& packed, const float* x, int64_t m,
                           const WeightMatrix& w, float* y) {
  const absl::Status ran = packed.Run(x, m, y, &pool_);
  TP_CHECK(ran.ok(), std::string(ran.message()).c_str());
  if (w.bias == nullptr) return;
  for (int64_t t = 0; t < m; ++t) kernels_.add(y + t * w.rows, w.bias, w.rows, y + t * w.rows);
}

void CpuBackend::MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y,
                        DType y_dtype) {
  OpTimer timer(this, CpuOpProfile::kMatMul);
  TP_CHECK(y_dtype == DType::kF32, "the CPU backend writes f32 outputs");
  if (const OneDnnBf16MatMul* packed = PackedBf16(w)) {
    RunPacked(*packed, static_cast<const float*>(x), m, w, static_cast<float*>(y));
    return;
  }
  matmul_.Run(static_cast<const float*>(x), m, w, static_cast<float*>(y));
}

void CpuBackend::MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs,
                            DType y_dtype, const WeightMatrix* /*fused*/) {
  OpTimer timer(this, CpuOpProfile::kMatMul);
  TP_CHECK(y_dtype == DType::kF32, "the CPU backend writes f32 outputs");
  std::vector<CpuMatMul::Output> parts;
  parts.reserve(outs.size());
  for (const MatMulOut& o : outs) {
    if (const OneDnnBf16MatMul* packed = PackedBf16(*o.w)) {
      RunPacked(*packed, static_cast<const float*>(x), m, *o.w, static_cast<float*>(o.y));
    } else {
      parts.push_back({o.w, static_cast<float*>(o.y)});
    }
  }
  if (!parts.empty()) matmul_.RunMany(static_cast<const float*>(x), m, parts);
}

void CpuBackend::MatMulChunked(const void* x, int64_t m, const WeightMatrix& w,
                               int64_t num_chunks, float* y) {
  OpTimer timer(this, CpuOpProfile::kMatMulChunked);
  // Always our kernels on the stored form, also for a oneDNN-packed bf16 matrix and one chunk:
  // --deterministic_tp multiplies every degree's chunks here (TP 1's C chunks, TP C's one), so
  // they agree bit for bit. Under the opt-in, a chunk then differs from MatMul of that chunk
  // alone, which Backend's contract asks (cpu_parity_test checks it without the opt-in).
  matmul_.Run(static_cast<const float*>(x), m, w, num_chunks, y);
}

void CpuBackend::SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) {
  OpTimer timer(this, CpuOpProfile::kSumChunks);
  float* o = static_cast<float*>(out);
  std::memcpy(o, chunks, count * sizeof(float));
  // ((c0 + c1) + c2) + ...: one pass per chunk, each element-wise and in place.
  for (int64_t c = 1; c < num_chunks; ++c) AddUntimed(o, chunks + c * count, count, o);
}

void CpuBackend::RmsNorm(const void* xv, const float* weight, int64_t rows, int64_t dim,
                         float eps, void* yv) {
  OpTimer timer(this, CpuOpProfile::kRmsNorm);
  const float* x = static_cast<const float*>(xv);
  float* y = static_cast<float*>(yv);
  const int64_t min_rows = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(dim, 1));
  ParallelChunks(rows, min_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels_.rms_norm(x + r * dim, weight, dim, eps, y + r * dim);
  });
}

void CpuBackend::Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
                      RopeLayout layout) {
  RopePart(x, num_heads, head_dim, 0, head_dim, inv_freq, layout);
}

void CpuBackend::RopePart(void* xv, int64_t num_heads, int64_t head_stride, int64_t offset,
                          int64_t rope_dim, const float* inv_freq, RopeLayout layout) {
  OpTimer timer(this, CpuOpProfile::kRope);
  TP_CHECK(rope_dim % 2 == 0, "RoPE needs an even head_dim");
  TP_CHECK(offset >= 0 && offset + rope_dim <= head_stride, "RoPE dims outside the head");
  float* x = static_cast<float*>(xv);
  const int64_t rows = static_cast<int64_t>(step_.positions.size());
  const int64_t half = rope_dim / 2;
  const RopeAngles& angles = AnglesFor(inv_freq, half);
  ParallelChunks(rows, std::max<int64_t>(1, kMinParallelElements / (num_heads * rope_dim)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     for (int64_t h = 0; h < num_heads; ++h) {
                       RotateHead(x + (r * num_heads + h) * head_stride + offset, rope_dim,
                                  angles.cos.data() + r * half, angles.sin.data() + r * half,
                                  layout);
                     }
                   }
                 });
}

const CpuBackend::RopeAngles& CpuBackend::AnglesFor(const float* inv_freq, int64_t half) {
  for (const RopeAngles& a : rope_angles_) {
    if (a.inv_freq == inv_freq && a.half == half) return a;
  }
  const int64_t rows = static_cast<int64_t>(step_.positions.size());
  RopeAngles& a = rope_angles_.emplace_back();
  a.inv_freq = inv_freq;
  a.half = half;
  a.cos.resize(rows * half);
  a.sin.resize(rows * half);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      // Angle in f64: at positions in the thousands, f32 would lose ~1e-4 rad.
      const double angle = static_cast<double>(step_.positions[r]) * inv_freq[i];
      a.cos[r * half + i] = static_cast<float>(std::cos(angle));
      a.sin[r * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return a;
}

void CpuBackend::GatedActivation(Activation act, const void* gate, const void* up,
                                 int64_t count, void* out) {
  OpTimer timer(this, CpuOpProfile::kGatedActivation);
  const float* g = static_cast<const float*>(gate);
  const float* u = static_cast<const float*>(up);
  float* o = static_cast<float*>(out);
  const auto kernel = act == Activation::kSilu ? kernels_.silu_mul : kernels_.gelu_tanh_mul;
  ParallelChunks(count, kMinParallelElements, [&](int64_t i0, int64_t i1) {
    kernel(g + i0, u + i0, i1 - i0, o + i0);
  });
}

void CpuBackend::RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                              const float* correction_bias, int32_t* ids, float* weights) {
  OpTimer timer(this, CpuOpProfile::kRouteExperts);
  RouteTokens(routing, logits, rows, correction_bias, ids, weights);
}

void CpuBackend::MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                            const ExpertMlp* shared, Activation act, const int32_t* ids,
                            const float* weights, bool weights_on_input, int64_t top_k,
                            int64_t num_chunks, const MoeWorkspace& scratch, float* out) {
  OpTimer timer(this, CpuOpProfile::kMoeExperts);
  moe_.Run(static_cast<const float*>(x), rows, experts, shared, act, ids, weights,
           weights_on_input, top_k, num_chunks, scratch, out);
}

void CpuBackend::MoeExpertSlots(const void* x, int64_t rows,
                                absl::Span<const ExpertMlp> experts, int64_t first_expert,
                                Activation act, const int32_t* ids, const float* weights,
                                bool weights_on_input, int64_t top_k, int64_t num_chunks,
                                const int32_t* slot_pos, const MoeWorkspace& scratch,
                                float* slots) {
  OpTimer timer(this, CpuOpProfile::kMoeExperts);
  moe_.RunSlots(static_cast<const float*>(x), rows, experts, first_expert, act, ids,
                weights_on_input ? weights : nullptr, top_k, num_chunks, slot_pos, scratch,
                slots);
}

void CpuBackend::MoeCombine(const void* x, int64_t rows, const float* slots,
                            const int32_t* slot_pos, const float* weights,
                            bool weights_on_input, int64_t top_k, int64_t num_chunks,
                            int64_t hidden, const ExpertMlp* shared, Activation act,
                            const MoeWorkspace& scratch, float* out) {
  OpTimer timer(this, CpuOpProfile::kMoeExperts);
  moe_.Combine(static_cast<const float*>(x), rows, slots, slot_pos, weights, weights_on_input,
               top_k, num_chunks, hidden, shared, act, scratch, out);
}

void CpuBackend::Scale(void* xv, int64_t count, float factor) {
  OpTimer timer(this, CpuOpProfile::kElementwise);
  float* x = static_cast<float*>(xv);
  ParallelChunks(count, kMinParallelElements,
                 [&](int64_t i0, int64_t i1) { kernels_.scale(factor, i1 - i0, x + i0); });
}

void CpuBackend::SoftCapF32(float* x, int64_t count, float cap) {
  OpTimer timer(this, CpuOpProfile::kElementwise);
  TP_CHECK(cap > 0, "SoftCapF32 needs a positive cap");
  ParallelChunks(count, kMinParallelElements, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) x[i] = cap * std::tanh(x[i] / cap);
  });
}

void CpuBackend::Add(const void* a, const void* b, int64_t count, void* out) {
  OpTimer timer(this, CpuOpProfile::kAdd);
  AddUntimed(a, b, count, out);
}

void CpuBackend::AddUntimed(const void* a, const void* b, int64_t count, void* out) {
  const float* pa = static_cast<const float*>(a);
  const float* pb = static_cast<const float*>(b);
  float* o = static_cast<float*>(out);
  ParallelChunks(count, kMinParallelElements, [&](int64_t i0, int64_t i1) {
    kernels_.add(pa + i0, pb + i0, i1 - i0, o + i0);
  });
}

void CpuBackend::EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* outv) {
  OpTimer timer(this, CpuOpProfile::kEmbedding);
  float* out = static_cast<float*>(outv);
  const int32_t* ids = step_.token_ids.data();
  const int64_t num_ids = static_cast<int64_t>(step_.token_ids.size());
  const int64_t cols = table.cols;
  ParallelChunks(num_ids, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(cols, 1)),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1; ++i) {
                     const int64_t local = static_cast<int64_t>(ids[i]) - first_row;
                     float* dst = out + i * cols;
                     if (local < 0 || local >= table.rows) {
                       std::fill(dst, dst + cols, 0.0f);
                     } else {
                       DequantizeWeightRow(table, local, dst);
                     }
                   }
                 });
}

void CpuBackend::GatherLogitRows(const void* x, int64_t row_elems, void* out) {
  OpTimer timer(this, CpuOpProfile::kGatherLogitRows);
  const int64_t row_bytes = row_elems * static_cast<int64_t>(sizeof(float));
  for (size_t i = 0; i < step_.logit_rows.size(); ++i) {
    std::memcpy(static_cast<uint8_t*>(out) + i * row_bytes,
                static_cast<const uint8_t*>(x) + step_.logit_rows[i] * row_bytes, row_bytes);
  }
}

void CpuBackend::WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) {
  OpTimer timer(this, CpuOpProfile::kWriteKv);
  TP_CHECK(SupportsKvDtype(pool.dtype), "KV dtype not supported by the CPU backend");
  attention_.WriteKv(static_cast<const float*>(k_new), static_cast<const float*>(v_new),
                     step_.seqs, pool);
}

void CpuBackend::PrefillAttention(const void* q, const void* k, const void* v,
                                  int64_t num_heads, int64_t key_dim, int64_t value_dim,
                                  float scale, void* out) {
  OpTimer timer(this, CpuOpProfile::kAttention);
  attention_.RunPrefill(static_cast<const float*>(q), static_cast<const float*>(k),
                        static_cast<const float*>(v), num_heads, key_dim, value_dim, scale,
                        step_.seqs, static_cast<float*>(out));
}

void CpuBackend::PagedAttention(const void* q, int64_t num_heads,
                                const AttentionParams& params, const KvPoolView& pool,
                                void* out) {
  OpTimer timer(this, CpuOpProfile::kAttention);
  TP_CHECK(SupportsKvDtype(pool.dtype), "KV dtype not supported by the CPU backend");
  attention_.Run(static_cast<const float*>(q), num_heads, params, step_.seqs, pool,
                 static_cast<float*>(out));
}

}  // namespace tpserve
