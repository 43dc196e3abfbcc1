// How the CUDA backend holds a weight matrix (its Backend::PlaceWeight): as stored, or prepared
// for the mixed-input GEMM (mixed_gemm/README.md) — int4 codes re-laid out with f32 scales and
// offsets INSTEAD of the stored codes and f16 scales and zeros; fp8 codes as stored with f32
// scales per (128 columns, row) BESIDE them. One decision (CudaWeightFormFor) and one byte count
// (CudaWeightExtraBytes) that the placement and the memory plan (planner/sharding_table.cc)
// both read, so what a GPU rank holds and what its plan counts cannot drift apart. Plain C++:
// the placement allocates and copies through the Backend interface only, so host tests run it
// on the CPU backend (weight_placement_test.cc).
//
//   TP_ASSIGN_OR_RETURN(PlacedWeight w, PlaceCudaWeight(backend, host, WeightUse::kMatMul, 90,
//                                                       "blk.0.attn_q"));
//   if (const MixedGemmWeight* p = MixedGemmForm(w.matrix)) { ...RunMixedGemm(*p, ...)... }
//
// Thread-safe: pure functions; PlaceCudaWeight uses `backend` as its threading contract allows.
#ifndef TPSERVE_KERNELS_CUDA_WEIGHT_PLACEMENT_H_
#define TPSERVE_KERNELS_CUDA_WEIGHT_PLACEMENT_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "formats/tensor_format.h"
#include "kernels/backend.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

enum class CudaWeightForm : uint8_t {
  kStored,     // as stored (PlaceStoredWeight)
  kInt4Mixed,  // int4 in the mixed GEMM's layout, replacing the stored form on the device
  kFp8Mixed,   // fp8 codes and scales as stored, plus the mixed GEMM's f32 scales
};

// The mixed GEMM's kernels are sm_90a SASS (wgmma, TMA): compute capability 9.0 only
// (major * 10 + minor == 90). Elsewhere (a B200's 10.0) weights stay as stored.
bool MixedGemmRunsOn(int compute_capability);

// How the CUDA backend fuses column-parallel projections (Backend::projection_fusion): every
// MatMulMany given a fused matrix runs one GEMM over it and one split kernel into the outputs;
// parts must be whole 16-row tiles, so that a stack takes the mixed GEMM's form exactly when its
// parts would (CudaWeightFormFor depends on rows only through rows % 16) and CudaWeightExtraBytes
// of the stack is the parts' sum (it is linear in rows): the memory plan's per-role bytes hold.
// Plain C++, so the planner and host tests read the same traits.
Backend::ProjectionFusion CudaProjectionFusion();

// kStored unless `use` is kMatMul or kFused (an EmbeddingRows table keeps the form its kernel
// reads), the device runs the mixed GEMM, and MixedGemmTakesWeight(format, rows, cols) (int4
// groups that are whole 64-column K tiles, fp8 with k % 128 == 0; rows % 16 == 0).
CudaWeightForm CudaWeightFormFor(const TensorFormat& format, int64_t rows, int64_t cols,
                                 WeightUse use, int compute_capability);

// Device bytes the CUDA backend holds for a [rows, cols] matrix of `format` beyond its stored
// form (MatrixBytes): PreparedBytes of the mixed GEMM minus the stored arrays it replaces.
// int4 group G: 4 * rows * cols / G (f32 scale and offset, 8 bytes per group and row, for the
// f16 scale and zero, 4); fp8: rows * cols / 32; stored form: 0.
int64_t CudaWeightExtraBytes(const TensorFormat& format, int64_t rows, int64_t cols,
                             WeightUse use, int compute_capability);

// The mixed GEMM's form of `w` when PlaceCudaWeight prepared it (w.prepared); nullptr for a
// matrix in its stored form. REQUIRES: `w` was placed by the CUDA backend (or is stored).
const MixedGemmWeight* MixedGemmForm(const WeightMatrix& w);

// The CUDA backend's PlaceWeight. kStored: PlaceStoredWeight. kInt4Mixed: PrepareInt4 on the
// host, then the codes, scales and offsets uploaded (PreparedBytes' sizes) and the permutation
// as stored; matrix.data, .scales and .zeros are nullptr (nothing may read the stored form:
// the GEMV, ColumnChunk and EmbeddingRows refuse such a matrix). kFp8Mixed: the stored form,
// plus PrepareFp8Scales uploaded. `prepared` owns the MixedGemmWeight matrix.prepared points
// at; `buffers` own its device memory. Errors: Upload's (RESOURCE_EXHAUSTED naming `what`).
// REQUIRES: CudaMatMulSupports(host.matrix.format).
absl::StatusOr<PlacedWeight> PlaceCudaWeight(Backend& backend, const HostMatrix& host,
                                             WeightUse use, int compute_capability,
                                             std::string_view what);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_WEIGHT_PLACEMENT_H_
