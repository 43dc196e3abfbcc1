// Device helpers the kernel files share: bf16 typed wrappers, warp and block reductions and
// grid-stride bounds. The element conversions (f16, bf16, e4m3) and the weight decode
// (WeightAt, the device twin of DequantizeWeightRow in kernels/weight_matrix.cc) live in
// weight_decode.h, which compiles for the host too and is tested there against the CPU
// reference. Included by .cu files only.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_MATH_CUH_
#define TPSERVE_KERNELS_CUDA_DEVICE_MATH_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/weight_decode.h"

namespace tpserve::cuda {

using bf16 = __nv_bfloat16;

// bf16 as the kernels type it; the conversions are weight_decode.h's (round to nearest even).
__device__ __forceinline__ float Bf16ToF32(bf16 v) {
  return Bf16BitsToF32(__bfloat16_as_ushort(v));
}
__device__ __forceinline__ bf16 F32ToBf16(float v) {
  return __ushort_as_bfloat16(F32ToBf16Bits(v));
}

// Two e4m3 codes (low byte first) to two floats.
__device__ __forceinline__ float2 Fp8x2ToF32x2(uint16_t codes) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(codes),
                                                   __NV_E4M3);
  return __half22float2(__half2(h));
}

// Two bf16 packed in a word (low half first) to two floats: bf16 is the top half of an f32.
__device__ __forceinline__ float2 Bf16x2ToF32x2(uint32_t packed) {
  return make_float2(__uint_as_float(packed << 16), __uint_as_float(packed & 0xFFFF0000u));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  }
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats.
// REQUIRES: blockDim.x a multiple of 32, all threads call it.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x / 32;
  float total = lane < num_warps ? scratch[lane] : 0.0f;
  return WarpSum(total);
}

__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = WarpMax(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x / 32;
  float m = lane < num_warps ? scratch[lane] : -INFINITY;
  return WarpMax(m);
}

// Grid-stride loop bounds for element-wise kernels.
__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t GlobalThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_DEVICE_MATH_CUH_
