#include "kernels/cuda/flashinfer/launch.h"

#include <driver_types.h>

namespace tpserve::cuda::fi {
namespace {

constexpr int kNotSupported = static_cast<int>(cudaErrorNotSupported);

}  // namespace

bool Fa2Built(FiTypes types, int32_t head_dim) {
  (void)types;  // every FiTypes has FA2 kernels
  return head_dim == 64 || head_dim == 128;
}

bool Fa3Built(FiTypes types, int32_t head_dim) {
  return types == FiTypes::kBf16 && (head_dim == 64 || head_dim == 128);
}

int RunFa2(FiTypes types, const PagedBatch& batch, const Fa2Plan& plan, void* stream) {
  const bool hd64 = batch.head_dim == 64, hd128 = batch.head_dim == 128;
  switch (types) {
    case FiTypes::kBf16:
      if (hd64) return RunFa2Bf16Hd64(batch, plan, stream);
      if (hd128) return RunFa2Bf16Hd128(batch, plan, stream);
      break;
    case FiTypes::kBf16Fp8:
      if (hd64) return RunFa2Fp8Hd64(batch, plan, stream);
      if (hd128) return RunFa2Fp8Hd128(batch, plan, stream);
      break;
    case FiTypes::kF16:
      if (hd64) return RunFa2F16Hd64(batch, plan, stream);
      if (hd128) return RunFa2F16Hd128(batch, plan, stream);
      break;
  }
  return kNotSupported;
}

int RunFa3(FiTypes types, const PagedBatch& batch, const Fa3Plan& plan, void* stream) {
  if (types != FiTypes::kBf16) return kNotSupported;
  if (batch.head_dim == 64) return RunFa3Bf16Hd64(batch, plan, stream);
  if (batch.head_dim == 128) return RunFa3Bf16Hd128(batch, plan, stream);
  return kNotSupported;
}

}  // namespace tpserve::cuda::fi
