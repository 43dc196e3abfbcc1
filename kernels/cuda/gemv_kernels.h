// Launchers for the memory-bound matrix-vector kernels of small batches (decode):
// y[m, n] = x[m, k] * W^T for m <= kGemvMaxRows, reading each weight byte once with 16-byte
// loads, f32 accumulation. Only for the fp8 and int4 weights CUTLASS's mixed-input GEMM does not
// take (int4 group 32, n % 16 != 0, fp8 k % 128 != 0: README.md); the rest run on that GEMM.
// Plain C++ (see device_types.h).
//
//   if (Fp8GemvFits(w, m, x)) TPK_LAUNCH(LaunchFp8Gemv(x, m, w, 1, y, /*y_f32=*/false, stream));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// Most activation rows the GEMV kernels take; larger batches go to a GEMM or, where none takes
// the weight (int4 gaps, deterministic mode), through the GEMV 16 rows at a time.
inline constexpr int64_t kGemvMaxRows = 16;

// Whether the fp8 GEMV takes these operands: w is kFp8, kFp8PerChannel or kFp8Block128;
// 1 <= m <= kGemvMaxRows; k % 16 == 0; rows and x 16-byte aligned (x is bf16 [m, k]); and
// `num_chunks` equal chunks of whole 16-column steps (128-column tiles for kFp8Block128).
bool Fp8GemvFits(const DeviceWeight& w, int64_t m, const void* x, int64_t num_chunks = 1);
// Whether the int4 GEMV takes them: kInt4Group (k % 32 == 0 by its format), rows and x
// 16-byte aligned, 1 <= m <= kGemvMaxRows, chunks of whole groups.
bool Int4GemvFits(const DeviceWeight& w, int64_t m, const void* x, int64_t num_chunks = 1);

// y (bf16, or f32 when y_f32) [num_chunks, m, w.rows]: chunk c = x[:, chunk c] * W[:, chunk c]^T
// for x bf16 [m, w.cols], each chunk's floats exactly those of a call with that chunk alone
// (num_chunks 1: the plain product, plus w.bias where it has one: the f32 sum plus the bias,
// rounded once). REQUIRES: Fp8GemvFits / Int4GemvFits (which refuse a bias with chunks).
LaunchResult LaunchFp8Gemv(const void* x, int64_t m, const DeviceWeight& w, int64_t num_chunks,
                           void* y, bool y_f32, void* stream);
LaunchResult LaunchInt4Gemv(const void* x, int64_t m, const DeviceWeight& w, int64_t num_chunks,
                            void* y, bool y_f32, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_GEMV_KERNELS_H_
