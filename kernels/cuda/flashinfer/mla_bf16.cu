// FlashInfer's Hopper MLA kernel instantiated for a bf16 latent cache
// (mla_run.cuh).
#include "kernels/cuda/flashinfer/mla_run.cuh"

namespace tpserve::cuda::fi {

int RunMlaBf16(const MlaBatch &batch, const MlaPlan &plan, void *stream) {
  return RunMlaTyped<__nv_bfloat16>(batch, plan, stream);
}

}  // namespace tpserve::cuda::fi
