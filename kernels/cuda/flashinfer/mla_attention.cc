#include "kernels/cuda/flashinfer/mla_attention.h"

#include <cuda_runtime_api.h>

#include <string>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/guarded_launch.h"
#include "kernels/cuda/mla_plan.h"

namespace tpserve::cuda {
namespace {

absl::Status Allocate(void **p, int64_t bytes, const char *what) {
  if (bytes <= 0) return absl::OkStatus();
  const cudaError_t err = cudaMalloc(p, static_cast<size_t>(bytes));
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  *p = nullptr;
  return absl::ResourceExhaustedError(StrCat("FlashInfer MLA ", what, ": cannot allocate ", bytes,
                                             " bytes (", cudaGetErrorString(err), ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MlaAttention>> MlaAttention::Create(const AttentionLimits &limits,
                                                                   const std::atomic<bool> *abort) {
  if (AttentionKernelsFor(limits.kv_dtype, limits.head_dim, limits.compute_capability) !=
          AttentionKernels::kMla ||
      limits.num_kv_heads != 1) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer MLA is built for one latent head of ", kMlaEntryDim,
               " (KV bf16 or fp8) on "
               "compute capability 90; asked for ",
               limits.num_kv_heads, " KV heads of ", limits.head_dim, ", KV ",
               DTypeName(limits.kv_dtype), " on compute capability ", limits.compute_capability));
  }
  if (limits.deterministic) {
    return absl::InvalidArgumentError(
        "FlashInfer MLA has no deterministic plan (MLAPlan splits keys by the "
        "batch's total)");
  }
  const int64_t works = MlaWorkBoundWithin(limits.max_tokens_per_step, limits.max_decode_rows,
                                           limits.num_qo_heads, limits.num_sms);
  if (works > kMlaMaxWorks) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer MLA: a step of ", limits.max_tokens_per_step, " rows x ",
               limits.num_qo_heads, " heads may need ", works, " work items, more than MLAPlan's ",
               kMlaMaxWorks, "; lower the step's token budget"));
  }
  std::unique_ptr<MlaAttention> a(new MlaAttention(limits, abort));
  cudaEvent_t uploaded = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming)));
  a->uploaded_ = uploaded;
  const AttentionWorkspace &w = a->workspace_;
  TP_RETURN_IF_ERROR(Allocate(&a->float_ws_, w.float_bytes, "split partials"));
  TP_RETURN_IF_ERROR(Allocate(&a->int_ws_, w.int_bytes, "work lists"));
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaHostAlloc(&a->int_host_, w.int_bytes, cudaHostAllocDefault)));
  return a;
}

MlaAttention::~MlaAttention() {
  if (uploaded_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(uploaded_));
  if (float_ws_ != nullptr) cudaFree(float_ws_);
  if (int_ws_ != nullptr) cudaFree(int_ws_);
  if (int_host_ != nullptr) cudaFreeHost(int_host_);
}

absl::Status MlaAttention::Plan(const PackedStep &packed, void *stream) {
  const DeviceStep &c = packed.counts;
  num_requests_ = c.num_seqs;
  num_rows_ = c.num_rows;
  has_padding_ = c.num_padding > 0;
  if (num_requests_ == 0) return absl::OkStatus();
  if (!c.fi_rows_in_order) {
    return absl::InvalidArgumentError(
        "FlashInfer MLA: the step's sequences do not cover its rows in order");
  }
  if (num_rows_ > limits_.max_tokens_per_step || num_requests_ > limits_.max_decode_rows) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer MLA: a step of ", num_rows_, " rows in ", num_requests_,
               " sequences, more than the ", limits_.max_tokens_per_step, " rows and ",
               limits_.max_decode_rows, " sequences its workspace was sized for"));
  }
  const int32_t *qo_indptr = packed.words.data() + packed.offset_fi_qo_indptr;
  const int64_t works =
      MlaWorkBound(qo_indptr, num_requests_, limits_.num_qo_heads, limits_.num_sms);
  if (works > kMlaMaxWorks) {  // MLAPlan would write past its work lists
    return absl::InvalidArgumentError(StrCat("FlashInfer MLA: the step may need ", works,
                                             " work items, more than MLAPlan's ", kMlaMaxWorks));
  }
  // The last plan's copy must have read the pinned buffer before it is
  // rewritten.
  TP_RETURN_IF_ERROR(WaitForEvent(uploaded_, "the last MLA plan's upload", abort_));
  fi::MlaPlanRequest r;
  r.qo_indptr = qo_indptr;
  r.kv_indptr = packed.words.data() + packed.offset_fi_kv_indptr;
  r.kv_len = packed.words.data() + packed.offset_fi_kv_len;
  r.num_requests = num_requests_;
  r.num_heads = static_cast<int32_t>(limits_.num_qo_heads);
  const fi::PlanWorkspace ws{float_ws_, workspace_.float_bytes, int_ws_, int_host_,
                             workspace_.int_bytes};
  std::string error;
  const int code = fi::PlanMla(r, ws, stream, &plan_, &error);
  if (code == -1) return absl::InternalError(StrCat("FlashInfer MLAPlan: ", error));
  TP_RETURN_IF_ERROR(CudaCallStatus(code, "PlanMla", __FILE__, __LINE__));
  return TPK_CUDA(
      cudaEventRecord(static_cast<cudaEvent_t>(uploaded_), static_cast<cudaStream_t>(stream)));
}

absl::Status MlaAttention::Run(const void *q, int64_t num_heads, float scale,
                               const DeviceKvPool &pool, const DeviceStep &step, void *out,
                               void *stream) {
  if (num_requests_ == 0) return absl::OkStatus();
  const bool fp8 = limits_.kv_dtype == DType::kF8E4M3;
  if (num_heads != limits_.num_qo_heads || !IsLatentPool(pool.num_kv_heads, pool.head_dim) ||
      pool.block_size != limits_.page_size || (pool.kind == KvKind::kFp8) != fp8) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer MLA: called with ", num_heads, " heads over ", pool.num_kv_heads,
               " KV heads of ", pool.head_dim, " in blocks of ", pool.block_size, "; reserved for ",
               limits_.num_qo_heads, " heads over one latent head of ", kMlaEntryDim,
               " in blocks of ", limits_.page_size, ", KV ", DTypeName(limits_.kv_dtype)));
  }
  if (fp8 && pool.k_scale != pool.v_scale) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer MLA: an e4m3 latent cache has one scale (keys are "
               "values), got k_scale ",
               pool.k_scale, " and v_scale ", pool.v_scale));
  }
  fi::MlaBatch b;
  b.q = q;
  b.o = out;
  b.pool = pool.k;
  b.num_heads = static_cast<int32_t>(num_heads);
  b.page_size = static_cast<int32_t>(pool.block_size);
  b.kv_indices = step.block_tables;
  b.sm_scale = scale;
  b.kv_scale = fp8 ? pool.k_scale : 1.0f;
  TP_RETURN_IF_ERROR(GuardedLaunch(
      fp8 ? "FlashInfer MLA (e4m3 latent)" : "FlashInfer MLA (bf16 latent)",
      StrCat(num_rows_, " rows, ", num_heads, " heads, page ", pool.block_size),
      [&] { return fp8 ? fi::RunMlaFp8(b, plan_, stream) : fi::RunMlaBf16(b, plan_, stream); }));
  // FlashInfer writes 512 values per head; the rope part of each head's output
  // is zeros, so nothing downstream ever reads stale memory (2 bytes per bf16).
  const int64_t head_bytes = kMlaEntryDim * 2;
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemset2DAsync(
      static_cast<char *>(out) + kMlaCkvDim * 2, head_bytes, 0, kMlaKpeDim * 2,
      static_cast<size_t>(num_rows_) * num_heads, static_cast<cudaStream_t>(stream))));
  if (!has_padding_) return absl::OkStatus();
  return TPK_LAUNCH(LaunchZeroPaddingRows(out, num_heads * kMlaEntryDim, step, stream));
}

}  // namespace tpserve::cuda
