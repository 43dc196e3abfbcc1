#include "kernels/backend_factory.h"

#include "base/str_cat.h"
#include "kernels/cpu/cpu_backend.h"

#if TPSERVE_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace tpserve {

bool CudaBackendBuilt() { return TPSERVE_WITH_CUDA != 0; }

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options) {
  switch (options.kind) {
    case BackendKind::kCpu:
      if (options.num_threads < 1) {
        return absl::InvalidArgumentError(
            StrCat("num_threads = ", options.num_threads, " must be >= 1"));
      }
      return std::unique_ptr<Backend>(
          std::make_unique<CpuBackend>(CpuBackendOptions{options.num_threads}));
    case BackendKind::kCuda:
#if TPSERVE_WITH_CUDA
      return CreateCudaBackend(
          options.device_ordinal,
          CudaBackendOptions{.deterministic = options.deterministic,
                             .strict_kernels = options.strict_kernels,
                             .max_tokens_per_step = options.max_tokens_per_step,
                             .cuda_graphs = options.cuda_graphs});
#else
      return absl::UnimplementedError(
          "this build has no CUDA backend: build with the CUDA toolkit present "
          "(bazel build --config=cuda, see docs/ARCHITECTURE.md) to run GPU ranks");
#endif
  }
  return absl::InvalidArgumentError("unknown backend kind");
}

}  // namespace tpserve
