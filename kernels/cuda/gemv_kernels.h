// Launchers for the memory-bound matrix-vector kernels of small batches (decode):
// y[m, n] = x[m, k] * W^T for m <= kGemvMaxRows, reading each weight byte once with 16-byte
// loads, f32 accumulation. Plain C++ (see device_types.h).
//
//   if (Fp8GemvFits(w, m, x)) TPK_LAUNCH(LaunchFp8Gemv(x, m, w, y, /*y_f32=*/false, stream));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// Most activation rows the GEMV kernels take; larger batches go to cuBLASLt.
inline constexpr int64_t kGemvMaxRows = 16;

// Whether the fp8 GEMV takes these operands: w is kFp8, kFp8PerChannel or kFp8Block128;
// 1 <= m <= kGemvMaxRows; k % 16 == 0; rows and x 16-byte aligned (x is bf16 [m, k]).
bool Fp8GemvFits(const DeviceWeight& w, int64_t m, const void* x);
// Whether the int4 GEMV takes them: kInt4Group (k % 32 == 0 by its format), rows and x
// 16-byte aligned, 1 <= m <= kGemvMaxRows.
bool Int4GemvFits(const DeviceWeight& w, int64_t m, const void* x);

// y (bf16, or f32 when y_f32) [m, w.rows] = x (bf16 [m, w.cols]) * W^T.
// REQUIRES: Fp8GemvFits / Int4GemvFits.
LaunchResult LaunchFp8Gemv(const void* x, int64_t m, const DeviceWeight& w, void* y, bool y_f32,
                           void* stream);
LaunchResult LaunchInt4Gemv(const void* x, int64_t m, const DeviceWeight& w, void* y, bool y_f32,
                            void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_
