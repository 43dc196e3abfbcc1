#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/check.h"

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

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : isa_(options.isa.value_or(DetectCpuIsa())),
      name_("cpu-" + std::string(CpuIsaName(isa_))),
      kernels_(CpuKernelsFor(isa_)),
      pool_(options.num_threads),
      matmul_(kernels_, &pool_),
      attention_(kernels_, &pool_) {
  TP_CHECK(CpuSupportsIsa(isa_), "CpuBackendOptions.isa is not supported by this CPU");
}

bool CpuBackend::SupportsWeightType(DType dtype) const { return CpuMatMul::Supports(dtype); }

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

void CpuBackend::MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) {
  matmul_.Run(x, m, w, y);
}

void CpuBackend::MatMulChunked(const float* x, int64_t m, const WeightMatrix& w,
                               int64_t num_chunks, float* y) {
  matmul_.Run(x, m, w, num_chunks, y);
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim,
                         float eps, float* y) {
  const int64_t min_rows = std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(dim, 1));
  ParallelChunks(rows, min_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) kernels_.rms_norm(x + r * dim, weight, dim, eps, y + r * dim);
  });
}

void CpuBackend::Rope(float* x, int64_t rows, int64_t num_heads, int64_t head_dim,
                      const int32_t* positions, const float* inv_freq, RopeLayout layout) {
  TP_CHECK(head_dim % 2 == 0, "RoPE needs an even head_dim");
  const int64_t half = head_dim / 2;
  ParallelChunks(rows, std::max<int64_t>(1, kMinParallelElements / (num_heads * head_dim)),
                 [&](int64_t r0, int64_t r1) {
                   std::vector<float> cos_table(half), sin_table(half);
                   for (int64_t r = r0; r < r1; ++r) {
                     for (int64_t i = 0; i < half; ++i) {
                       // Angle in f64: at positions in the thousands, f32 would lose ~1e-4 rad.
                       const double angle = static_cast<double>(positions[r]) * inv_freq[i];
                       cos_table[i] = static_cast<float>(std::cos(angle));
                       sin_table[i] = static_cast<float>(std::sin(angle));
                     }
                     for (int64_t h = 0; h < num_heads; ++h) {
                       RotateHead(x + (r * num_heads + h) * head_dim, head_dim, cos_table.data(),
                                  sin_table.data(), layout);
                     }
                   }
                 });
}

void CpuBackend::SiluMul(const float* gate, const float* up, int64_t count, float* out) {
  ParallelChunks(count, kMinParallelElements, [&](int64_t i0, int64_t i1) {
    kernels_.silu_mul(gate + i0, up + i0, i1 - i0, out + i0);
  });
}

void CpuBackend::Add(const float* a, const float* b, int64_t count, float* out) {
  ParallelChunks(count, kMinParallelElements, [&](int64_t i0, int64_t i1) {
    kernels_.add(a + i0, b + i0, i1 - i0, out + i0);
  });
}

void CpuBackend::EmbeddingRows(const WeightMatrix& table, int64_t first_row, const int32_t* ids,
                               int64_t num_ids, float* out) {
  const auto* base = static_cast<const uint8_t*>(table.data);
  const int64_t cols = table.cols;
  ParallelChunks(num_ids, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(cols, 1)),
                 [&](int64_t i0, int64_t i1) {
                   for (int64_t i = i0; i < i1; ++i) {
                     const int64_t local = static_cast<int64_t>(ids[i]) - first_row;
                     float* dst = out + i * cols;
                     if (local < 0 || local >= table.rows) {
                       std::fill(dst, dst + cols, 0.0f);
                     } else {
                       DequantizeRow(table.dtype, base + local * table.row_bytes, dst, cols);
                     }
                   }
                 });
}

void CpuBackend::WriteKv(const float* k_new, const float* v_new,
                         absl::Span<const AttentionSequence> seqs, const KvPoolView& pool) {
  attention_.WriteKv(k_new, v_new, seqs, pool);
}

void CpuBackend::PagedAttention(const float* q, int64_t num_heads, float scale,
                                absl::Span<const AttentionSequence> seqs, const KvPoolView& pool,
                                float* out) {
  attention_.Run(q, num_heads, scale, seqs, pool, out);
}

}  // namespace tpserve
