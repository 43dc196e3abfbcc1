// The CUDA backend's matrix multiply, y[m, n] = x[m, k] * W^T with bf16 x, by weight format and
// batch size:
//   bf16 / f16 / f32 W         cuBLASLt (x converted to f16 or f32 first for those weights)
//   fp8 (plain, per channel)   m <= 16: fp8 GEMV; else x quantized to e4m3 per row, cuBLASLt
//                              fp8 GEMM into f32, per-row x scale and per-channel W scale after
//   fp8 128x128 tiles          m <= 16: fp8 GEMV with tile scales; else W decoded to bf16 + GEMM
//   int4 groups                m <= 16: W4A16 GEMV; else W decoded to bf16 + GEMM
// Shapes the fast paths do not take (unaligned rows, k % 16 != 0) fall back to decoding W to
// bf16. An act-order permutation gathers x's columns first. Plain C++ header.
//
//   CudaMatMul mm(std::move(gemm));
//   TP_RETURN_IF_ERROR(mm.Run(x, m, w, y, DType::kBF16, stream));
//
// Threading: not thread-safe (owns scratch); one call at a time, in stream order.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
#define TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "formats/dtype.h"
#include "kernels/cuda/cublas_gemm.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/device_types.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

// The formats Run accepts: f32, f16, bf16, plain fp8, fp8 per channel, fp8 128x128 tiles, and
// int4 groups whose size is a positive multiple of 32. (No GGML block types.)
bool CudaMatMulSupports(const TensorFormat& format);

// `w` as the kernels see it. REQUIRES: CudaMatMulSupports(w.format).
DeviceWeight ToDeviceWeight(const WeightMatrix& w);

class CudaMatMul {
 public:
  // `scratch_generation` (may be null) counts moves of this object's scratch buffers.
  CudaMatMul(std::unique_ptr<CublasLtGemm> gemm, int64_t* scratch_generation);

  // y (y_dtype: kBF16 or kF32) [m, w.rows] = x (bf16 [m, w.cols]) * W^T, queued on `stream`.
  absl::Status Run(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype,
                   void* stream);

  // y f32 [num_chunks, m, w.rows]: chunk c multiplies x[:, chunk c] by W[:, chunk c] exactly
  // as Run does for that chunk alone (its columns copied into a dense x first).
  absl::Status RunChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                          float* y, void* stream);

 private:
  absl::Status Gemm(GemmType type, const void* w, int64_t ldw, const void* x, int64_t m,
                    int64_t n, int64_t k, void* y, bool y_f32, void* stream);
  absl::Status Fp8Gemm(const void* x, int64_t m, const WeightMatrix& w, void* y, bool y_f32,
                       void* stream);
  absl::Status DecodedGemm(const void* x, int64_t m, const WeightMatrix& w, void* y, bool y_f32,
                           void* stream);

  std::unique_ptr<CublasLtGemm> gemm_;
  bool fp8_gemm_works_ = true;  // false once cuBLASLt had no fp8 algorithm (then bf16 GEMMs)
  DeviceScratch x_perm_;
  DeviceScratch x_chunk_;
  DeviceScratch y_chunk_;
  DeviceScratch x_wide_;
  DeviceScratch x_fp8_;
  DeviceScratch x_scales_;
  DeviceScratch out_f32_;
  DeviceScratch w_bf16_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUDA_MATMUL_H_
