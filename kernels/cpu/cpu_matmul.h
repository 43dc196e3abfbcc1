// The CPU matrix multiply behind CpuBackend::MatMul: y[m, n] = x[m, k] * W^T (+ w.bias, added
// to each finished tile), tiled over (weight rows x activation rows) and spread over a
// ThreadPool.
//
//   CpuMatMul matmul(CpuKernelsFor(CpuIsa::kAvx2), &pool);
//   matmul.Run(x, m, w, y);
//
// Quantized weights (GGML blocks, int4 groups): x is quantized once per call into 8-bit blocks
// (Q8Block) and each tile multiplies one unpacked weight row (Q8_0, Q4_0/1, Q5_0/1: a group of
// kWeightRowGroup rows, one per SIMD lane) against up to kMaxDotRows activation rows at a time,
// so prefill re-uses both the quantized activations and each unpacked weight block. Q8_0,
// Q4_0/1 and Q5_0/1 matrices that are only multiplied are held interleaved (InterleaveRowGroups
// below) and always run as row groups; in their stored form (a table, a view) Q4_0/1 and Q5_0/1
// rows of up to 512 bytes do, the others one row at a time. Every GGML
// block type (Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 blocks of 32, Q4_K/Q5_K/Q6_K super-blocks of 256) and
// every int4 group (a multiple of 32 columns) multiplies against the same Q8 blocks of 32. An
// int4 act-order permutation gathers x into stored column order once per call, before
// quantizing.
// fp8 weights (e4m3, per-channel, 128x128 tiles): decoded in registers inside the dot kernel
// and multiplied against f32 activations, scales applied per row or per 128-column tile.
// Float weights (f32/f16/bf16): dotted with f32 activations; a 16-bit row is widened in
// registers at decode sizes (up to kMaxDotRows activation rows per tile), and to f32 scratch
// once per tile for more rows.
// Threading: not thread-safe (owns scratch buffers); one Run at a time.
#ifndef TPSERVE_KERNELS_CPU_CPU_MATMUL_H_
#define TPSERVE_KERNELS_CPU_CPU_MATMUL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace tpserve {

// The CPU backend's own form of a Q8_0, Q4_0/1 or Q5_0/1 matrix that is only multiplied
// (WeightUse::kMatMul; CpuBackend::PlaceWeight): its rows in groups of kWeightRowGroup from row
// 0, each group's blocks interleaved, so that a group is one sequential stream (block b of row
// i of the group at (b * kWeightRowGroup + i) * block bytes, the groups row_bytes *
// kWeightRowGroup apart); a last group of fewer rows keeps its rows one after another. The
// matrix then has data == nullptr, prepared == these bytes and row_bytes == one row's blocks
// (PackedRowBytes), and only CpuMatMul reads it. Why: eight rows read block by block from eight
// places defeat the hardware prefetcher on matrices streamed from DRAM, so rows of more than
// 512 bytes, and Q8_0's of any length, stayed one row at a time (docs/PERFORMANCE.md, issue 39).
bool InterleavesRowGroups(const TensorFormat& format);
// REQUIRES: InterleavesRowGroups(w.format), w.data in host memory, no input_perm.
std::vector<uint8_t> InterleaveRowGroups(const WeightMatrix& w);

class CpuMatMul {
 public:
  CpuMatMul(const CpuKernels& kernels, ThreadPool* pool);

  static bool Supports(const TensorFormat& format);

  // REQUIRES: Supports(w.format), x [m, w.cols], y [m, w.rows], w.cols a multiple of
  // InputBlockValues(w.format), except that fp8-block rows may end in a partial 128-column tile.
  void Run(const float* x, int64_t m, const WeightMatrix& w, float* y) { Run(x, m, w, 1, y); }

  // The input dimension cut into `num_chunks` equal chunks, each multiplied on its own:
  // y[c] = x[:, chunk c] * W[:, chunk c]^T, y [num_chunks, m, w.rows]. Each chunk's floats are
  // exactly what Run gives for that chunk alone (same dot calls), in one parallel pass.
  // REQUIRES: as Run, (w.cols / num_chunks) % InputBlockValues(w.format) == 0, and no w.bias
  // when num_chunks > 1.
  void Run(const float* x, int64_t m, const WeightMatrix& w, int64_t num_chunks, float* y);

  // Several matrices with the same cols against the same x, in one parallel pass over all
  // their tiles (x quantized once): outs[i].y = x * outs[i].w^T, each bit-identical to Run.
  struct Output {
    const WeightMatrix* w;
    float* y;
  };
  void RunMany(const float* x, int64_t m, absl::Span<const Output> outs);

 private:
  struct Tiling {
    int64_t rows_per_tile;   // weight rows (output columns) per task
    int64_t tokens_per_tile;  // activation rows per task
  };
  Tiling ChooseTiling(int64_t m, int64_t n) const;
  // Readies x for w's kernels: an act-order gather (then *x points at it), 8-bit blocks for
  // quantized weights, row scratch of kc floats for 16-bit ones.
  void Prepare(const WeightMatrix& w, int64_t m, int64_t kc, const float** x);
  // Rows [n0, n1) x activation rows [m0, m1) of column chunk `chunk` (kc wide) of w into y.
  void RunTile(const float* x, const WeightMatrix& w, int64_t chunk, int64_t kc, int64_t n0,
               int64_t n1, int64_t m0, int64_t m1, float* y, int thread) const;
  void QuantizeActivations(const float* x, int64_t m, int64_t k);
  // `w` may be a chunk (a column range) of the matrix whose full rows x was quantized for:
  // its activation blocks start at x_block0 in rows of x_row_blocks blocks.
  void RunQuantizedTile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0, int64_t m1,
                        float* y, int64_t x_block0, int64_t x_row_blocks) const;
  // Q4_0/1, Q5_0/1: kWeightRowGroup weight rows per dot call (CpuKernels::dot_q4_0_rows, ...).
  // Rows n0 and n1 are multiples of kWeightRowGroup or w.rows. An interleaved w is the whole
  // matrix with the chunk's cols: its first block is x_block0 (both blocks are 32 values).
  void RunRowGroupTile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0, int64_t m1,
                       float* y, int64_t x_block0, int64_t x_row_blocks) const;
  void RunInt4Tile(const WeightMatrix& w, int64_t n0, int64_t n1, int64_t m0, int64_t m1,
                   float* y, int64_t x_block0, int64_t x_row_blocks) const;
  // x rows are x_stride floats apart (w may be a column chunk of x's full width).
  void RunFp8Tile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t n0,
                  int64_t n1, int64_t m0, int64_t m1, float* y) const;
  void RunFloatTile(const float* x, int64_t x_stride, const WeightMatrix& w, int64_t n0,
                    int64_t n1, int64_t m0, int64_t m1, float* y, float* row_scratch) const;

  const CpuKernels& kernels_;
  ThreadPool* pool_;
  std::vector<Q8Block> x_q8_;                   // [m, k / 32]
  std::vector<float> x_perm_;                   // [m, k]: x in an act-order's column order
  // Per thread: one widened weight row (tiles run in const methods, each on its own).
  mutable std::vector<std::vector<float>> row_scratch_;
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_MATMUL_H_
