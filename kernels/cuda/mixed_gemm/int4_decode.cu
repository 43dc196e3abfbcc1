// The int4 decode configuration (128 weight rows x 16 tokens x 64 columns) for bf16 and f32 y,
// and CUTLASS's layout of the prepared int4 operand as host code for cute_layout_test.
// One .cu per (weight type, tile) so the build compiles them side by side (README.md: cost).
#include "kernels/cuda/mixed_gemm/gemm_config.cuh"

namespace tpserve::cuda::mixed_gemm {

int RunInt4Decode(const KernelArgs& args) { return RunEitherOutput<true, DecodeTile>(args); }

int64_t Int4DecodeWorkspace(const KernelArgs& args) {
  return WorkspaceEitherOutput<true, DecodeTile>(args);
}

int64_t CutlassInt4ElementIndex(int64_t n, int64_t k, int64_t row, int64_t col) {
  const Int4Layout layout = MakeInt4Layout(static_cast<int>(n), static_cast<int>(k), /*batches=*/1);
  return static_cast<int64_t>(layout(static_cast<int>(row), static_cast<int>(col), 0));
}

}  // namespace tpserve::cuda::mixed_gemm
