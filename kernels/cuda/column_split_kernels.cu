// The fused MatMulMany's split (column_split.h): one thread per unit of the product, each
// looking up its output with SplitOutputOf (the host reference's lookup) and storing the unit
// at its dense place.
#include "kernels/cuda/column_split_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 256;

template <typename Unit>
__global__ void SplitColumnsKernel(ColumnSplit s, const Unit* src, int64_t rows) {
  const int64_t total = rows * s.row_units;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / s.row_units, u = idx % s.row_units;
    const int i = SplitOutputOf(s, u);
    static_cast<Unit*>(s.dst[i])[r * s.units[i] + (u - s.first_unit[i])] = src[idx];
  }
}

template <typename Unit>
cudaError_t Launch(const ColumnSplit& s, const void* src, int64_t rows, cudaStream_t stream) {
  const int64_t total = rows * s.row_units;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 32));
  SplitColumnsKernel<Unit><<<blocks, kThreads, 0, stream>>>(s, static_cast<const Unit*>(src), rows);
  return cudaGetLastError();
}

}  // namespace

LaunchResult LaunchSplitColumns(const ColumnSplit& split, const void* src, int64_t rows,
                                void* stream) {
  if (rows <= 0 || split.row_units <= 0) return cudaSuccess;
  const auto st = static_cast<cudaStream_t>(stream);
  switch (split.unit_bytes) {
    case 16:
      return Launch<uint4>(split, src, rows, st);
    case 8:
      return Launch<uint2>(split, src, rows, st);
    case 4:
      return Launch<uint32_t>(split, src, rows, st);
    case 2:
      return Launch<uint16_t>(split, src, rows, st);
    default:
      return Launch<uint8_t>(split, src, rows, st);
  }
}

}  // namespace tpserve::cuda
