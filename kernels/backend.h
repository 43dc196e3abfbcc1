// The compute seam between the model and the hardware: the handful of ops a Llama forward pass
// needs, behind a small interface so a CUDA backend can slot in beside the CPU one.
//
//   std::unique_ptr<Backend> be = CreateCpuBackend({.num_threads = 2});
//   be->MatMul(x, m, WeightMatrix{DType::kQ4_1, w, n, k, RowBytes(DType::kQ4_1, k).value()}, y);
//
// Memory: every `float*`/`const void*` tensor argument is BACKEND memory: host memory for the CPU
// backend; a device backend would take device pointers there (activations, KV pools, weights it
// uploaded). Small per-step metadata (token ids, positions, block tables, the RoPE table) is
// passed as host memory; a device backend copies it over itself.
// Errors: shapes and types are the caller's contract (REQUIRES lines); violating them is a
// programmer error. Callers check capabilities (SupportsWeightType) once at load time, so ops
// return nothing; asynchronous failures (a device fault) surface at Synchronize().
// Threading: one caller thread at a time per Backend instance; the backend may use its own
// worker threads inside an op. Ops run in call order.
#ifndef TPSERVE_KERNELS_BACKEND_H_
#define TPSERVE_KERNELS_BACKEND_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "formats/dtype.h"

namespace tpserve {

// A weight matrix W[rows, cols] stored row-major in its checkpoint type. A linear layer computes
// y = x * W^T, so rows = out_features (n) and cols = in_features (k). Quantized rows hold
// cols / BlockElems(dtype) whole blocks; consecutive rows start `row_bytes` apart (which may
// exceed the packed row size for a strided view). `data` is backend memory (see above).
struct WeightMatrix {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
};

// How RoPE pairs the elements of one head. GGUF checkpoints pair neighbours (llama.cpp permutes
// the Q/K rows at conversion to make that equivalent); Hugging Face checkpoints pair element i
// with element i + head_dim / 2 ("rotate half").
enum class RopeLayout {
  kInterleaved,  // pairs (2i, 2i+1)
  kRotateHalf,   // pairs (i, i + head_dim/2)
};

// One sequence's slice of a batched attention call.
struct AttentionSequence {
  int64_t first_row = 0;          // index of its first query row in q/out
  int64_t num_query_tokens = 0;   // n: rows first_row .. first_row + n - 1
  int64_t start_position = 0;     // position of its first query; query i sits at start + i
  // Logical block -> physical block in the KV pools (host memory). Must cover positions
  // [0, start_position + num_query_tokens).
  absl::Span<const int32_t> block_table;
};

// A paged KV pool of one layer: [num_blocks][block_size_tokens][num_kv_heads][head_dim] f32.
struct KvPoolView {
  float* k = nullptr;
  float* v = nullptr;
  int64_t num_blocks = 0;
  int64_t block_size_tokens = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Capabilities (cheap, no side effects) ----

  // Short name for logs and reports, e.g. "cpu-avx2" or "cpu-scalar".
  virtual std::string_view name() const = 0;
  // Whether MatMul and EmbeddingRows accept weights of this type.
  virtual bool SupportsWeightType(DType dtype) const = 0;

  // ---- Execution ----

  // y[m, n] = x[m, k] * W^T with W = w (n = w.rows, k = w.cols). x and y are f32, row-major and
  // must not overlap. Quantized weights (Q8_0/Q4_0/Q4_1) multiply against x quantized to 8-bit
  // blocks of 32 (the llama.cpp scheme), so results carry that rounding.
  // REQUIRES: SupportsWeightType(w.dtype), m >= 0, k a multiple of BlockElems(w.dtype).
  virtual void MatMul(const float* x, int64_t m, const WeightMatrix& w, float* y) = 0;

  // The input dimension cut into `num_chunks` equal chunks, each multiplied on its own:
  // y[c, m, n] = x[:, chunk c] * W[:, chunk c]^T. Chunk c's result must be bit-identical to
  // MatMul of that chunk alone: row-parallel layers sum chunks in a fixed order so that every
  // tensor-parallel degree gives the same floats (worker/llama_model.cc).
  // REQUIRES: as MatMul, and (w.cols / num_chunks) % BlockElems(w.dtype) == 0.
  virtual void MatMulChunked(const float* x, int64_t m, const WeightMatrix& w,
                             int64_t num_chunks, float* y) = 0;

  // y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:] for r < rows; x, y [rows, dim].
  // y may equal x (in place).
  virtual void RmsNorm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                       float* y) = 0;

  // Rotates x[rows, num_heads, head_dim] in place: row r by angle positions[r] * inv_freq[i] for
  // pair i (inv_freq has head_dim / 2 entries, see rope_table.h). positions is host memory.
  virtual void Rope(float* x, int64_t rows, int64_t num_heads, int64_t head_dim,
                    const int32_t* positions, const float* inv_freq, RopeLayout layout) = 0;

  // out[i] = silu(gate[i]) * up[i] for i < count (SwiGLU); out may alias gate or up.
  virtual void SiluMul(const float* gate, const float* up, int64_t count, float* out) = 0;

  // out[i] = a[i] + b[i] for i < count; out may alias a or b.
  virtual void Add(const float* a, const float* b, int64_t count, float* out) = 0;

  // out[i, :] = dequantized row (ids[i] - first_row) of `table` for i < num_ids, or zeros when
  // the id falls outside [first_row, first_row + table.rows) (a vocab-parallel shard).
  // out is [num_ids, table.cols] f32; ids is host memory.
  virtual void EmbeddingRows(const WeightMatrix& table, int64_t first_row, const int32_t* ids,
                             int64_t num_ids, float* out) = 0;

  // Stores k_new/v_new [rows, num_kv_heads, head_dim] at their positions (host memory) in the
  // pool, through `seq`'s block table; rows of one sequence are [first_row, + num_query_tokens).
  // REQUIRES: every block table covers its positions and names blocks < pool.num_blocks.
  virtual void WriteKv(const float* k_new, const float* v_new,
                       absl::Span<const AttentionSequence> seqs, const KvPoolView& pool) = 0;

  // Causal grouped-query attention over the paged pool.
  // q, out: [rows, num_heads, head_dim]; query head h reads KV head h / (num_heads/num_kv_heads).
  // A query at position p attends to positions 0..p of its own sequence (already in the pool);
  // softmax(scale * q.k) in f32 with max subtraction.
  // REQUIRES: num_heads % pool.num_kv_heads == 0, block tables as for WriteKv.
  virtual void PagedAttention(const float* q, int64_t num_heads, float scale,
                              absl::Span<const AttentionSequence> seqs, const KvPoolView& pool,
                              float* out) = 0;

  // Waits for queued work; reports asynchronous failures. The CPU backend runs ops to
  // completion inside each call, so it always returns OK.
  virtual absl::Status Synchronize() = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_BACKEND_H_
