#include "kernels/cuda/cublas_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>
#include <utility>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/cuda/cuda_status.h"

// Scale modes (cuBLASLt >= 12.9, Hopper sm_90 only; cublasLt.h cublasLtMatmulMatrixScale_t,
// NVIDIA's answers in github.com/NVIDIA/CUDALibrarySamples issues 270 and 310, and the cuBLAS
// 12.9 blog "Boosting Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9").
// In our TN mapping A = W (k x n column-major) and B = x (k x m column-major); the GEMM is
// D = alpha * (A scaled) (B scaled), accumulated in f32, D written in its own type:
//   OUTER_VEC_32F        A: f32 [n] (one per output channel), B: f32 [m] (one per token);
//                        element (i, j) of the product times A_scale[i] * B_scale[j]
//                        (cublasLt.h's definition of the mode).
//   VEC128_32F (B = x)   one f32 per 128 consecutive k of each token, ceil(k/128) x m with the
//                        token index contiguous: scale[g * m + t] ("outer-dim-major", as
//                        PyTorch's ScaledBlas.cpp is_blockwise_1x128_scaling requires for the
//                        same operand: shape (M, ceil(K/128)), strides (1, M)).
//   BLK128x128_32F (A=W) one f32 per 128x128 tile, the k-tile index contiguous, rows of
//                        round_up(ceil(k/128), 4) floats: scale[(r/128) * ld + c/128]. The
//                        padding to 16 bytes is NVIDIA's sample's size
//                        (CUDALibrarySamples cuBLASLt/Common/helpers.h getScaleTensorSize:
//                        roundoff(ceildiv(inner, 128), 4) * ceildiv(outer, 128)); PyTorch asks
//                        for "16-byte aligned strides" for the same tensor.
// fp8 requirements (cuBLAS docs, cublasLtMatmul "To use FP8 kernels"): A transposed and B not
// ("TN"), compute type CUBLAS_COMPUTE_32F, scale type CUDA_R_32F, 16-byte aligned pointers and
// leading dimensions; PyTorch's _scaled_mm checks k % 16 and n % 16 and lets m be anything.
// Fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM) stays off: PyTorch refuses it with
// block scales, and it would drop the periodic f32 promotion the bounds assume.
// Determinism (CUDALibrarySamples issue 243, NVIDIA's answer): mask every reduction scheme but
// CUBLASLT_REDUCTION_SCHEME_NONE (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK); we also reject
// an answer whose CUBLASLT_ALGO_CONFIG_SPLITK_NUM is not 1. cuBLASLt 13.1's header has no
// stream-K attribute: pinning one algorithm (and cuda_deterministic_test on a GPU) covers it.

namespace tpserve::cuda {
namespace {

constexpr int64_t kWorkspaceBytes = 32 << 20;  // what NVIDIA suggests for Hopper
constexpr int kHeuristicResults = 8;

cudaDataType_t DataType(GemmType t) {
  switch (t) {
    case GemmType::kF32: return CUDA_R_32F;
    case GemmType::kF16: return CUDA_R_16F;
    case GemmType::kBF16: return CUDA_R_16BF;
    case GemmType::kE4M3: return CUDA_R_8F_E4M3;
  }
  return CUDA_R_32F;
}

int32_t ScaleMode(GemmScale s) {
  switch (s) {
    case GemmScale::kNone: return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    case GemmScale::kOuterVec: return CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    case GemmScale::kVec128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case GemmScale::kBlock128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  }
  return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

std::string Problem(const GemmArgs& g) {
  return StrCat(GemmTypeName(g.type), " x ", GemmTypeName(g.type), " -> ", GemmTypeName(g.out),
                " (scales ", GemmScaleName(g.w_scale), "/", GemmScaleName(g.x_scale), ") m=", g.m,
                " n=", g.n, " k=", g.k, " ldw=", g.ldw, " ldx=", g.ldx, " ldy=", g.ldy);
}

template <typename T>
T AlgoConfig(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written);
  return value;
}

// An algorithm whose dot products are each summed in one sequence: no split-K, no reduction.
bool WithoutReduction(const cublasLtMatmulAlgo_t& algo) {
  return AlgoConfig<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) <= 1 &&
         AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) ==
             CUBLASLT_REDUCTION_SCHEME_NONE;
}

std::string AlgoString(const cublasLtMatmulAlgo_t& algo) {
  return StrCat("id ", AlgoConfig<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID), " tile ",
                AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), " stages ",
                AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID), " split-k ",
                AlgoConfig<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), " reduction ",
                AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), " swizzle ",
                AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), " custom ",
                AlgoConfig<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), " cluster ",
                AlgoConfig<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

// The call's weight (A) and activation (B) scale pointers on a scaled GEMM's descriptor.
absl::Status SetScalePointers(const GemmArgs& g, cublasLtMatmulDesc_t desc) {
  const void* a_scale = g.w_scales;
  const void* b_scale = g.x_scales;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof(a_scale))));
  return TPK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                   &b_scale, sizeof(b_scale)));
}

// The call's bias on a descriptor whose epilogue adds one.
absl::Status SetBiasPointer(const GemmArgs& g, cublasLtMatmulDesc_t desc) {
  const void* bias = g.bias;
  return TPK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &bias, sizeof(bias)));
}

}  // namespace

struct CublasLtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  absl::Status usable;  // not OK: cached refusal, returned by every call of this problem

  ~Plan() {
    if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

struct CublasLtGemm::Pinned {
  cublasLtMatmulAlgo_t algo{};
  absl::Status usable;
  std::string description;
};

CublasLtGemm::CublasLtGemm(CublasLtGemmOptions options) : options_(options) {}

absl::StatusOr<std::unique_ptr<CublasLtGemm>> CublasLtGemm::Create(CublasLtGemmOptions options) {
  std::unique_ptr<CublasLtGemm> gemm(new CublasLtGemm(options));
  cublasLtHandle_t handle = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtCreate(&handle)));
  gemm->handle_ = handle;
  const cudaError_t err = cudaMalloc(&gemm->workspace_, kWorkspaceBytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    gemm->workspace_ = nullptr;
    return absl::ResourceExhaustedError(
        StrCat("cuBLASLt workspace: cannot allocate ", kWorkspaceBytes, " bytes"));
  }
  gemm->workspace_bytes_ = kWorkspaceBytes;
  return gemm;
}

CublasLtGemm::~CublasLtGemm() {
  plans_.clear();
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

absl::Status CublasLtGemm::MakeDescriptors(const GemmArgs& g, int64_t m, int64_t n, int64_t k,
                                           int64_t ldw, int64_t ldx, int64_t ldy, Plan* plan) {
  // f32 accumulation and f32 alpha/beta for every type (plain f32 inputs: no TF32).
  TP_RETURN_IF_ERROR(
      TPK_CUBLAS(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa))));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb))));
  if (g.w_scale != GemmScale::kNone || g.x_scale != GemmScale::kNone) {
    const int32_t a_mode = ScaleMode(g.w_scale), b_mode = ScaleMode(g.x_scale);
    TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode))));
    TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode))));
    // The heuristic wants the scale pointers present; Run sets each call's.
    TP_RETURN_IF_ERROR(SetScalePointers(g, plan->desc));
  }
  if (g.bias != nullptr) {
    // An f32 bias whatever y's type: added to the f32 sums before y is rounded, as the CPU
    // backend and the GEMVs do. A cuBLASLt without that combination finds no algorithm
    // (kUnimplemented), and CudaMatMul then adds the bias in a pass of its own.
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    const int32_t bias_type = CUDA_R_32F;
    TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue))));
    TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type))));
    TP_RETURN_IF_ERROR(SetBiasPointer(g, plan->desc));
  }
  const cudaDataType_t in = DataType(g.type), out = DataType(g.out);
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->a, in, k, n, ldw)));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->b, in, k, m, ldx)));
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatrixLayoutCreate(&plan->c, out, n, m, ldy)));
  return absl::OkStatus();
}

absl::Status CublasLtGemm::FindAlgorithm(const GemmArgs& g, const GemmRequest& r, Plan* plan) {
  cublasLtMatmulPreference_t pref = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref)));
  const uint64_t workspace = static_cast<uint64_t>(workspace_bytes_);
  const uint32_t align_w = r.align_w, align_x = r.align_x, align_y = r.align_y;
  const uint32_t reductions =
      r.reductions_allowed ? CUBLASLT_REDUCTION_SCHEME_MASK : CUBLASLT_REDUCTION_SCHEME_NONE;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, const uint32_t*> u32_prefs[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_y},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_y},
      {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions}};
  absl::Status st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  for (const auto& [attr, value] : u32_prefs) {
    if (st.ok()) {
      st = TPK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, value, sizeof(*value)));
    }
  }
  cublasLtMatmulHeuristicResult_t results[kHeuristicResults] = {};
  int found = 0;
  if (st.ok()) {
    st = TPK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_),
                                                   plan->desc, plan->a, plan->b, plan->c, plan->c,
                                                   pref, kHeuristicResults, results, &found));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  // NOT_SUPPORTED from the heuristic (an unsupported scale mode, say) means "no algorithm".
  if (st.code() == absl::StatusCode::kUnimplemented) {
    found = 0;
  } else {
    TP_RETURN_IF_ERROR(st);
  }
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
    if (!r.reductions_allowed && !WithoutReduction(results[i].algo)) continue;
    plan->algo = results[i].algo;
    return absl::OkStatus();
  }
  return absl::UnimplementedError(StrCat("cuBLASLt has no algorithm",
                                         r.reductions_allowed ? "" : " without split-K", " for ",
                                         Problem(g), " (asked: ", GemmRequestString(r), ")"));
}

absl::Status CublasLtGemm::PinnedAlgorithm(const GemmArgs& g, const GemmRequest& r, Plan* plan) {
  const PinKey pin_key{static_cast<int>(r.type), static_cast<int>(r.out),
                       static_cast<int>(r.w_scale), static_cast<int>(r.x_scale), r.bias};
  auto it = pinned_.find(pin_key);
  if (it == pinned_.end()) {
    // The heuristic's answer for the fixed query problem, kept for every shape.
    auto pin = std::make_unique<Pinned>();
    Plan query;
    pin->usable = MakeDescriptors(g, r.query_m, r.query_n, r.query_k, r.query_ldw, r.query_ldx,
                                  r.query_ldy, &query);
    if (pin->usable.ok()) pin->usable = FindAlgorithm(g, r, &query);
    if (pin->usable.ok()) {
      pin->algo = query.algo;
      pin->description = AlgoString(pin->algo);
      std::fprintf(stderr, "CublasLtGemm: deterministic %s pinned to algorithm %s\n",
                   GemmRequestString(r).c_str(), pin->description.c_str());
    }
    it = pinned_.emplace(pin_key, std::move(pin)).first;
  }
  const Pinned& pin = *it->second;
  TP_RETURN_IF_ERROR(pin.usable);
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t st =
      cublasLtMatmulAlgoCheck(static_cast<cublasLtHandle_t>(handle_), plan->desc, plan->a, plan->b,
                              plan->c, plan->c, &pin.algo, &check);
  if (st != CUBLAS_STATUS_SUCCESS || check.workspaceSize > static_cast<size_t>(workspace_bytes_)) {
    return absl::FailedPreconditionError(
        StrCat("deterministic GEMM: the pinned algorithm (", pin.description, ") does not take ",
               Problem(g), ": ",
               CublasCallStatus(st, "cublasLtMatmulAlgoCheck", __FILE__, __LINE__).message(),
               " (workspace ", check.workspaceSize, " of ", workspace_bytes_, " bytes)"));
  }
  plan->algo = pin.algo;
  return absl::OkStatus();
}

absl::StatusOr<CublasLtGemm::Plan*> CublasLtGemm::GetPlan(const GemmArgs& g, const GemmRequest& r) {
  if (r.pinned &&
      (PointerAlignment(g.w) < 16 || PointerAlignment(g.x) < 16 || PointerAlignment(g.y) < 16)) {
    return absl::FailedPreconditionError(
        StrCat("deterministic GEMM needs 16-byte aligned operands; ", Problem(g), " has ",
               PointerAlignment(g.w), "/", PointerAlignment(g.x), "/", PointerAlignment(g.y)));
  }
  const Key key{static_cast<int>(g.type),
                static_cast<int>(g.out),
                static_cast<int>(g.w_scale),
                static_cast<int>(g.x_scale),
                g.bias != nullptr,
                g.m,
                g.n,
                g.k,
                g.ldw,
                g.ldx,
                g.ldy,
                PointerAlignment(g.w),
                PointerAlignment(g.x),
                PointerAlignment(g.y)};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto plan = std::make_unique<Plan>();
    plan->usable = MakeDescriptors(g, g.m, g.n, g.k, g.ldw, g.ldx, g.ldy, plan.get());
    if (plan->usable.ok()) {
      plan->usable = r.pinned ? PinnedAlgorithm(g, r, plan.get()) : FindAlgorithm(g, r, plan.get());
    }
    it = plans_.emplace(key, std::move(plan)).first;
  }
  TP_RETURN_IF_ERROR(it->second->usable);
  return it->second.get();
}

absl::Status CublasLtGemm::Check(const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return absl::OkStatus();
  return GetPlan(g, MakeGemmRequest(g, options_.deterministic)).status();
}

absl::Status CublasLtGemm::Run(const GemmArgs& g, void* stream) {
  if (g.m <= 0 || g.n <= 0) return absl::OkStatus();
  TP_ASSIGN_OR_RETURN(Plan * plan, GetPlan(g, MakeGemmRequest(g, options_.deterministic)));
  if (g.w_scale != GemmScale::kNone || g.x_scale != GemmScale::kNone) {
    TP_RETURN_IF_ERROR(SetScalePointers(g, plan->desc));
  }
  if (g.bias != nullptr) TP_RETURN_IF_ERROR(SetBiasPointer(g, plan->desc));
  const float alpha = 1.0f, beta = 0.0f;
  return TPK_CUBLAS(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan->desc, &alpha, g.w,
                                   plan->a, g.x, plan->b, &beta, g.y, plan->c, g.y, plan->c,
                                   &plan->algo, workspace_, static_cast<size_t>(workspace_bytes_),
                                   static_cast<cudaStream_t>(stream)));
}

}  // namespace tpserve::cuda
