// y[m, n] = x[m, k] * W^T on the tensor cores through cuBLASLt, for row-major x, W and y: it
// runs as the column-major product D[n, m] = op(A) B with A = W (k x n column-major, op = T)
// and B = x (k x m, op = N), the "TN" layout Hopper's fp8 kernels require. fp8 operands carry
// their scales into the GEMM (GemmArgs::w_scale / x_scale; layouts in cublas_gemm.cc), and D
// is written directly in the output type. What is asked of cuBLASLt comes from
// MakeGemmRequest (gemm_request.h): per problem (plans cached per problem, types, scales,
// leading dimensions and alignment, so the same call always runs the same algorithm), or, when
// deterministic, one pinned algorithm per (types, scales) with no split-K and no reduction
// scheme, for every shape. Plain C++ header.
//
//   TP_ASSIGN_OR_RETURN(auto gemm, CublasLtGemm::Create({.deterministic = false}));
//   TP_RETURN_IF_ERROR(gemm->Run({.type = GemmType::kBF16, .out = GemmType::kBF16, .m = m, ...},
//                                stream));
//
// Threading: one thread at a time (the caches are unguarded), like the backend owning it.
#ifndef TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_
#define TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda/gemm_request.h"

namespace tpserve::cuda {

struct CublasLtGemmOptions {
  // One pinned algorithm per (types, scales), without split-K or reduction schemes, so a
  // row's floats depend neither on the batch size nor on the tensor-parallel slice.
  bool deterministic = false;
};

class CublasLtGemm {
 public:
  // Creates the handle and a 32 MiB workspace on the current device.
  static absl::StatusOr<std::unique_ptr<CublasLtGemm>> Create(CublasLtGemmOptions options = {});
  ~CublasLtGemm();

  // Queues the product on `stream` (a cudaStream_t). UNIMPLEMENTED when cuBLASLt has no
  // algorithm for the combination (e.g. fp8 with unaligned sizes, scale modes this cuBLASLt or
  // GPU lacks); deterministic mode: FAILED_PRECONDITION when an operand is not 16-byte aligned
  // or the pinned algorithm does not fit the call. Errors name the call and the problem.
  absl::Status Run(const GemmArgs& args, void* stream);

  // What Run would answer for `args`, without queuing anything: its plan made (and cached, so
  // the Run that follows reuses it). OK, or Run's UNIMPLEMENTED / FAILED_PRECONDITION. The
  // pointers are read for their alignment only. For load-time checks (matmul_plan_load.h).
  absl::Status Check(const GemmArgs& args);

  bool deterministic() const { return options_.deterministic; }
  // Cached plans (for tests and logs).
  int64_t num_plans() const { return static_cast<int64_t>(plans_.size()); }

 private:
  struct Plan;
  struct Pinned;
  // (type, out, w_scale, x_scale, m, n, k, ldw, ldx, ldy, alignments w/x/y)
  using Key = std::tuple<int, int, int, int, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int, int, int>;
  using PinKey = std::tuple<int, int, int, int, bool>;
  explicit CublasLtGemm(CublasLtGemmOptions options);
  absl::StatusOr<Plan*> GetPlan(const GemmArgs& args, const GemmRequest& request);
  absl::Status MakeDescriptors(const GemmArgs& args, int64_t m, int64_t n, int64_t k, int64_t ldw,
                               int64_t ldx, int64_t ldy, Plan* plan);
  absl::Status FindAlgorithm(const GemmArgs& args, const GemmRequest& request, Plan* plan);
  absl::Status PinnedAlgorithm(const GemmArgs& args, const GemmRequest& request, Plan* plan);

  CublasLtGemmOptions options_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<PinKey, std::unique_ptr<Pinned>> pinned_;
};

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_CUBLAS_GEMM_H_
