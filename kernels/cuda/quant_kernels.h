// Launchers for the conversions around the cuBLASLt GEMMs of quantized weights: activation rows
// to e4m3 with a scale per row or per 1x128 group (the GEMM applies the scales itself), fp8
// weight decode to bf16 (the fallback for shapes the fast paths refuse), the act-order column
// gather, and an f32 fill. Plain C++ (see device_types.h).
//
//   TPK_LAUNCH(LaunchQuantizeRowsFp8(x, m, k, ub, x8, x_scales, stream));
//
// Both quantizers use one rule per scale group (a row, or 128 columns of a row):
//   a = max |x| over the group, clamped to scale_ub when scale_ub > 0;
//   s = a / 448 (1 when a == 0);  q = e4m3(x / s), round to nearest even, saturating;
// so x ~= q * s, and the GEMM multiplies the scales back in.
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// bf16 x [m, k] -> e4m3 out [m, k], scales f32 [m] (one per row).
LaunchResult LaunchQuantizeRowsFp8(const void* x, int64_t m, int64_t k, float scale_ub,
                                   uint8_t* out, float* scales, void* stream);

// bf16 x [m, k] -> e4m3 out [m, k], scales f32 [ceil(k / 128)][m]: the scale of row t's
// columns [128 g, 128 g + 128) at scales[g * m + t] (token index contiguous, the layout
// cuBLASLt's VEC128_32F mode reads for the B operand; cublas_gemm.cc).
LaunchResult LaunchQuantizeGroupsFp8(const void* x, int64_t m, int64_t k, float scale_ub,
                                     uint8_t* out, float* scales, void* stream);

// out[r, c] = bf16(WeightAt(w, r, c)): the whole matrix decoded into a dense bf16 [rows, cols].
// fp8 kinds (and the float types); cudaErrorInvalidValue for int4, which is never decoded.
LaunchResult LaunchDequantizeToBf16(const DeviceWeight& w, void* out, void* stream);

// out[t, j] = x[t, perm[j]] for bf16 x, out [m, k].
LaunchResult LaunchGatherColumns(const void* x, int64_t m, int64_t k, const int32_t* perm,
                                 void* out, void* stream);

// out[i] = value for i < count (f32).
LaunchResult LaunchFillF32(float* out, int64_t count, float value, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_
