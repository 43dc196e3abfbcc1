// Launchers for the CUDA backend's row-wise and element-wise kernels on bf16 activations:
// RMSNorm, RoPE, SwiGLU and GeGLU, add, bias rows, scaling, the f32 logit soft-cap, the ordered
// chunk sum, embedding rows and row gathers, and the
// conversions the cuBLASLt paths need. Plain C++ (see device_types.h); every launcher queues
// its kernel on `stream` (a cudaStream_t) and returns cudaGetLastError() after the launch.
// Counts of zero launch nothing.
//
//   TPK_LAUNCH(LaunchRmsNorm(x, w, rows, dim, eps, y, stream));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w; x, y bf16 [rows, dim] (y may be x),
// w f32 [dim]; sum of squares in f32.
LaunchResult LaunchRmsNorm(const void* x, const float* w, int64_t rows, int64_t dim, float eps,
                           void* y, void* stream);

// Rotates bf16 x[rows, heads, head_dim] in place by angle positions[r] * inv_freq[i] (the angle
// and its sine and cosine in f64, as the CPU backend). interleaved: pairs (2i, 2i+1), else
// (i, i + head_dim / 2). REQUIRES: head_dim even.
LaunchResult LaunchRope(void* x, int64_t rows, int64_t heads, int64_t head_dim,
                        const int32_t* positions, const float* inv_freq, bool interleaved,
                        void* stream);

// The same rotation over the rope_dim values at `offset` of each head of bf16
// x[rows, heads, head_stride] (Backend::RopePart: an MLA head's rope part); inv_freq has
// rope_dim / 2 entries. REQUIRES: rope_dim even, offset + rope_dim <= head_stride.
LaunchResult LaunchRopePart(void* x, int64_t rows, int64_t heads, int64_t head_stride,
                            int64_t offset, int64_t rope_dim, const int32_t* positions,
                            const float* inv_freq, bool interleaved, void* stream);

// out[i] = silu(gate[i]) * up[i] (bf16, f32 math); out may alias gate or up.
LaunchResult LaunchSiluMul(const void* gate, const void* up, int64_t count, void* out,
                           void* stream);

// out[i] = gelu_tanh(gate[i]) * up[i] = g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))) * up[i]
// (bf16, f32 math; kernels/activation.h); out may alias gate or up.
LaunchResult LaunchGeluTanhMul(const void* gate, const void* up, int64_t count, void* out,
                               void* stream);

// out[i] = a[i] + b[i] (bf16, f32 math); out may alias a or b.
LaunchResult LaunchAdd(const void* a, const void* b, int64_t count, void* out, void* stream);

// y[r, c] = sums[r, c] + bias[c], rounded once to y's type (bf16, or f32 when y_f32), for f32
// sums [rows, n] and bias [n]: the bias of a GEMM whose epilogue cannot add it (cuda_matmul.h).
LaunchResult LaunchBiasRound(const float* sums, const float* bias, int64_t rows, int64_t n,
                             void* y, bool y_f32, void* stream);

// x[i] = cap * tanh(x[i] / cap) for f32 x, in place. REQUIRES: cap > 0.
LaunchResult LaunchSoftCapF32(float* x, int64_t count, float cap, void* stream);

// out[i] = bf16(((chunks[0][i] + chunks[1][i]) + ...) in f32), chunks f32 [num_chunks, count].
LaunchResult LaunchSumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out,
                             void* stream);

// out[t, :] = bf16(row ids[t] - first_row of `table`), zeros outside [0, table.rows).
LaunchResult LaunchEmbeddingRows(const DeviceWeight& table, int64_t first_row,
                                 const int32_t* ids, int64_t num_ids, void* out, void* stream);

// out[i, :] = x[rows[i], :], rows of `row_elems` bf16 values.
LaunchResult LaunchGatherRows(const void* x, int64_t row_elems, const int32_t* rows,
                              int64_t num_rows, void* out, void* stream);

// out[i] = x[i] (bf16) widened to f32 (out_f16 false) or narrowed to f16 (true; beyond
// +-65504 saturates).
LaunchResult LaunchConvertBf16(const void* x, int64_t count, bool out_f16, void* out,
                               void* stream);

// out[i] = bf16(x[i]).
LaunchResult LaunchF32ToBf16(const float* x, int64_t count, void* out, void* stream);

// out[i] = bf16(x[i]) for f16 x.
LaunchResult LaunchF16ToBf16(const void* x, int64_t count, void* out, void* stream);

// x[i] = bf16(x[i] * scale), in place.
LaunchResult LaunchScaleBf16(void* x, int64_t count, float scale, void* stream);

// Zeros the bf16 rows [row_elems each] of the step's padding sequences (AttentionSequence::
// padding), reading the step's metadata on the device (so a recorded step replays it).
LaunchResult LaunchZeroPaddingRows(void* x, int64_t row_elems, const DeviceStep& step,
                                   void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ELEMENTWISE_KERNELS_H_
