// The CUDA backend's matrix multiply, y[m, n] = x[m, k] * W^T with bf16 x. The kernels are
// chosen by ChooseMatMulPath (matmul_plan.h, with the rules and README.md with the table):
//   bf16 / f16 / f32 W         cuBLASLt (x converted to f16 or f32 first for those weights)
//   fp8 (plain, per channel)   m <= 16: fp8 GEMV; else x -> e4m3 per row and a cuBLASLt fp8
//                              GEMM with the row and channel scales inside it, D in y's type
//   fp8 128x128 tiles          m <= 16: fp8 GEMV; else x -> e4m3 per 1x128 group and a cuBLASLt
//                              fp8 GEMM with 1x128 x 128x128 scales inside it
//   int4 groups                m <= 16: W4A16 GEMV; else W decoded to bf16 + GEMM
// Decode-sized batches never quantize activations (an unaligned x is copied, an unaligned W
// decoded); shapes cuBLASLt refuses decode W to bf16 (said once on stderr). Deterministic
// mode: one path per format for every m (fp8 / int4 through the GEMV on 16-row slices) and
// pinned GEMM algorithms without split-K, so a row's floats depend neither on the batch nor
// on the tensor-parallel slice. An act-order permutation gathers x's columns first. Plain C++.
//
//   CudaMatMul mm(std::move(gemm), &generation, {.deterministic = false, .abort = &flag});
//   TP_RETURN_IF_ERROR(mm.Run(x, m, w, y, DType::kBF16, stream));
//
// Threading: not thread-safe (owns scratch); one call at a time, in stream order.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
#define TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/dtype.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/device_types.h"
#include "kernels/cuda/device_weight.h"
#include "kernels/cuda/matmul_plan.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

struct CudaMatMulOptions {
  // Batch- and tensor-parallel-invariant floats (see above). REQUIRES: the CublasLtGemm was
  // created deterministic too (the constructor checks).
  bool deterministic = false;
  // The owner's abort flag: ends a scratch growth's wait for the stream (device_scratch.h).
  const std::atomic<bool>* abort = nullptr;
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
  // as Run does for that chunk alone (its columns copied into a dense x first).
  absl::Status RunChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                          float* y, void* stream);

  bool deterministic() const { return options_.deterministic; }

 private:
  absl::Status RunPlan(const MatMulPlan& plan, const void* x, int64_t m, const WeightMatrix& w,
                       void* y, bool y_f32, void* stream);
  absl::Status Gemm(GemmType type, const void* w, int64_t ldw, const void* x, int64_t m, int64_t n,
                    int64_t k, void* y, bool y_f32, void* stream);
  // cuda_matmul_fp8.cc: the scaled fp8 GEMMs; UNIMPLEMENTED when cuBLASLt has no algorithm.
  absl::Status Fp8RowScaledGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                bool y_f32, void* stream);
  absl::Status Fp8BlockScaledGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                  bool y_f32, void* stream);
  absl::Status DecodedGemm(const void* x, int64_t m, const WeightMatrix& w, void* y, bool y_f32,
                           void* stream);
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
  DeviceScratch w_bf16_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
