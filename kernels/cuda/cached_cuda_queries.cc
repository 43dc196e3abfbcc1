// The runtime calls behind cached_cuda_queries.h's names (without its macros, which would
// route these back to themselves).
#define TPSERVE_CACHED_CUDA_QUERIES_IMPL
#include "kernels/cuda/cached_cuda_queries.h"

#include "kernels/cuda/launch_cache.h"

namespace tpserve::cuda {
namespace {

int CurrentDevice() {
  int device = 0;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

}  // namespace

cudaError_t CachedDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  return static_cast<cudaError_t>(ProcessDeviceQueries().DeviceAttribute(
      device, static_cast<int>(attr), value,
      [&](int* out) { return static_cast<int>(::cudaDeviceGetAttribute(out, attr, device)); }));
}

cudaError_t CachedFuncSetAttributeOf(const void* func, cudaFuncAttribute attr, int value) {
  return static_cast<cudaError_t>(ProcessDeviceQueries().FuncAttribute(
      CurrentDevice(), func, static_cast<int>(attr), value,
      [&] { return static_cast<int>(::cudaFuncSetAttribute(func, attr, value)); }));
}

cudaError_t CachedOccupancyOf(int* blocks, const void* func, int block_size, size_t smem) {
  return static_cast<cudaError_t>(ProcessDeviceQueries().Occupancy(
      CurrentDevice(), func, block_size, static_cast<int64_t>(smem), blocks, [&](int* out) {
        return static_cast<int>(
            ::cudaOccupancyMaxActiveBlocksPerMultiprocessor(out, func, block_size, smem));
      }));
}

}  // namespace tpserve::cuda
