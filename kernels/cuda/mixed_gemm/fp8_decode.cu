// The fp8 (W8A16) decode configuration (128 weight rows x 16 tokens x 64 columns), for bf16
// and f32 y. Larger fp8 batches quantize x and use cuBLASLt's fp8 GEMM instead.
#include "kernels/cuda/mixed_gemm/gemm_config.cuh"

namespace tpserve::cuda::mixed_gemm {

int RunFp8Decode(const KernelArgs& args) { return RunEitherOutput<false, DecodeTile>(args); }

int64_t Fp8DecodeWorkspace(const KernelArgs& args) {
  return WorkspaceEitherOutput<false, DecodeTile>(args);
}

}  // namespace tpserve::cuda::mixed_gemm
