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
#include "kernels/cuda/cuda_device.h"

namespace tpserve {

struct CudaBackendOptions {
  // Matmuls whose floats depend neither on the batch size nor on the tensor-parallel slice:
  // one path per weight format for every batch, exact bf16 activations, cuBLASLt algorithms
  // pinned per type pair without split-K (kernels/cuda/cuda_matmul.h, matmul_plan.h). A GEMM
  // the pinned algorithm cannot run is refused at load (PlaceWeight: FAILED_PRECONDITION
  // naming M, N, K; matmul_plan_load.h), never silently takes another algorithm. Attention
  // likewise: FlashInfer's FA2 over one request per query row with keys split at fixed points
  // (kernels/cuda/flashinfer/flashinfer_attention.h), never FA3 or the SIMT kernels, and no
  // CUDA graphs.
  bool deterministic = false;
  // How the host thread waits inside the driver's own blocking calls, set on the device when
  // the backend is made (cuda_device.h says why blocking is the default). The environment
  // variable TPSERVE_CUDA_HOST_SYNC (blocking_sync, yield, spin, auto), when set, overrides it,
  // so a GPU check can compare the modes without a rebuild.
  HostSyncMode host_sync = kDefaultHostSyncMode;
  // --strict_kernels: PlaceWeight refuses a matrix some batch would multiply by decoding it to
  // bf16 (an fp8 scale mode or shape cuBLASLt refuses, ...), naming its role, shape and why,
  // instead of reporting the fallback once per role (kernels/cuda/matmul_plan_load.h).
  bool strict_kernels = false;
  // Most rows of one step: the batch sizes PlaceWeight checks each matrix's kernels for
  // (0: matmul_plan_load.h's default).
  int64_t max_tokens_per_step = 0;
  // Whether RunCaptured records steps as CUDA graphs and replays them (the model records
  // decode steps: worker/llama_model.h); false: --enforce_eager, every step op by op. Never
  // in deterministic mode (above) or check mode (TPSERVE_CUDA_CHECK=1). The environment
  // variable TPSERVE_CUDA_GRAPHS=0 turns recording off too, for a GPU check comparing both.
  bool cuda_graphs = true;
};

// FAILED_PRECONDITION when there is no such device (or no driver); INVALID_ARGUMENT naming
// TPSERVE_CUDA_HOST_SYNC when it holds no mode; RESOURCE_EXHAUSTED when the copy staging's
// pinned memory (pinned_staging.h) cannot be had.
absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device_ordinal,
                                                           const CudaBackendOptions& options = {});

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_CUDA_BACKEND_H_
