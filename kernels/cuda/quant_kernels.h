// Launchers for the conversions around the cuBLASLt GEMMs of quantized weights: activation rows
// to e4m3 with a per-row scale, the scale epilogue after an fp8 GEMM, weight decode to bf16
// (fp8 tiles, int4 groups and any other DeviceWeight), and the act-order column gather. Plain
// C++ (see device_types.h).
//
//   TPK_LAUNCH(LaunchQuantizeRowsFp8(x, m, k, m_pad, ub, x8, x_scales, stream));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// For rows t < m of bf16 x [m, k]: a = max|x[t, :]|, clamped to scale_ub when scale_ub > 0;
// scales[t] = a / 448 (1 when a == 0); out[t, c] = e4m3(x[t, c] / scales[t]) (saturating).
// Rows m <= t < m_pad are written as zeros with scale 1 (padding for the GEMM's tile sizes).
LaunchResult LaunchQuantizeRowsFp8(const void* x, int64_t m, int64_t k, int64_t m_pad,
                                   float scale_ub, uint8_t* out, float* scales, void* stream);

// y[t, j] = d[t, j] * row_scales[t] * col_scales[j] (col_scales nullptr: 1) for t < m, j < n;
// d f32 [m, n]; y bf16 or (y_f32) f32 [m, n], which may be d itself.
LaunchResult LaunchScaleRowsCols(const float* d, const float* row_scales, const float* col_scales,
                                 int64_t m, int64_t n, void* y, bool y_f32, void* stream);

// out[r, c] = bf16(WeightAt(w, r, c)): the whole matrix decoded into a dense bf16 [rows, cols].
LaunchResult LaunchDequantizeToBf16(const DeviceWeight& w, void* out, void* stream);

// out[t, j] = x[t, perm[j]] for bf16 x, out [m, k].
LaunchResult LaunchGatherColumns(const void* x, int64_t m, int64_t k, const int32_t* perm,
                                 void* out, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_QUANT_KERNELS_H_
