// The split kernel of a fused MatMulMany (column_split.h says what and why). Plain C++ (see
// device_types.h). Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/column_split.h"
#include "kernels/cuda/device_types.h"

namespace tpserve::cuda {

// Queues on `stream` the copy of `rows` rows of the product at `src` into split.dst, as
// SplitColumnsOnHost does it; returns cudaGetLastError(). rows == 0 launches nothing.
LaunchResult LaunchSplitColumns(const ColumnSplit& split, const void* src, int64_t rows,
                                void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_KERNELS_H_
