// Included by every .cu file that launches FlashInfer's or CUTLASS's kernels, BEFORE their
// headers: from here to the end of that file, cudaDeviceGetAttribute, cudaFuncSetAttribute and
// cudaOccupancyMaxActiveBlocksPerMultiprocessor go through the process's DeviceQueryCache
// (launch_cache.h). Their launch code asks on every launch (FlashInfer's dispatch queries the
// SM count and shared memory and sets each kernel's dynamic shared memory limit per call;
// CUTLASS's adapter sets its kernel's per initialize); with this, each is asked or set once per
// device, kernel and value, so no step queries the device per layer.
//
//   #include <cuda_runtime.h>
//   #include "kernels/cuda/cached_cuda_queries.h"
//   #include <flashinfer/attention/prefill.cuh>
//
// Not for FlashInfer's host-side plan checks on a faked device (flashinfer/fake_device.h),
// whose answers change between plans. cudaGetDevice stays the runtime's (a thread-local read).
// Threading: as DeviceQueryCache (thread-safe).
#ifndef TPSERVE_KERNELS_CUDA_CACHED_CUDA_QUERIES_H_
#define TPSERVE_KERNELS_CUDA_CACHED_CUDA_QUERIES_H_

#include <cuda_runtime.h>

#include <cstddef>

namespace tpserve::cuda {

cudaError_t CachedDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t CachedFuncSetAttributeOf(const void* func, cudaFuncAttribute attr, int value);
cudaError_t CachedOccupancyOf(int* blocks, const void* func, int block_size, size_t smem);

// The runtime's template forms take any kernel pointer.
template <typename T>
inline cudaError_t CachedFuncSetAttribute(T* func, cudaFuncAttribute attr, int value) {
  return CachedFuncSetAttributeOf(reinterpret_cast<const void*>(func), attr, value);
}
template <typename T>
inline cudaError_t CachedOccupancy(int* blocks, T func, int block_size, size_t smem) {
  return CachedOccupancyOf(blocks, reinterpret_cast<const void*>(func), block_size, smem);
}

}  // namespace tpserve::cuda

#ifndef TPSERVE_CACHED_CUDA_QUERIES_IMPL
#define cudaDeviceGetAttribute ::tpserve::cuda::CachedDeviceGetAttribute
#define cudaFuncSetAttribute ::tpserve::cuda::CachedFuncSetAttribute
#define cudaOccupancyMaxActiveBlocksPerMultiprocessor ::tpserve::cuda::CachedOccupancy
#endif

#endif  // TPSERVE_KERNELS_CUDA_CACHED_CUDA_QUERIES_H_
