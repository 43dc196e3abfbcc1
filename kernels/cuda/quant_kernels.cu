// Conversions around the quantized cuBLASLt paths (launchers: quant_kernels.h).
//
// CPU reference:
//   QuantizeRowsFp8:   for t < m: a = max_c |x[t,c]| (min(a, ub) if ub > 0);
//                      s[t] = a > 0 ? a/448 : 1
//                      q[t,c] = e4m3_rne_satfinite(x[t,c] / s[t])
//   QuantizeGroupsFp8: the same per group g of columns [128 g, min(128 g + 128, k)), with the
//                      scale at s[g * m + t]
//   DequantizeToBf16:  out[r,c] = bf16(WeightAt(w, r, c))     (weight_decode.h), fp8 only
//   GatherColumns:     out[t,j] = x[t, perm[j]]
//   FillF32:           out[i] = value
#include <algorithm>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/quant_kernels.h"

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kGroup = 128;

__global__ void QuantizeRowsFp8Kernel(const bf16* x, int64_t k, float scale_ub, uint8_t* out,
                                      float* scales) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const bf16* row = x + t * k;
  uint8_t* q = out + t * k;
  float amax = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
    amax = fmaxf(amax, fabsf(Bf16ToF32(row[c])));
  }
  const float s = Fp8ActivationScale(BlockMax(amax, scratch), scale_ub);
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) q[c] = F32ToFp8(Bf16ToF32(row[c]) / s);
  if (threadIdx.x == 0) scales[t] = s;
}

// One block per row; each warp takes whole 128-column groups, lane l the columns
// 128 g + l + 32 j (j < 4): coalesced loads, and the group maximum is one warp reduction.
__global__ void QuantizeGroupsFp8Kernel(const bf16* x, int64_t m, int64_t k, float scale_ub,
                                        uint8_t* out, float* scales) {
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const bf16* row = x + t * k;
  uint8_t* q = out + t * k;
  const int64_t groups = (k + kGroup - 1) / kGroup;
  for (int64_t g = warp; g < groups; g += warps) {  // uniform per warp: WarpMax is safe
    float v[4];
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = g * kGroup + lane + 32 * j;
      v[j] = c < k ? Bf16ToF32(row[c]) : 0.0f;
      amax = fmaxf(amax, fabsf(v[j]));
    }
    const float s = Fp8ActivationScale(WarpMax(amax), scale_ub);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = g * kGroup + lane + 32 * j;
      if (c < k) q[c] = F32ToFp8(v[j] / s);
    }
    if (lane == 0) scales[g * m + t] = s;
  }
}

// The kernels below walk rows by block (grid-stride) and columns by thread: no per-element
// 64-bit division.
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

__global__ void FillF32Kernel(float* out, int64_t count, float value) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) out[i] = value;
}

unsigned RowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, 132 * 16));
}

}  // namespace

LaunchResult LaunchQuantizeRowsFp8(const void* x, int64_t m, int64_t k, float scale_ub,
                                   uint8_t* out, float* scales, void* stream) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  QuantizeRowsFp8Kernel<<<static_cast<unsigned>(m), kThreads, 0,
                          static_cast<cudaStream_t>(stream)>>>(static_cast<const bf16*>(x), k,
                                                               scale_ub, out, scales);
  return cudaGetLastError();
}

LaunchResult LaunchQuantizeGroupsFp8(const void* x, int64_t m, int64_t k, float scale_ub,
                                     uint8_t* out, float* scales, void* stream) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  QuantizeGroupsFp8Kernel<<<static_cast<unsigned>(m), kThreads, 0,
                            static_cast<cudaStream_t>(stream)>>>(static_cast<const bf16*>(x), m, k,
                                                                 scale_ub, out, scales);
  return cudaGetLastError();
}

LaunchResult LaunchDequantizeToBf16(const DeviceWeight& w, void* out, void* stream) {
  // int4 is never decoded per call (the mixed-input GEMM or the GEMV multiplies it), and a
  // prepared int4 weight has no stored form to decode.
  if (w.kind == WeightKind::kInt4Group) return cudaErrorInvalidValue;
  if (w.rows <= 0 || w.cols <= 0) return cudaSuccess;
  DequantizeToBf16Kernel<<<RowBlocks(w.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      w, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchGatherColumns(const void* x, int64_t m, int64_t k, const int32_t* perm,
                                 void* out, void* stream) {
  if (m <= 0 || k <= 0) return cudaSuccess;
  GatherColumnsKernel<<<RowBlocks(m), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const bf16*>(x), m, k, perm, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchFillF32(float* out, int64_t count, float value, void* stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 1024));
  FillF32Kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(out, count, value);
  return cudaGetLastError();
}

}  // namespace tpserve::cuda
