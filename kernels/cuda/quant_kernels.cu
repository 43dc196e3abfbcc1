// Conversions around the quantized cuBLASLt paths (launchers: quant_kernels.h).
//
// CPU reference:
//   QuantizeRowsFp8: for t < m: a = max_c |x[t,c]| (min(a, ub) if ub > 0); s[t] = a > 0 ? a/448 : 1
//                    q[t,c] = e4m3_rne_satfinite(x[t,c] / s[t]); rows m..m_pad-1: q = 0, s = 1
//   ScaleRowsCols:   y[t,j] = (d[t,j] * rs[t]) * cs[j]
//   DequantizeToBf16: out[r,c] = bf16(WeightAt(w, r, c))     (device_math.cuh)
//   GatherColumns:   out[t,j] = x[t, perm[j]]
#include "kernels/cuda/quant_kernels.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr float kFp8Max = 448.0f;

__global__ void QuantizeRowsFp8Kernel(const bf16* x, int64_t m, int64_t k, float scale_ub,
                                      uint8_t* out, float* scales) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  uint8_t* q = out + t * k;
  if (t >= m) {  // padding row: uniform branch for the whole block
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x) q[c] = 0;
    if (threadIdx.x == 0) scales[t] = 1.0f;
    return;
  }
  const bf16* row = x + t * k;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) amax = fmaxf(amax, fabsf(Bf16ToF32(row[c])));
  amax = BlockMax(amax, scratch);
  if (scale_ub > 0.0f) amax = fminf(amax, scale_ub);
  const float s = amax > 0.0f ? amax / kFp8Max : 1.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) q[c] = F32ToFp8(Bf16ToF32(row[c]) / s);
  if (threadIdx.x == 0) scales[t] = s;
}

// The kernels below walk rows by block (grid-stride) and columns by thread: no per-element
// 64-bit division.
__global__ void ScaleRowsColsKernel(const float* d, const float* row_scales,
                                    const float* col_scales, int64_t m, int64_t n, void* y,
                                    bool y_f32) {
  for (int64_t t = blockIdx.x; t < m; t += gridDim.x) {
    const float rs = row_scales[t];
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const int64_t i = t * n + j;
      float v = d[i] * rs;
      if (col_scales != nullptr) v *= col_scales[j];
      if (y_f32) {
        static_cast<float*>(y)[i] = v;
      } else {
        static_cast<bf16*>(y)[i] = F32ToBf16(v);
      }
    }
  }
}

__global__ void DequantizeToBf16Kernel(DeviceWeight w, bf16* out) {
  for (int64_t r = blockIdx.x; r < w.rows; r += gridDim.x) {
    for (int64_t c = threadIdx.x; c < w.cols; c += blockDim.x) {
      out[r * w.cols + c] = F32ToBf16(WeightAt(w, r, c));
    }
  }
}

__global__ void GatherColumnsKernel(const bf16* x, int64_t m, int64_t k, const int32_t* perm,
                                    bf16* out) {
  for (int64_t t = blockIdx.x; t < m; t += gridDim.x) {
    for (int64_t j = threadIdx.x; j < k; j += blockDim.x) out[t * k + j] = x[t * k + perm[j]];
  }
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, 132 * 16));
}

}  // namespace

LaunchResult LaunchQuantizeRowsFp8(const void* x, int64_t m, int64_t k, int64_t m_pad,
                                   float scale_ub, uint8_t* out, float* scales, void* stream) {
  if (m_pad <= 0 || k <= 0) return cudaSuccess;
  QuantizeRowsFp8Kernel<<<static_cast<unsigned>(m_pad), kThreads, 0,
                          static_cast<cudaStream_t>(stream)>>>(static_cast<const bf16*>(x), m, k,
                                                               scale_ub, out, scales);
  return cudaGetLastError();
}

LaunchResult LaunchScaleRowsCols(const float* d, const float* row_scales, const float* col_scales,
                                 int64_t m, int64_t n, void* y, bool y_f32, void* stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  ScaleRowsColsKernel<<<RowBlocks(m), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      d, row_scales, col_scales, m, n, y, y_f32);
  return cudaGetLastError();
}

LaunchResult LaunchDequantizeToBf16(const DeviceWeight& w, void* out, void* stream) {
  if (w.rows <= 0 || w.cols <= 0) return cudaSuccess;
  DequantizeToBf16Kernel<<<RowBlocks(w.rows), kThreads, 0,
                           static_cast<cudaStream_t>(stream)>>>(w, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchGatherColumns(const void* x, int64_t m, int64_t k, const int32_t* perm,
                                 void* out, void* stream) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  GatherColumnsKernel<<<RowBlocks(m), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const bf16*>(x), m, k, perm, static_cast<bf16*>(out));
  return cudaGetLastError();
}

}  // namespace tpserve::cuda
