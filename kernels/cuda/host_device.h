// TP_HD marks a function both host and device code may call: __host__ __device__ (inlined)
// under nvcc, a plain inline function for g++. Device math written this way is tested on the
// CPU (weight_decode.h, attention_math.h, attention_plan.h).
#ifndef TPSERVE_KERNELS_CUDA_HOST_DEVICE_H_
#define TPSERVE_KERNELS_CUDA_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define TP_HD __host__ __device__ __forceinline__
#else
#define TP_HD inline
#endif

#endif  // TPSERVE_KERNELS_CUDA_HOST_DEVICE_H_
