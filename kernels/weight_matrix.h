// A weight matrix as one rank holds it (values plus the scales, zero points and permutation of
// its format), and the host-side reference for reading it back: the definition every backend's
// matmul is checked against.
//
//   WeightMatrix w = ...;                       // from the loader, or a test
//   std::vector<float> row(w.cols);
//   DequantizeWeightRow(w, 3, row.data());     // host memory only
//
// Thread-safe: a plain value type and pure functions.
#ifndef TPSERVE_KERNELS_WEIGHT_MATRIX_H_
#define TPSERVE_KERNELS_WEIGHT_MATRIX_H_

#include <cstdint>
#include <vector>

#include "formats/tensor_format.h"

namespace tpserve {

// W[rows, cols]. A linear layer computes y = x * W^T, so rows = out_features (n) and
// cols = in_features (k). `format` says how values are stored:
//   f32 / f16 / bf16 / fp8-e4m3   rows of cols elements
//   fp8 (per-channel)             e4m3 rows; scales: f32 [rows]             value = code * s[r]
//   fp8-block (128x128 tiles)     e4m3 rows; scales: f32 [ceil(rows/128)][scale_stride]
//                                 value = code * s[r / 128][c / 128]
//   int4-g<G>                     4-bit codes, two a byte, in GGML Q4_0 nibble order inside
//                                 each 32 columns (byte j of a 32-column chunk holds column j in
//                                 its low nibble, column j + 16 in its high one);
//                                 scales, zeros: f16 [rows][scale_stride]
//                                 value = (code - zero[r][c / G]) * scale[r][c / G]
//   q8_0 / q4_0 / q4_1 / q*_k     self-contained GGML blocks along cols
// Consecutive rows start `row_bytes` apart. `data`, `scales`, `zeros` and `input_perm` are
// backend memory (host memory for the CPU backend).
//
// `prepared`: a backend's own form of the matrix, made by its Backend::PlaceWeight
// (kernels/backend.h) and read by that backend only (the CUDA backend: the mixed-input GEMM's
// layout, kernels/cuda/weight_placement.h; the CPU backend: Q8_0, Q4_0/1, Q5_0/1 rows interleaved
// in groups of 8, kernels/cpu/cpu_matmul.h, and oneDNN's bf16 packing beside the stored form). Where the own form replaces the stored one, `data`,
// `scales` and `zeros` are nullptr and the shape, format and `input_perm` stay: such a matrix is
// multiplied by the backend that placed it and read by nothing else (ColumnChunk refuses it).
struct WeightMatrix {
  TensorFormat format = TensorFormat::Of(FormatKind::kF32);
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_bytes = 0;
  const void* scales = nullptr;
  const void* zeros = nullptr;
  int64_t scale_stride = 0;  // entries from one row (fp8-block: one tile row) of scales to the next
  // int4 act-order (GPTQ desc_act): stored column j multiplies x[input_perm[j]]; nullptr when
  // the columns are in input order.
  const int32_t* input_perm = nullptr;
  // fp8 checkpoints: upper bound for a dynamic per-token activation scale (0 = none). Backends
  // that quantize activations to fp8 clamp their scale to it; the others ignore it.
  float activation_scale_ub = 0.0f;
  // The placing backend's own form (above); nullptr for a matrix in its stored form only.
  const void* prepared = nullptr;
  // f32 [rows] added to every output row (y = x * W^T + bias, Qwen2's q/k/v), in backend
  // memory; nullptr for none. A backend adds it where its kernel writes y, before the one
  // rounding to y's type. Not part of the stored form (the loader sets it after placing).
  const float* bias = nullptr;
};

// A WeightMatrix in host memory together with the bytes it owns (empty vectors where it views
// bytes owned elsewhere, e.g. an mmapped checkpoint). Moving it keeps `matrix` valid: vector
// moves keep their heap buffers.
struct HostMatrix {
  WeightMatrix matrix;
  std::vector<uint8_t> values;
  std::vector<uint8_t> scales;
  std::vector<uint8_t> zeros;
  std::vector<int32_t> perm;

  // True when the values are not owned here (a view into the checkpoint).
  bool is_view() const { return values.empty() && matrix.rows > 0; }
};

// Bytes of the packed values of one row of `cols` elements (no scales); -1 when `cols` does not
// fit the format (not a whole number of blocks, odd for int4).
int64_t PackedRowBytes(const TensorFormat& format, int64_t cols);

// Bytes of each array of `w`'s stored form, counted from its shape, format and scale_stride:
// what a backend copies when it places the matrix as stored.
struct WeightMatrixParts {
  int64_t values = 0;  // rows * row_bytes
  int64_t scales = 0;  // fp8 per channel: rows f32; fp8-block: ceil(rows/128) tile rows of
                       // scale_stride f32; int4: rows * scale_stride f16
  int64_t zeros = 0;   // int4: rows * scale_stride f16
  int64_t perm = 0;    // int4 act-order: cols int32 (when input_perm is set)
  int64_t total() const { return values + scales + zeros + perm; }
};
WeightMatrixParts WeightMatrixPartBytes(const WeightMatrix& w);

// Bytes of `w`'s stored form: WeightMatrixPartBytes(w).total(). (A placed matrix's real bytes
// are PlacedWeight's counts, kernels/backend.h: a backend's own form may differ.)
int64_t WeightMatrixBytes(const WeightMatrix& w);

// The part of `w` that multiplies input columns [c * kc, (c + 1) * kc): its values and the
// scales and zero points of those columns (per-row scales are shared by every chunk), the
// act-order permutation dropped (a chunked matmul gathers x once for the whole width).
// REQUIRES: kc a multiple of InputBlockValues(w.format), (c + 1) * kc <= w.cols,
// w.prepared == nullptr (a backend chunks its own form itself), w.bias == nullptr (a bias is
// added once to the whole sum, never to a chunk of it).
WeightMatrix ColumnChunk(const WeightMatrix& w, int64_t c, int64_t kc);

// ColumnChunk(w, c, kc) of a host matrix as a matrix of its own that owns its bytes: the
// chunk's values, the scales and zero points of its columns (per-row scales copied whole), no
// permutation. What "that chunk alone" is when a chunk must be placed as a weight of its own
// (the chunked-matmul equality tests). REQUIRES: as ColumnChunk; `w` in host memory.
HostMatrix CopyColumnChunk(const WeightMatrix& w, int64_t c, int64_t kc);

// Decodes row `row` of `w` (host memory) into out[w.cols] f32, in stored column order (an
// input_perm is not applied). The reference for every backend's matmul.
void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_WEIGHT_MATRIX_H_
