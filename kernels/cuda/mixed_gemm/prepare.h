// Load-time preparation of weights for the mixed-input GEMM (mixed_gemm.h), on the host: pure
// functions from a WeightMatrix in host memory to the buffers RunMixedGemm reads once they are
// uploaded, and readers that take a prepared weight back to the checkpoint's values (the
// round-trip tests). prepare_kernels.h does the same on the device for a weight that is
// already there, element for element (both use prepared_layout.h).
//
//   PreparedInt4 p = PrepareInt4(host_matrix);      // int4: codes, scales, offsets
//   std::vector<float> s = PrepareFp8Scales(fp8);   // fp8: the f32 scale per 128 columns
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_H_

#include <cstdint>
#include <vector>

#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

// A prepared int4 weight in host memory (layouts: prepared_layout.h).
struct PreparedInt4 {
  std::vector<uint8_t> codes;  // n * k / 2 bytes, reordered atoms of signed nibbles
  std::vector<float> scales;   // [k / G][n]: the f16 scale, exactly
  std::vector<float> offsets;  // [k / G][n]: (8 - zero) * scale in f32
  int64_t n = 0;
  int64_t k = 0;
  int64_t group_size = 0;

  // The weight as RunMixedGemm takes it, pointing at these (host) vectors; the device copy is
  // the same with the three pointers replaced.
  MixedGemmWeight View() const;
};

// `w` (host memory, kInt4Group, in stored column order: an act-order permutation stays the
// caller's, applied to x) prepared. REQUIRES: MixedGemmTakesWeight(w.format, w.rows, w.cols).
PreparedInt4 PrepareInt4(const WeightMatrix& w);

// The f32 scale of every (128-column group, row) of an fp8 weight (host memory), [k/128][n]:
// plain e4m3 1, per channel s[row], 128x128 tiles s[row / 128][group]. The codes are used as
// they are. REQUIRES: MixedGemmTakesWeight(w.format, w.rows, w.cols).
std::vector<float> PrepareFp8Scales(const WeightMatrix& w);

// The fp8 weight as RunMixedGemm takes it: w's codes and rows, `scales` from PrepareFp8Scales
// (in the same memory as w's codes).
MixedGemmWeight Fp8MixedGemmWeight(const WeightMatrix& w, const float* scales);

// The unsigned code (0..15) of W(row, col) in a prepared int4 weight in host memory: the
// reader that takes the prepared bytes back to the checkpoint's (the round-trip test). The
// group's scale and offset are read directly: scales[g * n + row], offsets[g * n + row].
uint32_t PreparedInt4Code(const MixedGemmWeight& w, int64_t row, int64_t col);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_H_
