#include "kernels/cuda/cuda_backend.h"

namespace tpserve {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device_ordinal) {
  (void)device_ordinal;
  return absl::UnimplementedError("the CUDA backend is not implemented yet");
}

}  // namespace tpserve
