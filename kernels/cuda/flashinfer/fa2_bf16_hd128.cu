// FA2 instantiations (launch.h): q __nv_bfloat16, KV __nv_bfloat16, output __nv_bfloat16,
// head_dim 128. One file per (types, head_dim), so the slow FlashInfer compiles run side
// by side.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/flashinfer/fa2_run.cuh"

namespace tpserve::cuda::fi {

int RunFa2Bf16Hd128(const PagedBatch& batch, const Fa2Plan& plan, void* stream) {
  return RunFa2Typed<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, 128>(batch, plan, stream);
}

}  // namespace tpserve::cuda::fi
