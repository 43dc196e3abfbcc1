// One mixed GEMM call resolved to what a CUTLASS instantiation needs (internal to this package:
// run_mixed_gemm.cc fills it, the .cu files run it). Plain C++.
//
//   KernelArgs a = ...;  const int err = RunInt4Decode(a);   // a cudaError_t
//
// Problem in CUTLASS's names (weights are A, tokens B, "swap AB"): M = n weight rows,
// N = m tokens, K = k columns of one chunk, L = num_chunks batch entries; D[M, N, L] is y
// [num_chunks, m, n] seen column-major. Thread-safe: plain values and stateless launchers.
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_KERNEL_ARGS_H_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_KERNEL_ARGS_H_

#include <cstdint>

#include "kernels/cuda/launch_cache.h"

namespace tpserve::cuda::mixed_gemm {

struct KernelArgs {
  const void* codes = nullptr;     // int4: prepared (n x k per batch entry); fp8: e4m3 rows
  int64_t code_row_bytes = 0;      // fp8: bytes from one row to the next
  int64_t code_batch = 0;          // fp8: elements from one chunk to the next (= k)
  const float* scales = nullptr;   // [k_total / group][n]
  const float* offsets = nullptr;  // int4 only
  int group_size = 0;
  const void* x = nullptr;  // bf16
  int64_t x_row_elems = 0;
  void* y = nullptr;
  bool y_f32 = false;
  int n = 0, m = 0, k = 0, batches = 1;
  int splits = 1;
  int sm_count = 0;
  void* workspace = nullptr;
  void* stream = nullptr;
};

// Everything CUTLASS's kernel parameters are built from (every field but the stream, which
// they do not hold): launches with equal keys reuse one initialize (gemm_config.cuh).
inline LaunchKey MixedGemmLaunchKey(const KernelArgs& a) {
  return {KeyWord(a.codes), a.code_row_bytes, a.code_batch, KeyWord(a.scales),
          KeyWord(a.offsets), a.group_size, KeyWord(a.x), a.x_row_elems, KeyWord(a.y),
          a.y_f32 ? 1 : 0, a.n, a.m, a.k, a.batches, a.splits, a.sm_count,
          KeyWord(a.workspace)};
}

// Queue one GEMM (0 on success, else a cudaError_t as int; cudaErrorInvalidValue when
// CUTLASS's can_implement refuses the arguments), and the workspace it needs (bytes). One pair
// per compiled configuration: weight kind x tile, each for bf16 and f32 y.
int RunInt4Decode(const KernelArgs& args);
int64_t Int4DecodeWorkspace(const KernelArgs& args);
int RunInt4Large(const KernelArgs& args);
int64_t Int4LargeWorkspace(const KernelArgs& args);
int RunFp8Decode(const KernelArgs& args);
int64_t Fp8DecodeWorkspace(const KernelArgs& args);

// The 4-bit element index CUTLASS's own layout object for the prepared int4 operand gives
// W(row, col) of an [n, k] matrix (the layout RunInt4* hands the kernel): host code, for
// cute_layout_test to compare with prepared_layout.h.
int64_t CutlassInt4ElementIndex(int64_t n, int64_t k, int64_t row, int64_t col);

}  // namespace tpserve::cuda::mixed_gemm

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_KERNEL_ARGS_H_
