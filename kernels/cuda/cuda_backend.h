// The CUDA implementation of Backend (kernels/backend.h): bf16 activations in device memory,
// cuBLASLt GEMMs, hand-written kernels for the rest, one stream. See kernels/cuda/README.md.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, CreateCudaBackend(/*device_ordinal=*/0));
//
// Plain C++ header (no CUDA includes). Threading: as every Backend.
#ifndef TPSERVE_KERNELS_CUDA_CUDA_BACKEND_H_
#define TPSERVE_KERNELS_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tpserve {

// FAILED_PRECONDITION when there is no such device (or no driver).
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device_ordinal);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_CUDA_BACKEND_H_
