#include "kernels/cuda/cublas_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda/cuda_status.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kWorkspaceBytes = 32 << 20;  // what NVIDIA suggests for Hopper

cudaDataType_t DataType(GemmType t) {
  switch (t) {
    case GemmType::kF32:
      return CUDA_R_32F;
    case GemmType::kF16:
      return CUDA_R_16F;
    case GemmType::kBF16:
      return CUDA_R_16BF;
    case GemmType::kE4M3:
      return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

const char* TypeName(GemmType t) {
  switch (t) {
    case GemmType::kF32:
      return "f32";
    case GemmType::kF16:
      return "f16";
    case GemmType::kBF16:
      return "bf16";
    case GemmType::kE4M3:
      return "e4m3";
  }
  return "?";
}

// The alignment cuBLASLt may assume for a pointer: the largest power of two dividing the
// address, capped at 16 bytes. cuBLASLt's default assumption (256) is wrong for a pointer into
// the middle of a buffer; and the cap keeps the plan, and with it the floats, independent of
// where a 16-byte-aligned operand sits (a chunk of a row-parallel reduction must give the same
// bits wherever its output lands). 16 bytes is all the tensor-core kernels' vector loads need.
int Alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create() {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm());
  cublasLtHandle_t handle = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtCreate(&handle)));
  gemm->handle_ = handle;
  const cudaError_t err = cudaMalloc(&gemm->workspace_, kWorkspaceBytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    gemm->workspace_ = nullptr;
    return absl::ResourceExhaustedError(absl::StrCat("cuBLASLt workspace: cannot allocate ",
                                                     kWorkspaceBytes, " bytes"));
  }
  gemm->workspace_bytes_ = kWorkspaceBytes;
  return gemm;
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

absl::StatusOr<CublasLtGemm::Plan*> CublasLtGemm::GetPlan(const GemmArgs& g) {
  const Key key{static_cast<int>(g.type), static_cast<int>(g.out), g.m, g.n, g.k, g.ldw, g.ldx,
                g.ldy, Alignment(g.w), Alignment(g.x), Alignment(g.y)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  auto plan = std::make_unique<Plan>();
  // f32 accumulation and f32 alpha/beta for every type (plain f32 inputs: no TF32).
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F,
                                                         CUDA_R_32F)));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa))));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb))));
  const cudaDataType_t in = DataType(g.type), out = DataType(g.out);
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a, in, g.k, g.n, g.ldw)));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b, in, g.k, g.m, g.ldx)));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->c, out, g.n, g.m, g.ldy)));

  cublasLtMatmulPreference_t pref = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref)));
  const uint64_t workspace = static_cast<uint64_t>(workspace_bytes_);
  const uint32_t align_w = Alignment(g.w), align_x = Alignment(g.x), align_y = Alignment(g.y);
  absl::Status st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w, sizeof(align_w)));
  }
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x, sizeof(align_x)));
  }
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_y, sizeof(align_y)));
  }
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y, sizeof(align_y)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_),
                                                   plan->desc, plan->a, plan->b, plan->c,
                                                   plan->c, pref, 1, &result, &found));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  TP_RETURN_IF_ERROR(st);
  if (found == 0) {
    return absl::UnimplementedError(absl::StrCat(
        "cuBLASLt has no algorithm for ", TypeName(g.type), " x ", TypeName(g.type), " -> ",
        TypeName(g.out), " with m=", g.m, " n=", g.n, " k=", g.k, " ldw=", g.ldw, " ldx=", g.ldx,
        " ldy=", g.ldy, " alignments ", align_w, "/", align_x, "/", align_y));
  }
  plan->algo = result.algo;
  Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status CublasLtGemm::Run(const GemmArgs& g, void* stream) {
  if (g.m <= 0 || g.n <= 0) return absl::OkStatus();
  TP_ASSIGN_OR_RETURN(Plan * plan, GetPlan(g));
  const float alpha = 1.0f, beta = 0.0f;
  return TPK_CUBLAS(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan->desc, &alpha,
                                   g.w, plan->a, g.x, plan->b, &beta, g.y, plan->c, g.y, plan->c,
                                   &plan->algo, workspace_, static_cast<size_t>(workspace_bytes_),
                                   static_cast<cudaStream_t>(stream)));
}

}  // namespace tpserve::cuda
