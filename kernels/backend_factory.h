// Builds the compute backend a rank was configured for, so code above it (the model, the rank
// runtime) never names an implementation.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be,
//                       CreateBackend({.kind = BackendKind::kCuda, .device_ordinal = 1}));
//
// The CUDA backend exists only in builds with the CUDA toolkit (see tools/cuda_configure.bzl);
// elsewhere asking for it is UNIMPLEMENTED with a message that says how to build it.
// Threading: safe to call from several threads (one per rank).
#ifndef TPSERVE_KERNELS_BACKEND_FACTORY_H_
#define TPSERVE_KERNELS_BACKEND_FACTORY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend.h"

namespace tpserve {

struct BackendOptions {
  BackendKind kind = BackendKind::kCpu;
  int num_threads = 1;     // CPU: worker threads (>= 1)
  int device_ordinal = 0;  // CUDA: which GPU
  // CUDA: matmuls whose floats depend neither on the batch size nor on the tensor-parallel
  // degree (CudaBackendOptions::deterministic; what --deterministic_tp needs on a GPU). The
  // CPU backend ignores it.
  bool deterministic = false;
  // CUDA: --strict_kernels, a matrix some batch would multiply by decoding it to bf16 is
  // refused at load instead of reported (CudaBackendOptions::strict_kernels). The CPU backend
  // ignores it.
  bool strict_kernels = false;
  // CUDA: most rows of one step, the batch sizes each matrix's kernels are checked for at load
  // (0: kernels/cuda/matmul_plan_load.h's default). The CPU backend ignores it.
  int64_t max_tokens_per_step = 0;
  // CUDA: whether the backend records and replays steps (CudaBackendOptions::cuda_graphs;
  // false: --enforce_eager). The CPU backend never records.
  bool cuda_graphs = true;
};

// INVALID_ARGUMENT for bad options; UNIMPLEMENTED for a backend this build lacks;
// FAILED_PRECONDITION when the device is not there (no driver, no such GPU).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

// Whether this binary was built with the CUDA backend.
bool CudaBackendBuilt();

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_BACKEND_FACTORY_H_
