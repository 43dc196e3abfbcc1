// FA3 (Hopper: TMA loads, wgmma, warp specialisation) instantiation: q, KV and output bf16,
// head_dim 64, causal, through FlashInfer's sm90 paged prefill (see launch.h). Only the
// per-head persistent scheduler is built: PlanFa3 (flashinfer_plan.cu) refuses a plan that
// asks for the other, which needs more than 4,096 query tiles per head.
#include "kernels/cuda/flashinfer/fa3_run.cuh"

namespace tpserve::cuda::fi {

int RunFa3Bf16Hd64(const PagedBatch& batch, const Fa3Plan& plan, void* stream) {
  return RunFa3Typed<64>(batch, plan, stream);
}

}  // namespace tpserve::cuda::fi
