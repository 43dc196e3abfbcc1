// Device helpers the kernel files share: element conversions (bf16, f16, e4m3), warp and block
// reductions, and the element-wise decode of a DeviceWeight (the device twin of
// DequantizeWeightRow in kernels/weight_matrix.cc, with the same f32 operations in the same
// order so both give the same floats). Included by .cu files only.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_MATH_CUH_
#define TPSERVE_KERNELS_CUDA_DEVICE_MATH_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float Bf16ToF32(bf16 v) { return __bfloat162float(v); }
__device__ __forceinline__ bf16 F32ToBf16(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ float F16BitsToF32(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Exact: every e4m3 value is an f16 value.
__device__ __forceinline__ float Fp8ToF32(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Round to nearest even, saturating at +-448 (as F32ToF8E4M3 in kernels/quantize.cc).
__device__ __forceinline__ uint8_t F32ToFp8(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
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

// Element (r, c) of `w` as f32. value = code * s (fp8), (code - zero) * scale (int4).
__device__ __forceinline__ float WeightAt(const DeviceWeight& w, int64_t r, int64_t c) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.row_bytes;
  switch (w.kind) {
    case WeightKind::kF32:
      return reinterpret_cast<const float*>(row)[c];
    case WeightKind::kF16:
      return F16BitsToF32(reinterpret_cast<const uint16_t*>(row)[c]);
    case WeightKind::kBF16:
      return Bf16ToF32(reinterpret_cast<const bf16*>(row)[c]);
    case WeightKind::kFp8:
      return Fp8ToF32(row[c]);
    case WeightKind::kFp8PerChannel: {
      const float v = Fp8ToF32(row[c]);
      return w.scales == nullptr ? v : v * static_cast<const float*>(w.scales)[r];
    }
    case WeightKind::kFp8Block128: {
      const float s = static_cast<const float*>(w.scales)[(r / 128) * w.scale_stride + c / 128];
      return Fp8ToF32(row[c]) * s;
    }
    case WeightKind::kInt4Group: {
      // Byte j of a 32-column chunk: column j low nibble, column j + 16 high nibble.
      const int64_t in_chunk = c % 32;
      const uint8_t byte = row[(c / 32) * 16 + (in_chunk % 16)];
      const int code = in_chunk < 16 ? (byte & 0x0F) : (byte >> 4);
      const int64_t g = r * w.scale_stride + c / w.group_size;
      const float zero = F16BitsToF32(static_cast<const uint16_t*>(w.zeros)[g]);
      const float scale = F16BitsToF32(static_cast<const uint16_t*>(w.scales)[g]);
      return (static_cast<float>(code) - zero) * scale;
    }
  }
  return 0.0f;
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
