// The CUDA backend's matrix multiply, y[m, n] = x[m, k] * W^T (+ w.bias) with bf16 x. The
// kernels are chosen by ChooseMatMulPath (matmul_plan.h, with the rules and README.md with the table):
//   bf16 / f16 / f32 W         cuBLASLt (x converted to f16 or f32 first for those weights)
//   int4 groups                prepared (weight_placement.h): CUTLASS's mixed-input GEMM at
//                              every m; the rest (group 32, n % 16 != 0): the W4A16 GEMV, on
//                              16-row slices above m = 16
//   fp8 (plain, per channel)   m <= 16: the mixed GEMM when prepared, else the fp8 GEMV; larger
//                              batches: x -> e4m3 per row and a cuBLASLt fp8 GEMM with the row
//                              and channel scales inside it, D in y's type
//   fp8 128x128 tiles          the same, x -> e4m3 per 1x128 group and 1x128 x 128x128 scales
// Decode-sized batches never quantize activations (an unaligned x is copied, an unaligned fp8
// W decoded); fp8 shapes cuBLASLt refuses decode W to bf16 (found at load by CheckWeight and
// said there once per weight role, or refused with strict_kernels); int4 is never decoded.
// Deterministic mode: one path per format for every m (the mixed GEMM's batch-invariant
// plan, or the GEMV on 16-row slices) and pinned GEMM algorithms without split-K, so a row's
// floats depend neither on the batch nor on the tensor-parallel slice (a GEMM the pinned
// algorithm cannot take is refused by CheckWeight, at load). An act-order permutation gathers
// x's columns first. A bias (Qwen2's q/k/v) is added where the
// kernel writes y on the cuBLASLt and GEMV paths (CUBLASLT_EPILOGUE_BIAS, the GEMVs' store),
// to the f32 sums before the rounding. The fp8 GEMMs and the mixed GEMM write f32 sums to
// scratch instead and one pass adds the bias and rounds (cuBLASLt's fp8 kernels take a bf16
// bias only; the mixed GEMM's epilogue has no bias operand: README.md says why), as does a
// GEMM whose epilogue cuBLASLt refuses (said once on stderr). Plain C++.
//
//   CudaMatMul mm(std::move(gemm), &generation,
//                 {.deterministic = false, .abort = &flag, .sm_count = 132});
//   TP_RETURN_IF_ERROR(mm.Run(x, m, w, y, DType::kBF16, stream));
//
// Threading: not thread-safe (owns scratch); one call at a time, in stream order.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
#define TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/dtype.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/device_weight.h"
#include "kernels/cuda/matmul_plan.h"
#include "kernels/cuda/matmul_plan_load.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

struct CudaMatMulOptions {
  // Batch- and tensor-parallel-invariant floats (see above). REQUIRES: the CublasLtGemm was
  // created deterministic too (the constructor checks).
  bool deterministic = false;
  // The owner's abort flag: ends a scratch growth's wait for the stream (device_scratch.h).
  const std::atomic<bool>* abort = nullptr;
  // The device's SMs: the mixed GEMM's split-K plan (PlanMixedGemm). REQUIRES: >= 1.
  int sm_count = 0;
  // --strict_kernels: a weight some batch would multiply by decoding it to bf16
  // (kDecodedGemm) is refused by CheckWeight, and a step that would still decode fails
  // instead (FAILED_PRECONDITION naming the shape and the reason).
  bool strict_kernels = false;
  // Most rows of one step: the batch sizes CheckWeight plans (MatMulLoadRows; 0: its default).
  int64_t max_tokens_per_step = 0;
};

class CudaMatMul {
 public:
  // `scratch_generation` (may be null) counts moves of this object's scratch buffers.
  CudaMatMul(std::unique_ptr<CublasLtGemm> gemm, int64_t* scratch_generation,
             CudaMatMulOptions options = {});

  // y (y_dtype: kBF16 or kF32) [m, w.rows] = x (bf16 [m, w.cols]) * W^T, queued on `stream`.
  absl::Status Run(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype,
                   void* stream);

  // y f32 [num_chunks, m, w.rows]: chunk c multiplies x[:, chunk c] by W[:, chunk c] exactly
  // as Run does for that chunk alone (its columns copied into a dense x first, its columns of
  // W placed as a weight of their own).
  absl::Status RunChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                          float* y, void* stream);

  // At load, once per placed weight (the backend's PlaceWeight; `what`: the loader's name of
  // it): every batch size of options.max_tokens_per_step planned as Run plans it, cuBLASLt asked
  // up front (CheckMatMulAtLoad, matmul_plan_load.h). A refused fp8 GEMM is remembered (Run
  // decodes at once); each decode-to-bf16 fallback is said on stderr once per (role, reason).
  // FAILED_PRECONDITION naming the role, shape and reason under strict_kernels, and in
  // deterministic mode for a GEMM the pinned algorithm cannot take (naming M, N, K).
  absl::Status CheckWeight(const WeightMatrix& w, std::string_view what);

  // Bytes of weight decoded to bf16 by kDecodedGemm since this object was made
  // (MatMulDecodedBytes per call): the cost of the fallbacks CheckWeight reported.
  int64_t decoded_weight_bytes() const { return decoded_weight_bytes_; }

  bool deterministic() const { return options_.deterministic; }

 private:
  absl::Status RunPlan(const MatMulPlan& plan, const void* x, int64_t m, const WeightMatrix& w,
                       void* y, bool y_f32, void* stream);
  absl::Status Gemm(GemmType type, const void* w, int64_t ldw, const void* x, int64_t m, int64_t n,
                    int64_t k, const float* bias, void* y, bool y_f32, void* stream);
  // The product without w's bias into f32 scratch by `plan`, then the bias and the rounding
  // in one pass (LaunchBiasRound): the paths whose kernels cannot add it.
  absl::Status RunPlanThenBias(const MatMulPlan& plan, const void* x, int64_t m,
                               const WeightMatrix& w, void* y, bool y_f32, void* stream);
  // cuda_matmul_fp8.cc: the scaled fp8 GEMMs; UNIMPLEMENTED when cuBLASLt has no algorithm.
  absl::Status Fp8RowScaledGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                bool y_f32, void* stream);
  absl::Status Fp8BlockScaledGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                  bool y_f32, void* stream);
  // fp8 only: W decoded to bf16 scratch, then a bf16 GEMM.
  absl::Status DecodedGemm(const void* x, int64_t m, const WeightMatrix& w, void* y, bool y_f32,
                           void* stream);
  // cuda_matmul_mixed.cc: the mixed-input GEMM over `num_chunks` chunks of `chunk.k` columns
  // (`chunk`: chunk 0 of the prepared weight); x rows x_row_elems apart; y [num_chunks, m, n].
  absl::Status MixedGemm(const TensorFormat& format, const void* x, int64_t x_row_elems,
                         int64_t m, const MixedGemmWeight& chunk, int64_t num_chunks, void* y,
                         bool y_f32, void* stream);
  // kGemv / kGemvRowSlices over `num_chunks` chunks; y [num_chunks, m, n].
  absl::Status Gemv(const MatMulPlan& plan, const void* x, int64_t m, const DeviceWeight& w,
                    int64_t num_chunks, void* y, bool y_f32, void* stream);
  // x copied into 16-byte-aligned scratch.
  absl::StatusOr<const void*> StageX(const void* x, int64_t bytes, void* stream);
  OperandFacts FactsFor(const void* x, const WeightMatrix& w) const;

  std::unique_ptr<CublasLtGemm> gemm_;
  const CudaMatMulOptions options_;
  // fp8 GEMMs cuBLASLt refused (format kind, n, k, y_f32): those go to the bf16 fallback at
  // once instead of quantizing x first. The first refusal is reported on stderr.
  std::set<std::tuple<int, int64_t, int64_t, bool>> fp8_refused_;
  // GEMMs (type, out) whose bias epilogue cuBLASLt refused: their bias takes the extra pass.
  std::set<std::pair<int, int>> bias_refused_;
  // CheckWeight: the batch sizes it plans, its reports per weight shape (format kind, group,
  // n, k, row_bytes, w_aligned, w_prepared; the layers of a role share one), what it said.
  std::vector<int64_t> load_rows_;
  std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool, bool>, MatMulLoadReport>
      load_checks_;
  FallbackLog fallback_log_;
  int64_t decoded_weight_bytes_ = 0;
  DeviceScratch x_perm_;
  DeviceScratch x_staged_;
  DeviceScratch x_chunk_;
  DeviceScratch y_chunk_;
  DeviceScratch y_staged_;
  DeviceScratch x_wide_;
  DeviceScratch x_fp8_;
  DeviceScratch x_scales_;
  DeviceScratch w_scales_;  // ones for unscaled fp8, or 128x128 scales made dense
  DeviceScratch out_f32_;
  DeviceScratch bias_sums_;  // f32 products awaiting their bias (RunPlanThenBias, Gemm)
  DeviceScratch w_bf16_;
  DeviceScratch mixed_workspace_;  // the mixed GEMM's split-K partial sums and flags
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
