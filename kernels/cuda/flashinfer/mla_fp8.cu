// FlashInfer's Hopper MLA kernel instantiated for an e4m3 latent cache
// (mla_run.cuh): the codes are dequantized (times the pool's scale, in bf16) in
// shared memory before the MMAs.
#include "kernels/cuda/flashinfer/mla_run.cuh"

namespace tpserve::cuda::fi {

int RunMlaFp8(const MlaBatch &batch, const MlaPlan &plan, void *stream) {
  return RunMlaTyped<__nv_fp8_e4m3>(batch, plan, stream);
}

}  // namespace tpserve::cuda::fi
