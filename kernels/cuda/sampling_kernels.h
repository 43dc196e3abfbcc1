// The launcher of the device sampler: one block per logit row runs the row algorithm of
// row_sampling.h (the code the host test runs against the CPU sampler) with block-wide passes.
// Plain C++ (see device_types.h).
//
//   TPK_LAUNCH(LaunchSampleRows(logits, vocab, per_rank, layout_rows, rows, n, arrays, saved,
//                               out, stream));
//
// Thread-safe: stateless.
#ifndef TPSERVE_KERNELS_CUDA_SAMPLING_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_SAMPLING_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/row_sampling.h"

namespace tpserve::cuda {

// Samples rows [0, num_rows) of `logits`, in place (RowView: `layout_rows` rows cut into
// slices of `per_rank` ids; per_rank = vocab for rows stored whole). `rows` [num_rows],
// the arrays `arrays` points at, `saved` (one float per penalty entry) and `out` [num_rows]
// are device memory.
LaunchResult LaunchSampleRows(float* logits, int64_t vocab, int64_t per_rank, int64_t layout_rows,
                              const SamplingRow* rows, int64_t num_rows, const RowArrays& arrays,
                              float* saved, RowSample* out, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_SAMPLING_KERNELS_H_
