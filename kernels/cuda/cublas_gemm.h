// y[m, n] = x[m, k] * W^T on the tensor cores through cuBLASLt, for row-major x, W and y: it
// runs as the column-major product D[n, m] = op(A) B with A = W (k x n column-major, op = T)
// and B = x (k x m, op = N), the "TN" layout Hopper's fp8 kernels require. Plans (descriptors
// and the heuristic's algorithm) are cached per shape, types, leading dimensions and pointer
// alignment, so the same call always runs the same algorithm (MatMulChunked's bit-identity
// relies on that). Plain C++ header.
//
//   TP_ASSIGN_OR_RETURN(auto gemm, CublasLtGemm::Create());
//   TP_RETURN_IF_ERROR(gemm->Run({.type = GemmType::kBF16, .out = GemmType::kBF16, .m = m, ...},
//                                stream));
//
// Threading: one thread at a time (the cache is unguarded), like the backend owning it.
#ifndef TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_
#define TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpserve::cuda {

enum class GemmType : int { kF32, kF16, kBF16, kE4M3 };

struct GemmArgs {
  GemmType type = GemmType::kBF16;  // of W and x
  GemmType out = GemmType::kBF16;   // of y: kF32, or the input type for f16/bf16
  int64_t m = 0, n = 0, k = 0;
  const void* w = nullptr;  // [n, k], rows ldw elements apart
  int64_t ldw = 0;
  const void* x = nullptr;  // [m, k], rows ldx elements apart
  int64_t ldx = 0;
  void* y = nullptr;  // [m, n], rows ldy elements apart
  int64_t ldy = 0;
};

class CublasLtGemm {
 public:
  // Creates the handle and a 32 MiB workspace on the current device.
  static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create();
  ~CublasLtGemm();

  // Queues the product on `stream` (a cudaStream_t). UNIMPLEMENTED when cuBLASLt has no
  // algorithm for the combination (e.g. fp8 with unaligned sizes); errors name the call.
  absl::Status Run(const GemmArgs& args, void* stream);

  // Cached plans (for tests and logs).
  int64_t num_plans() const { return static_cast<int64_t>(plans_.size()); }

 private:
  struct Plan;
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int,
                         int>;
  CublasLtGemm() = default;
  absl::StatusOr<Plan*> GetPlan(const GemmArgs& args);

  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_
