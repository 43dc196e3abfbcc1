#include "kernels/cuda/flashinfer/flashinfer_attention.h"

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/flashinfer/plan.h"
#include "kernels/cuda/guarded_launch.h"

namespace tpserve::cuda {
namespace {

absl::Status Allocate(void** p, int64_t bytes, const char* what) {
  if (bytes <= 0) return absl::OkStatus();
  const cudaError_t err = cudaMalloc(p, static_cast<size_t>(bytes));
  if (err == cudaSuccess) return absl::OkStatus();
  cudaGetLastError();
  *p = nullptr;
  return absl::ResourceExhaustedError(
      StrCat("FlashInfer ", what, ": cannot allocate ", bytes, " bytes (", cudaGetErrorString(err),
             ")"));
}

// A plan's result: -1 with FlashInfer's message (it throws on a bad batch or a workspace too
// small), else a cudaError_t.
absl::Status PlanStatus(const char* call, int code, const std::string& message) {
  if (code == -1) return absl::InternalError(StrCat("FlashInfer ", call, ": ", message));
  return CudaCallStatus(code, call, __FILE__, __LINE__);
}

// A batch's shape for messages: "412 rows in 9 requests, heads 16/2, head_dim 128, page 16".
std::string ShapeText(const fi::PagedBatch& b) {
  return StrCat(b.num_rows, " rows in ", b.num_requests, " requests, heads ", b.num_qo_heads, "/",
                b.num_kv_heads, ", head_dim ", b.head_dim, ", page ", b.page_size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FlashInferAttention>> FlashInferAttention::Create(
    const AttentionLimits& limits, bool fa3, const std::atomic<bool>* abort) {
  if (AttentionKernelsFor(limits.kv_dtype, limits.head_dim, limits.compute_capability) !=
      AttentionKernels::kFlashInfer) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer attention is not built for KV ", DTypeName(limits.kv_dtype),
               ", head_dim ", limits.head_dim, " on compute capability ",
               limits.compute_capability));
  }
  std::unique_ptr<FlashInferAttention> a(new FlashInferAttention(limits, fa3, abort));
  cudaEvent_t uploaded = nullptr;
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming)));
  a->uploaded_ = uploaded;
  a->types_ = limits.kv_dtype == DType::kF8E4M3 ? fi::FiTypes::kBf16Fp8
              : limits.kv_dtype == DType::kF16  ? fi::FiTypes::kF16
                                                : fi::FiTypes::kBf16;
  const AttentionWorkspace& w = a->workspace_;
  TP_RETURN_IF_ERROR(Allocate(&a->float_ws_, w.float_bytes, "split-key partials"));
  for (int i = 0; i < 2; ++i) {
    TP_RETURN_IF_ERROR(Allocate(&a->int_ws_[i], w.int_bytes, "work lists"));
    TP_RETURN_IF_ERROR(
        TPK_CUDA(cudaHostAlloc(&a->int_host_[i], w.int_bytes, cudaHostAllocDefault)));
  }
  TP_RETURN_IF_ERROR(Allocate(&a->convert_, w.convert_bytes, "f16 query and output"));
  return a;
}

FlashInferAttention::~FlashInferAttention() {
  if (uploaded_ != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(uploaded_));
  if (float_ws_ != nullptr) cudaFree(float_ws_);
  for (int i = 0; i < 2; ++i) {
    if (int_ws_[i] != nullptr) cudaFree(int_ws_[i]);
    if (int_host_[i] != nullptr) cudaFreeHost(int_host_[i]);
  }
  if (convert_ != nullptr) cudaFree(convert_);
}

bool FlashInferAttention::PlanServes(const fi::FiScoring& scoring) const {
  return fi::PlanServes(use_fa3_, fa2_requests_ > 0 && fa2_splits_keys_, scoring);
}

absl::Status FlashInferAttention::Plan(const PackedStep& packed, bool cuda_graph,
                                       const fi::PlanConstraints& constraints, void* stream) {
  const DeviceStep& c = packed.counts;
  num_requests_ = c.num_seqs;
  num_rows_ = c.num_rows;
  zero_padding_ = cuda_graph || c.num_padding > 0;
  fa2_requests_ = 0;
  fa2_rows_ = 0;
  use_fa3_ = false;
  fa2_splits_keys_ = false;
  if (num_requests_ == 0) return absl::OkStatus();
  if (!c.fi_rows_in_order) {
    return absl::InvalidArgumentError(
        "FlashInfer attention: the step's sequences do not cover its rows in order");
  }
  if (num_rows_ > limits_.max_tokens_per_step || num_requests_ > limits_.max_tokens_per_step) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer attention: a step of ", num_rows_, " rows, more than the ",
               limits_.max_tokens_per_step, " its workspace was sized for"));
  }
  // The last plan's copies must have read the pinned buffers before they are rewritten.
  TP_RETURN_IF_ERROR(WaitForEvent(uploaded_, "the last attention plan's upload", abort_));
  const int32_t* qo_indptr = packed.words.data() + packed.offset_fi_qo_indptr;
  const int32_t* kv_indptr = packed.words.data() + packed.offset_fi_kv_indptr;
  const int32_t* kv_len = packed.words.data() + packed.offset_fi_kv_len;
  const int32_t page = static_cast<int32_t>(limits_.page_size);
  if (limits_.deterministic) return PlanDeterministic(packed, constraints.no_split_keys, stream);
  // Route: leading one-row requests to FA2, the rest to FA3 (see the header).
  int32_t leading_decodes = 0;
  while (leading_decodes < num_requests_ &&
         qo_indptr[leading_decodes + 1] - qo_indptr[leading_decodes] == 1) {
    ++leading_decodes;
  }
  use_fa3_ = !cuda_graph && !constraints.no_fa3 && fa3_available_ &&
             fi::Fa3Built(types_, limits_.head_dim) && leading_decodes < num_requests_;
  fa2_requests_ = use_fa3_ ? leading_decodes : num_requests_;
  fa2_rows_ = qo_indptr[fa2_requests_];

  fi::PlanRequest r;
  r.num_qo_heads = static_cast<int32_t>(limits_.num_qo_heads);
  r.num_kv_heads = static_cast<int32_t>(limits_.num_kv_heads);
  r.head_dim = static_cast<int32_t>(limits_.head_dim);
  r.page_size = page;
  r.kv_bytes = limits_.kv_dtype == DType::kF8E4M3 ? 1 : 2;
  std::string error;
  if (fa2_requests_ > 0) {
    // FlashInfer's FA2 scheduler reads key counts as whole pages.
    std::vector<int32_t> pages(fa2_requests_ + 1, 0);
    for (int32_t b = 0; b < fa2_requests_; ++b) {
      pages[b + 1] = pages[b] + (kv_len[b] + page - 1) / page;
    }
    r.qo_indptr = qo_indptr;
    r.kv_page_indptr = pages.data();
    r.num_requests = fa2_requests_;
    r.num_rows = fa2_rows_;
    r.cuda_graph = cuda_graph;
    r.no_split_keys = constraints.no_split_keys;
    const fi::PlanWorkspace ws{float_ws_, workspace_.float_bytes, int_ws_[0], int_host_[0],
                               workspace_.int_bytes};
    const int code = fi::PlanFa2(r, ws, stream, &fa2_plan_, &error);
    if (code != 0) return PlanStatus("PlanFa2", code, error);
    fa2_splits_keys_ = fa2_plan_.split_kv;
  }
  if (use_fa3_) {
    // FA3's work items carry absolute row and page offsets, so its requests are a suffix of the
    // step's arrays; its q and output tensors are the whole step's.
    r.qo_indptr = qo_indptr + fa2_requests_;
    r.kv_indptr = kv_indptr + fa2_requests_;
    r.kv_len = kv_len + fa2_requests_;
    r.num_requests = num_requests_ - fa2_requests_;
    r.num_rows = num_rows_ - fa2_rows_;
    r.cuda_graph = false;
    r.no_split_keys = false;
    const fi::PlanWorkspace ws{nullptr, 0, int_ws_[1], int_host_[1], workspace_.int_bytes};
    const int code = fi::PlanFa3(r, ws, stream, &fa3_plan_, &error);
    if (code != 0) return PlanStatus("PlanFa3", code, error);
  }
  return TPK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(uploaded_),
                                  static_cast<cudaStream_t>(stream)));
}

absl::Status FlashInferAttention::PlanDeterministic(const PackedStep& packed, bool no_split_keys,
                                                    void* stream) {
  // Every row its own request: FlashInfer's query tile then depends on the group size alone,
  // and its key chunks on the fixed split size alone (attention_workspace.h).
  const int32_t* row_kv_len = packed.words.data() + packed.offset_fi_row_kv_len;
  const int32_t page = static_cast<int32_t>(limits_.page_size);
  std::vector<int32_t> rows(num_rows_ + 1), pages(num_rows_ + 1, 0);
  for (int32_t r = 0; r <= num_rows_; ++r) rows[r] = r;
  for (int32_t r = 0; r < num_rows_; ++r) {
    pages[r + 1] = pages[r] + (row_kv_len[r] + page - 1) / page;
  }
  fi::PlanRequest req;
  req.qo_indptr = rows.data();
  req.kv_page_indptr = pages.data();
  req.num_requests = num_rows_;
  req.num_rows = num_rows_;
  req.num_qo_heads = static_cast<int32_t>(limits_.num_qo_heads);
  req.num_kv_heads = static_cast<int32_t>(limits_.num_kv_heads);
  req.head_dim = static_cast<int32_t>(limits_.head_dim);
  req.page_size = page;
  req.kv_bytes = limits_.kv_dtype == DType::kF8E4M3 ? 1 : 2;
  req.fixed_split_pages = static_cast<int32_t>(
      DeterministicChunkTokens(limits_.max_context, limits_.page_size) / limits_.page_size);
  // Unsplit, a row's floats still depend on its own query and keys alone.
  req.no_split_keys = no_split_keys;
  const fi::PlanWorkspace ws{float_ws_, workspace_.float_bytes, int_ws_[0], int_host_[0],
                             workspace_.int_bytes};
  std::string error;
  const int code = fi::PlanFa2(req, ws, stream, &fa2_plan_, &error);
  if (code != 0) return PlanStatus("PlanFa2 (deterministic)", code, error);
  fa2_requests_ = num_rows_;
  fa2_rows_ = num_rows_;
  fa2_splits_keys_ = fa2_plan_.split_kv;
  return TPK_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(uploaded_),
                                  static_cast<cudaStream_t>(stream)));
}

absl::Status FlashInferAttention::Run(const void* q, int64_t num_heads, float scale,
                                      const fi::FiScoring& scoring, const DeviceKvPool& pool,
                                      const DeviceStep& step, void* out, void* stream) {
  if (num_requests_ == 0) return absl::OkStatus();
  if (!PlanServes(scoring)) {
    return absl::FailedPreconditionError(StrCat(
        "FlashInfer attention: the step's plan (", use_fa3_ ? "FA3 for prompts" : "FA2 only",
        fa2_splits_keys_ ? ", split keys" : "", ") cannot run window_left ",
        scoring.window_left, ", logits_soft_cap ", scoring.logits_soft_cap,
        "; plan under PlanConstraintsFor"));
  }
  if (num_heads != limits_.num_qo_heads || pool.num_kv_heads != limits_.num_kv_heads ||
      pool.head_dim != limits_.head_dim || pool.block_size != limits_.page_size) {
    return absl::InvalidArgumentError(
        StrCat("FlashInfer attention: called with ", num_heads, " heads over ",
               pool.num_kv_heads, " KV heads of ", pool.head_dim, " in blocks of ",
               pool.block_size, "; reserved for ", limits_.num_qo_heads, " over ",
               limits_.num_kv_heads, " of ", limits_.head_dim, " in blocks of ",
               limits_.page_size));
  }
  const int64_t elems = static_cast<int64_t>(num_rows_) * num_heads * limits_.head_dim;
  fi::PagedBatch b;
  b.q = q;
  b.o = out;
  if (types_ == fi::FiTypes::kF16) {
    b.q = convert_;
    b.o = static_cast<uint16_t*>(convert_) + elems;
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchConvertBf16(q, elems, /*out_f16=*/true, convert_,
                                                    stream)));
  }
  b.k_pool = pool.k;
  b.v_pool = pool.v;
  b.num_qo_heads = static_cast<int32_t>(num_heads);
  b.num_kv_heads = static_cast<int32_t>(pool.num_kv_heads);
  b.head_dim = static_cast<int32_t>(pool.head_dim);
  b.page_size = static_cast<int32_t>(pool.block_size);
  const bool per_row = limits_.deterministic;
  b.q_indptr = per_row ? step.fi_row_qo_indptr : step.fi_qo_indptr;
  b.kv_indptr = per_row ? step.fi_row_kv_indptr : step.fi_kv_indptr;
  b.kv_indices = step.block_tables;
  b.kv_len = per_row ? step.fi_row_kv_len : step.fi_kv_len;
  // e4m3: K = code * k_scale, so q.K = k_scale * q.code; the soft-cap variant divides this
  // scale by the cap, which keeps cap * tanh(scale * q.K / cap).
  b.sm_scale = types_ == fi::FiTypes::kBf16Fp8 ? scale * pool.k_scale : scale;
  b.scoring = scoring;
  if (fa2_requests_ > 0) {
    b.num_requests = fa2_requests_;
    b.num_rows = fa2_rows_;
    TP_RETURN_IF_ERROR(GuardedLaunch("FlashInfer FA2", ShapeText(b),
                                     [&] { return fi::RunFa2(types_, b, fa2_plan_, stream); }));
  }
  if (use_fa3_) {
    b.num_requests = num_requests_ - fa2_requests_;
    b.num_rows = num_rows_;  // FA3's tensors span the step; its work items name the rows
    TP_RETURN_IF_ERROR(GuardedLaunch("FlashInfer FA3", ShapeText(b),
                                     [&] { return fi::RunFa3(types_, b, fa3_plan_, stream); }));
  }
  const int64_t row_elems = num_heads * limits_.head_dim;
  if (types_ == fi::FiTypes::kF16) {
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchF16ToBf16(b.o, elems, out, stream)));
  }
  if (types_ == fi::FiTypes::kBf16Fp8 && pool.v_scale != 1.0f) {
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchScaleBf16(out, elems, pool.v_scale, stream)));
  }
  if (!zero_padding_) return absl::OkStatus();
  return TPK_LAUNCH(LaunchZeroPaddingRows(out, row_elems, step, stream));
}

}  // namespace tpserve::cuda
