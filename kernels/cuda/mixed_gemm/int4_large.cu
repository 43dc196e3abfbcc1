// The int4 configuration for batches above 16 tokens (128 weight rows x 128 tokens x 64
// columns), for bf16 and f32 y.
#include "kernels/cuda/mixed_gemm/gemm_config.cuh"

namespace tpserve::cuda::mixed_gemm {

int RunInt4Large(const KernelArgs& args) { return RunEitherOutput<true, LargeTile>(args); }

int64_t Int4LargeWorkspace(const KernelArgs& args) {
  return WorkspaceEitherOutput<true, LargeTile>(args);
}

}  // namespace tpserve::cuda::mixed_gemm
