// The weight preparation of prepare.h on the device, for a weight that is already in device
// memory (the CUDA backend receives weights as device pointers): the same bytes, element for
// element, from the same rules (prepared_layout.h). Plain C++ header.
//
//   Int4Source src{w.data, w.row_bytes, w.scales, w.zeros, w.scale_stride, n, k, group};
//   LaunchPrepareInt4(src, codes, scales, offsets, stream);   // then RunMixedGemm
//
// Every pointer is device memory; the outputs must not overlap the source. Thread-safe:
// stateless launchers; results are ready in stream order.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_KERNELS_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_KERNELS_H_

#include <cstdint>

namespace tpserve::cuda {

// An int4 weight in the engine's format (kernels/weight_matrix.h).
struct Int4Source {
  const void* codes = nullptr;  // rows of row_bytes, GGML Q4_0 nibble order per 32 columns
  int64_t row_bytes = 0;
  const void* scales = nullptr;  // f16 [n][scale_stride]
  const void* zeros = nullptr;   // f16 [n][scale_stride]
  int64_t scale_stride = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t group_size = 0;
};

// codes (n * k / 2 bytes), scales and offsets (f32 [k / G][n]) as PrepareInt4 makes them.
// REQUIRES: MixedGemmTakesWeight(Int4(group_size), n, k). Returns a cudaError_t as int.
int LaunchPrepareInt4(const Int4Source& src, void* codes, float* scales, float* offsets,
                      void* stream);

// An fp8 weight's scales: kind 0 plain (scales unused), 1 per channel (f32 [n]), 2 128x128
// tiles (f32 [ceil(n/128)][scale_stride]).
struct Fp8ScaleSource {
  int kind = 0;
  const float* scales = nullptr;
  int64_t scale_stride = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// f32 [k / 128][n] as PrepareFp8Scales makes them. Returns a cudaError_t as int.
int LaunchPrepareFp8Scales(const Fp8ScaleSource& src, float* scales, void* stream);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_PREPARE_KERNELS_H_
