// W4A16 and W8A16 matrix multiplies on Hopper tensor cores through CUTLASS's sm90 mixed-input
// GEMM (cutlass/gemm/collective/sm90_mma_tma_gmma_rs_warpspecialized_mixed_input.hpp): exact
// bf16 activations, int4 or fp8 e4m3 weights converted to bf16 in registers with their scales
// (and int4 zero points) applied there, f32 accumulation. README.md has the layouts, the
// numerics and the compile cost. Plain C++ header (no CUDA or CUTLASS includes).
//
//   if (MixedGemmTakesWeight(w.format, w.rows, w.cols)) {          // at load
//     PreparedInt4 p = PrepareInt4(w);  ... upload p's three buffers ...
//   }
//   const MixedGemmPlan plan = PlanMixedGemm(w.format, m, n, k, sm_count);   // per call
//   RunMixedGemm(weight, call, plan, stream);
//
// The product, y[c, t, r] = sum_j x[t, c*kc + j] * W[r, c*kc + j] (kc = k / num_chunks), is
// computed "swap AB": the weights are CUTLASS's A operand (their rows fill the tile's M side)
// and the tokens its B operand, so a decode batch of 1..16 tokens runs on a 128 x 16 tile.
// Threading: pure functions and stateless launchers; calls on one stream run in order.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_MIXED_GEMM_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_MIXED_GEMM_H_

#include <cstdint>

#include "formats/tensor_format.h"

namespace tpserve::cuda {

// The collective needs K tiles of at least 4 MMA k-blocks (K_BLOCK_MAX >= 4, 16 bf16 values
// each), and a group size that is a multiple of the K tile.
inline constexpr int64_t kMixedGemmTileK = 64;
// Tokens that count as decode-sized (parity_bounds.h kFp8QuantizedRowsAbove): fp8 weights take
// the mixed GEMM only up to here (larger batches quantize x to e4m3 for cuBLASLt's fp8 GEMM),
// unless a deterministic mode asks for batch-invariant plans.
inline constexpr int64_t kMixedGemmDecodeTokens = 16;
// Weight rows come in whole 16 x 16 reorder atoms (prepared_layout.h), and y's rows must be
// 16-byte aligned for the TMA store.
inline constexpr int64_t kMixedGemmRowMultiple = 16;
// fp8 weights get their scales as f32 per (128 input columns, row): plain and per-channel
// scales repeated, 128x128 tile scales repeated over the tile's rows.
inline constexpr int64_t kFp8ScaleGroup = 128;

enum class MixedGemmKind : uint8_t {
  kInt4,  // signed int4 codes (code - 8), f32 scale and f32 offset per (group, row)
  kFp8,   // e4m3 codes in the checkpoint's rows, f32 scale per (128 columns, row)
};

enum class MixedGemmTile : uint8_t {
  kDecode,  // 128 weight rows x 16 tokens x 64: m <= 16, one N tile holds the whole batch
  kLarge,   // 128 x 128 x 64 (int4 only, m > 16, not batch-invariant)
};

struct MixedGemmPlan {
  MixedGemmKind kind = MixedGemmKind::kInt4;
  MixedGemmTile tile = MixedGemmTile::kDecode;
  // Each output tile's k range is cut into `splits` equal parts summed in a fixed order
  // (CUTLASS split-K, deterministic reduction); 1: one CTA sums the whole range.
  int32_t splits = 1;
  friend bool operator==(const MixedGemmPlan&, const MixedGemmPlan&) = default;
};

// Whether W of `format` and shape [n, k] can be multiplied here for some batch size: the
// load-time question (its answer decides whether to prepare the weight). int4 groups with
// group_size % 64 == 0 (act-order too: callers gather x first), fp8 plain / per channel /
// 128x128 with k % 128 == 0; n % 16 == 0, n, k > 0.
bool MixedGemmTakesWeight(const TensorFormat& format, int64_t n, int64_t k);

// And for a batch of m tokens: MixedGemmTakesWeight, m >= 1, and m <= 16 for fp8 unless
// `batch_invariant` (then exact bf16 activations at every m, as a deterministic mode wants).
bool MixedGemmSupports(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                       bool batch_invariant = false);

// The tile and split count of one call: n, k of one chunk (so a chunked call plans each chunk
// as a call on that chunk alone would), `sm_count` the device's SMs. A pure function of its
// arguments. `batch_invariant` (deterministic mode): the decode tile and a split count of k
// alone (not of m, n or sm_count), so a row's floats depend neither on the batch it came in
// nor on the slice of output rows a tensor-parallel rank holds (every 16-token column and every
// 128-row tile sums the same way). REQUIRES: MixedGemmSupports(format, m, n, k,
// batch_invariant), sm_count >= 1.
MixedGemmPlan PlanMixedGemm(const TensorFormat& format, int64_t m, int64_t n, int64_t k,
                            int sm_count, bool batch_invariant = false);

// Device bytes of a prepared weight [n, k] (prepare.h). int4: codes n*k/2 (the checkpoint's
// bytes re-laid out), f32 scales and offsets 4*n*k/G each: 4*n*k/G more than MatrixBytes counts
// (which has f16 scales and zeros); the prepared form replaces the checkpoint's. fp8: the
// checkpoint's codes are used in place (codes = 0 here), plus f32 scales 4*n*k/128 = n*k/32
// kept beside the checkpoint's own (the larger-batch fp8 GEMM reads those).
// REQUIRES: MixedGemmTakesWeight(format, n, k).
struct MixedGemmPreparedBytes {
  int64_t codes = 0;
  int64_t scales = 0;
  int64_t offsets = 0;
  int64_t total() const { return codes + scales + offsets; }
};
MixedGemmPreparedBytes PreparedBytes(const TensorFormat& format, int64_t n, int64_t k);

// A prepared weight in device memory (or host memory, for the host readers of prepare.h).
struct MixedGemmWeight {
  MixedGemmKind kind = MixedGemmKind::kInt4;
  const void* codes = nullptr;     // int4: PrepareInt4's layout; fp8: e4m3 rows, row_bytes apart
  int64_t row_bytes = 0;           // fp8 only
  const float* scales = nullptr;   // [k / group_size][n]
  const float* offsets = nullptr;  // int4: [k / group_size][n]; fp8: nullptr
  int64_t group_size = 0;          // int4: the format's; fp8: kFp8ScaleGroup
  int64_t n = 0;
  int64_t k = 0;
};

// Columns [c * kc, (c + 1) * kc) of `w` as a weight of their own (ColumnChunk of
// kernels/weight_matrix.h, for the prepared form: an int4 chunk is one contiguous block of
// codes). REQUIRES: kc % 64 == 0, kc % w.group_size == 0, (c + 1) * kc <= w.k.
MixedGemmWeight MixedGemmColumnChunk(const MixedGemmWeight& w, int64_t c, int64_t kc);

struct MixedGemmCall {
  const void* x = nullptr;  // bf16 [m, num_chunks * w.k], rows x_row_elems apart
  int64_t x_row_elems = 0;
  int64_t m = 0;
  int64_t num_chunks = 1;  // w.k is one chunk's width; chunk c reads x columns c * w.k ...
  void* y = nullptr;       // [num_chunks, m, w.n], f32 when y_f32 else bf16
  bool y_f32 = false;
  void* workspace = nullptr;  // MixedGemmWorkspaceBytes of the same call
  int64_t workspace_bytes = 0;
  int sm_count = 0;  // the plan's
};

// Whether the operands fit what the kernels' TMA descriptors and `plan` need: w.kind is the
// plan's; 16-byte aligned x, y, codes, scales (and int4 offsets); x_row_elems % 8 == 0 and at
// least num_chunks * w.k; fp8 row_bytes % 16 == 0; n % 16, k % 64, k % group_size == 0; sizes
// within int. A caller whose x is not aligned copies it into aligned scratch first.
bool MixedGemmCallFits(const MixedGemmWeight& w, const MixedGemmCall& call,
                       const MixedGemmPlan& plan);

// Chunk c of a call with num_chunks > 1 has, bit for bit, the floats of a call on
// MixedGemmColumnChunk(w, c, kc) alone with num_chunks = 1 and x's columns of the chunk: each
// chunk is one entry of CUTLASS's batch mode with the same tile, K loop and split count.

// Device workspace the call needs (split-K partial sums and their flags); 0 when splits = 1.
// Computed by CUTLASS on the host; no device is touched.
int64_t MixedGemmWorkspaceBytes(const MixedGemmPlan& plan, int64_t m, int64_t n, int64_t k,
                                int64_t num_chunks, bool y_f32, int sm_count);

// Queues the GEMM on `stream` (a cudaStream_t). Returns a cudaError_t as int (0: queued):
// cudaErrorInvalidValue when !MixedGemmCallFits, the workspace is smaller than
// MixedGemmWorkspaceBytes, or CUTLASS's can_implement refuses; otherwise the launch's
// cudaGetLastError(). REQUIRES: MixedGemmSupports for (m, w.n, w.k), plan from PlanMixedGemm
// of the same. Defined in the :mixed_gemm library (CUDA builds only), like
// MixedGemmWorkspaceBytes.
int RunMixedGemm(const MixedGemmWeight& w, const MixedGemmCall& call, const MixedGemmPlan& plan,
                 void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_MIXED_GEMM_H_
