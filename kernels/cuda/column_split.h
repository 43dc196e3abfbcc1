// The second half of a fused MatMulMany (kernels/backend.h) on the CUDA backend: the product
// of one GEMM over a stacked q/k/v or gate/up matrix, y [m, n] with each projection's output in
// a range of columns, handed to the projections' own dense outputs in ONE kernel
// (LaunchSplitColumns, column_split_kernels.h) rather than one cudaMemcpy2DAsync per output.
// Why a copy at all: the outputs are separate step buffers that RoPE, the KV write, attention
// and the gated activation read as dense [m, width] rows; writing the GEMM's D with an ld
// straight into them would need them to be column ranges of one buffer (rows n apart), which
// none of those ops take. The copy moves m * n activations (4.6 KB per token for 405B's q/k/v
// at TP 8), next to the GEMM's n * k weight bytes (37 MB).
//
//   const ColumnSplit s = PlanColumnSplit(y, {q, k, v}, {2048, 128, 128}, /*elem_bytes=*/2);
//   TPK_LAUNCH(LaunchSplitColumns(s, y, m, stream));   // SplitColumnsOnHost: the same, on host
//
// Plain C++ (TP_HD index math shared with the kernel, tested on the host). Thread-safe: pure.
#ifndef TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_H_
#define TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_H_

#include <cstdint>

#include "absl/types/span.h"
#include "kernels/cuda/host_device.h"

namespace tpserve::cuda {

inline constexpr int kMaxSplitOutputs = 4;

// What the split kernel moves: rows of `row_units` units of `unit_bytes` from the product;
// output i takes units [first_unit[i], first_unit[i] + units[i]) of each row, densely.
struct ColumnSplit {
  int num_outputs = 0;
  int unit_bytes = 0;     // 16, 8, 4, 2 or 1: the widest dividing every offset and address
  int64_t row_units = 0;  // one row of the product
  void* dst[kMaxSplitOutputs] = {};
  int64_t first_unit[kMaxSplitOutputs] = {};
  int64_t units[kMaxSplitOutputs] = {};
};

// The split of a product at `src` whose rows are the outputs' widths `cols` side by side, of
// `elem_bytes` elements, into `dst` (one per width). REQUIRES: 1 to kMaxSplitOutputs outputs,
// every width > 0, elem_bytes > 0.
ColumnSplit PlanColumnSplit(const void* src, absl::Span<void* const> dst,
                            absl::Span<const int64_t> cols, int64_t elem_bytes);

// The output unit `unit` of a product row belongs to (the kernel's and the host's lookup).
TP_HD int SplitOutputOf(const ColumnSplit& s, int64_t unit) {
  int i = 0;
  while (i + 1 < s.num_outputs && unit >= s.first_unit[i + 1]) ++i;
  return i;
}

// Copies on the host exactly what LaunchSplitColumns copies on the device, unit by unit through
// SplitOutputOf: the reference its indexing is tested by. `src` and s.dst host memory.
void SplitColumnsOnHost(const ColumnSplit& s, const void* src, int64_t rows);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_COLUMN_SPLIT_H_
