// Where each weight value of a prepared int4 matrix lives, and the per-element arithmetic of
// the preparation: one definition for the host preparation (prepare.cc), the device one
// (prepare_kernels.cu) and the host readers the tests use. Every function is MG_HD:
// __host__ __device__ under nvcc, plain inline under g++.
//
//   const int64_t v = PreparedInt4Index(n, row, col);    // 4-bit element index
//   uint8_t nibble = (codes[v / 2] >> (4 * (v % 2))) & 0xF;
//
// Layout of the codes of W[n, k] (n % 16 == 0, k % 16 == 0), as CUTLASS's example 55 reorders
// its narrow operand (cutlass::compute_memory_reordering_atom<bfloat16_t>() tiled over the
// matrix with cute::tile_to_shape; cute_layout_test checks this formula against that layout):
//  * the matrix is cut into 16 x 16 atoms (rows x columns); atoms follow each other down the
//    rows first: atom (i, j) (rows 16i.., columns 16j..) starts at element 256 * (i + j * n/16),
//    so the 16 columns of all rows are one contiguous 2 KB-per-128-rows run and a column chunk
//    of the matrix is one contiguous block;
//  * inside an atom, the 8 values one thread of a warp feeds to the bf16 wgmma (A fragment of
//    m64nNk16: rows r, r+8 x columns 2t, 2t+1, 2t+8, 2t+9) are 8 consecutive nibbles, so the
//    thread reads them with one 32-bit shared-memory load: lane = (c / 2) % 4 + 4 * (r % 8),
//    value = c % 2 + 2 * (r / 8) + 4 * (c / 8), element = 8 * lane + value;
//  * element e sits in byte e / 2, low nibble first (CUTLASS's sub-byte order);
//  * a nibble holds the code as a two's-complement int4: code - 8 (= code XOR 8), the type
//    cutlass::int4b_t the GEMM converts exactly to f32 (NumericArrayConverter<float, int4b_t>).
// Scales and offsets are f32 [k / G][n] (the collective wants them "MN-major": n contiguous):
//   value = q * scale + offset,  q = code - 8,  offset = (8 - zero) * scale  (both f32)
// which equals (code - zero) * scale, the reference's value (README.md: numerics).
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARED_LAYOUT_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARED_LAYOUT_H_

#include <cstdint>

#if defined(__CUDACC__)
#define MG_HD __host__ __device__ __forceinline__
#else
#define MG_HD inline
#endif

namespace tpserve::cuda::mixed_gemm {

inline constexpr int64_t kAtomRows = 16;
inline constexpr int64_t kAtomCols = 16;
inline constexpr int64_t kAtomValues = kAtomRows * kAtomCols;

// 4-bit element index of W(row, col) in the prepared codes of an [n, k] matrix.
MG_HD int64_t PreparedInt4Index(int64_t n, int64_t row, int64_t col) {
  const int64_t r = row % kAtomRows;
  const int64_t c = col % kAtomCols;
  const int64_t lane = (c / 2) % 4 + 4 * (r % 8);
  const int64_t value = c % 2 + 2 * (r / 8) + 4 * (c / 8);
  const int64_t atom = row / kAtomRows + (n / kAtomRows) * (col / kAtomCols);
  return kAtomValues * atom + 8 * lane + value;
}

// The inverse: the (row, col) whose code element `index` holds.
MG_HD void PreparedInt4Position(int64_t n, int64_t index, int64_t* row, int64_t* col) {
  const int64_t atom = index / kAtomValues;
  const int64_t in_atom = index % kAtomValues;
  const int64_t lane = in_atom / 8;
  const int64_t value = in_atom % 8;
  const int64_t r = lane / 4 + 8 * ((value / 2) % 2);
  const int64_t c = 2 * (lane % 4) + value % 2 + 8 * (value / 4);
  const int64_t atoms_per_col = n / kAtomRows;
  *row = (atom % atoms_per_col) * kAtomRows + r;
  *col = (atom / atoms_per_col) * kAtomCols + c;
}

// The unsigned 4-bit code of column `col` in a row stored as the engine's int4 format (GGML
// Q4_0 nibble order per 32 columns: byte j holds column j low, column j + 16 high).
MG_HD uint32_t EngineInt4Code(const uint8_t* row_codes, int64_t col) {
  const int64_t in_chunk = col % 32;
  const uint8_t byte = row_codes[(col / 32) * 16 + in_chunk % 16];
  return in_chunk < 16 ? (byte & 0x0Fu) : (byte >> 4);
}

// The int4b_t nibble of an unsigned code: code - 8 in two's complement.
MG_HD uint32_t SignedNibble(uint32_t code) { return (code ^ 0x8u) & 0xFu; }
// Back: the unsigned code of a nibble.
MG_HD uint32_t UnsignedCode(uint32_t nibble) { return (nibble ^ 0x8u) & 0xFu; }
// The signed value a nibble holds (what the GEMM converts to f32).
MG_HD int32_t SignedValue(uint32_t nibble) {
  const int32_t v = static_cast<int32_t>(nibble & 0xFu);
  return v < 8 ? v : v - 16;
}

// The f32 offset of a group: (8 - zero) * scale, two correctly rounded f32 operations (exact
// for integer zero points: |8 - zero| <= 8 has 4 bits, an f16 scale 11). Kept as two
// statements so no compiler fuses them differently on host and device.
MG_HD float Int4Offset(float zero, float scale) {
  const float shifted = 8.0f - zero;
  return shifted * scale;
}

}  // namespace tpserve::cuda::mixed_gemm

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARED_LAYOUT_H_
