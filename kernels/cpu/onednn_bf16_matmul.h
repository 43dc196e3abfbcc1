// bf16 weights multiplied by oneDNN's matmul (Debian's libdnnl: AVX-512 BF16, `vdpbf16ps`): the
// library issue 39 measured on our shapes (docs/PERFORMANCE.md, "oneDNN and tinyBLAS, measured"
// and "bf16 through oneDNN in the engine"): far faster than our AVX2 kernels from 2 rows on, a
// little slower than our GEMV at one row from DRAM. The activations are rounded to bf16 (round
// to nearest even), as llama.cpp, tinyBLAS and GPU GEMMs do for bf16 weights; oneDNN sums the
// exact products in f32. Each matrix is cut into slices of rows, each reordered once (Pack)
// into the layout oneDNN picks for 8 activation rows and used for every m; each pool thread
// runs the slices it claims with oneDNN single-threaded, so no OpenMP team competes with the
// pool. Products of one to three rows (decode) run in our own loop over the packed layout
// instead, which asks for the weights ahead and sums in oneDNN's order (checked at Pack), so a
// row's floats are the same whatever m is.
//
//   TP_ASSIGN_OR_RETURN(auto packed, OneDnnBf16MatMul::Pack(w, pool.num_threads()));
//   TP_RETURN_IF_ERROR(packed->Run(x, m, y, &pool));
//
// CpuBackend uses it when asked (TPSERVE_CPU_BF16_MATMUL=onednn, kernels/cpu/cpu_backend.h).
// Threading: Run is not thread-safe (one call at a time: though const, it keeps its
// primitives, outputs and the rounded activations); Pack and Supported are.
#ifndef TPSERVE_KERNELS_CPU_ONEDNN_BF16_MATMUL_H_
#define TPSERVE_KERNELS_CPU_ONEDNN_BF16_MATMUL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace tpserve {

class OneDnnBf16MatMul {
 public:
  // Whether oneDNN runs bf16 natively on this CPU (AVX-512 BF16 or better); without it its bf16
  // matmul is emulated and slower than our own kernels.
  static bool Supported();

  // Reorders `w` (bf16, [rows, cols] row-major, rows row_bytes apart) into `num_slices` slices
  // of consecutive rows. w's bytes are not kept. INVALID_ARGUMENT for another format, an empty
  // matrix, num_slices < 1 or an act-order permutation; UNAVAILABLE when !Supported() or
  // oneDNN refuses (its message) or has only its reference implementation for the shape.
  static absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> Pack(const WeightMatrix& w,
                                                                int num_slices);
  ~OneDnnBf16MatMul();

  // The stored bytes it was packed from (w.data): a view of other rows or columns of them is
  // another matrix.
  const void* source() const { return source_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // The packed slices' bytes (oneDNN may pad a slice's layout past rows x cols x 2).
  int64_t packed_bytes() const;
  // oneDNN's name for the implementation that runs it ("brg:avx512_core_bf16").
  const std::string& implementation() const { return implementation_; }
  // Whether products of up to three rows run in our loop over the packed layout, in oneDNN's
  // order (checked bit for bit against oneDNN on every slice when packed), not in oneDNN.
  bool own_row_kernel() const;

  // y[t, 0 .. rows) = sum over c of bf16(x[t, c]) * W[r, c], for t < m: x rows of cols()
  // floats, y rows of rows() floats, both contiguous. w's bias is not added. A row's floats
  // are the same whatever m and the other rows are (batch invariance; tested). UNAVAILABLE
  // with oneDNN's message if it fails.
  absl::Status Run(const float* x, int64_t m, float* y, ThreadPool* pool) const;

 private:
  struct Slice;
  OneDnnBf16MatMul(const void* source, int64_t rows, int64_t cols);

  const void* const source_;
  const int64_t rows_;
  const int64_t cols_;
  std::vector<std::unique_ptr<Slice>> slices_;  // each keeps its primitives and outputs
  std::string implementation_;
  mutable std::vector<uint16_t> x_bf16_;  // [m, cols]: the activations rounded, for every slice
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_ONEDNN_BF16_MATMUL_H_
