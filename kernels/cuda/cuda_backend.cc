#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <utility>
#include <cstring>
#include <string>

#include "formats/str_cat.h"
#include "base/status_macros.h"
#include "kernels/check.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/step_metadata.h"

namespace tpserve {
namespace {

using cuda::DeviceScratch;

cuda::KvKind ToKvKind(DType dtype) {
  switch (dtype) {
    case DType::kF32: return cuda::KvKind::kF32;
    case DType::kF16: return cuda::KvKind::kF16;
    case DType::kBF16: return cuda::KvKind::kBF16;
    case DType::kF8E4M3: return cuda::KvKind::kFp8;
    default: TP_CHECK(false, "not a KV cache dtype");
  }
  return cuda::KvKind::kF16;
}

cuda::DeviceKvPool ToDevicePool(const KvPoolView& p) {
  cuda::DeviceKvPool d;
  d.k = p.k;
  d.v = p.v;
  d.kind = ToKvKind(p.dtype);
  d.k_scale = p.k_scale;
  d.v_scale = p.v_scale;
  d.num_blocks = p.num_blocks;
  d.block_size = p.block_size_tokens;
  d.num_kv_heads = p.num_kv_heads;
  d.head_dim = p.head_dim;
  return d;
}

// TPSERVE_CUDA_CHECK=1: wait after every op and name the op in any device error (slow; for
// tests and debugging). Otherwise asynchronous faults surface at the next Synchronize.
bool CheckEachOpFromEnv() {
  const char* v = std::getenv("TPSERVE_CUDA_CHECK");
  return v != nullptr && std::string(v) == "1";
}

// TPSERVE_CUDA_GRAPHS=1: RunCaptured records CUDA graphs (off by default until measured on a
// GPU; see README.md). Check mode turns them off: it waits after every op.
bool GraphsFromEnv() {
  const char* v = std::getenv("TPSERVE_CUDA_GRAPHS");
  return v != nullptr && std::string(v) == "1" && !CheckEachOpFromEnv();
}

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(int ordinal);
  ~CudaBackend() override;

  std::string_view name() const override { return name_; }
  BackendKind kind() const override { return BackendKind::kCuda; }
  DType activation_dtype() const override { return DType::kBF16; }
  bool SupportsWeight(const TensorFormat& format) const override {
    return cuda::CudaMatMulSupports(format);
  }
  bool SupportsKvDtype(DType dtype) const override { return IsKvDtype(dtype); }
  bool host_memory() const override { return false; }

  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what) override;
  void CopyToDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, int64_t bytes) override;
  void Copy2D(void* dst, int64_t dst_stride_bytes, const void* src, int64_t src_stride_bytes,
              int64_t row_bytes, int64_t rows) override;
  void FillZero(void* dst, int64_t bytes) override;
  void* stream() const override { return stream_; }
  void Free(void* data, int64_t bytes) override;

  void BeginStep(const StepInputs& step) override;

  void MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype) override;
  void MatMulChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                     float* y) override;
  void SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) override;
  void RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim, float eps,
               void* y) override;
  void Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
            RopeLayout layout) override;
  void SiluMul(const void* gate, const void* up, int64_t count, void* out) override;
  void Add(const void* a, const void* b, int64_t count, void* out) override;
  void EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) override;
  void GatherLogitRows(const void* x, int64_t row_elems, void* out) override;
  void WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) override;
  void PagedAttention(const void* q, int64_t num_heads, float scale, const KvPoolView& pool,
                      void* out) override;
  absl::Status Synchronize() override;
  bool SupportsStepCapture() const override { return graphs_enabled_; }
  absl::Status RunCaptured(const void* owner, int64_t key,
                           absl::FunctionRef<absl::Status()> body) override;
  void ForgetCaptured(const void* owner) override;

 private:
  // One recording per (owner, caller's key, context bucket).
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    int64_t generation = -1;  // scratch_generation_ when recorded
    bool warm = false;        // ran once eagerly: buffers and GEMM plans exist
  };

  CudaBackend(int ordinal, std::string name, int num_sms)
      : ordinal_(ordinal), name_(std::move(name)), num_sms_(num_sms),
        check_each_op_(CheckEachOpFromEnv()), graphs_enabled_(GraphsFromEnv()) {}

  // Makes this backend's device current for the calling thread (ranks may share a process).
  // Not while recording: the capture is this thread's, on this device already.
  void Enter() {
    if (!recording_) Record("cudaSetDevice", TPK_CUDA(cudaSetDevice(ordinal_)));
  }
  // A recording that failed: say so once, run eagerly from then on.
  void DisableGraphs(const absl::Status& why);
  // Keeps the first failure; every later Synchronize and CopyToHost reports it.
  void Record(const char* op, const absl::Status& status);
  // In check mode, waits for `op` and records a device error under its name.
  void Done(const char* op);
  cudaStream_t s() const { return static_cast<cudaStream_t>(stream_); }

  const int ordinal_;
  const std::string name_;
  const int num_sms_;
  const bool check_each_op_;
  bool graphs_enabled_;
  bool recording_ = false;     // inside cudaStreamBeginCapture .. EndCapture
  absl::Status record_error_;  // the first failure while recording (not the backend's)
  bool fixed_plan_ = false;    // inside RunCaptured: attention plans use context_bucket_
  int64_t context_bucket_ = 0;
  int64_t scratch_generation_ = 0;  // bumped whenever a scratch buffer moves
  std::map<std::tuple<const void*, int64_t, int64_t>, Graph> graphs_;
  void* stream_ = nullptr;  // cudaStream_t
  cudaEvent_t upload_done_ = nullptr;  // the step metadata copy has read the staging buffer
  std::unique_ptr<cuda::CudaMatMul> matmul_;
  absl::Status first_error_;

  // Step metadata: packed on the host, staged in pinned memory, one copy to the device.
  cuda::PackedStep packed_;
  void* staging_ = nullptr;
  int64_t staging_bytes_ = 0;
  DeviceScratch step_words_{"step metadata", &scratch_generation_};
  cuda::DeviceStep step_;
  DeviceScratch attention_scratch_{"attention split partials", &scratch_generation_};
};

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(int ordinal) {
  TP_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        StrCat("CUDA device ", ordinal, " requested, but ", count, " are visible"));
  }
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaSetDevice(ordinal)));
  cudaDeviceProp prop;
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaGetDeviceProperties(&prop, ordinal)));
  if (prop.major < 9) {  // the kernels are built for sm_90 (tools/cuda.bzl)
    return absl::FailedPreconditionError(StrCat(
        "CUDA device ", ordinal, " (", prop.name, ") has compute capability ", prop.major, ".",
        prop.minor, "; the CUDA backend is built for 9.0 (Hopper) and newer"));
  }
  std::unique_ptr<CudaBackend> be(new CudaBackend(
      ordinal, StrCat("cuda:", ordinal, " ", prop.name), prop.multiProcessorCount));
  cudaStream_t stream = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream other code may use.
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
  be->stream_ = stream;
  TP_RETURN_IF_ERROR(
      TPK_CUDA(cudaEventCreateWithFlags(&be->upload_done_, cudaEventDisableTiming)));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CublasLtGemm> gemm, cuda::CublasLtGemm::Create());
  be->matmul_ = std::make_unique<cuda::CudaMatMul>(std::move(gemm), &be->scratch_generation_);
  return std::unique_ptr<Backend>(std::move(be));
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(ordinal_);
  if (stream_ != nullptr) cudaStreamSynchronize(s());
  for (auto& [key, graph] : graphs_) {
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }
  matmul_.reset();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  if (upload_done_ != nullptr) cudaEventDestroy(upload_done_);
  if (stream_ != nullptr) cudaStreamDestroy(s());
}

void CudaBackend::Record(const char* op, const absl::Status& status) {
  absl::Status& first = recording_ ? record_error_ : first_error_;
  if (status.ok() || !first.ok()) return;
  first = absl::Status(status.code(), StrCat(name_, " ", op, ": ", status.message()));
}

void CudaBackend::Done(const char* op) {
  if (!check_each_op_ || recording_) return;
  Record(op, TPK_CUDA(cudaStreamSynchronize(s())));
  Record(op, TPK_CUDA(cudaGetLastError()));
}

absl::StatusOr<DeviceBuffer> CudaBackend::Allocate(int64_t bytes, std::string_view what) {
  if (bytes < 0) return absl::InvalidArgumentError(StrCat(what, ": negative size ", bytes));
  Enter();
  void* p = nullptr;
  // At least one byte so every buffer has its own address; cudaMalloc aligns to 256.
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: keep it from the next launch check
    return absl::ResourceExhaustedError(StrCat(what, ": cannot allocate ", bytes,
                                                     " bytes of device memory on ", name_, " (",
                                                     cudaGetErrorString(err), ")"));
  }
  return DeviceBuffer(this, p, bytes);
}

void CudaBackend::Free(void* data, int64_t) {
  Enter();
  Record("Free", TPK_CUDA(cudaFree(data)));
}

void CudaBackend::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  Enter();
  // The caller may reuse `src` on return (it may be pinned, so the copy could otherwise still
  // be reading it): wait for it.
  Record("CopyToDevice", TPK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s())));
  Record("CopyToDevice", TPK_CUDA(cudaStreamSynchronize(s())));
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, int64_t bytes) {
  Enter();
  if (bytes > 0) {
    Record("CopyToHost",
           TPK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s())));
    Record("CopyToHost", TPK_CUDA(cudaStreamSynchronize(s())));
  }
  return first_error_;
}

void CudaBackend::Copy2D(void* dst, int64_t dst_stride_bytes, const void* src,
                         int64_t src_stride_bytes, int64_t row_bytes, int64_t rows) {
  if (rows <= 0 || row_bytes <= 0) return;
  Enter();
  Record("Copy2D", TPK_CUDA(cudaMemcpy2DAsync(dst, dst_stride_bytes, src, src_stride_bytes,
                                              row_bytes, rows, cudaMemcpyDeviceToDevice, s())));
  Done("Copy2D");
}

void CudaBackend::FillZero(void* dst, int64_t bytes) {
  if (bytes <= 0) return;
  Enter();
  Record("FillZero", TPK_CUDA(cudaMemsetAsync(dst, 0, bytes, s())));
  Done("FillZero");
}

void CudaBackend::BeginStep(const StepInputs& step) {
  Enter();
  packed_ = cuda::PackStep(step);
  const int64_t bytes = static_cast<int64_t>(packed_.words.size() * sizeof(int32_t));
  // The previous step's copy must have read the staging buffer before it is rewritten.
  Record("BeginStep", TPK_CUDA(cudaEventSynchronize(upload_done_)));
  if (bytes > staging_bytes_) {
    if (staging_ != nullptr) Record("BeginStep", TPK_CUDA(cudaFreeHost(staging_)));
    staging_ = nullptr;
    staging_bytes_ = 0;
    const int64_t size = std::max<int64_t>(2 * bytes, 1 << 16);
    const absl::Status st = TPK_CUDA(cudaHostAlloc(&staging_, size, cudaHostAllocDefault));
    Record("BeginStep", st);
    if (!st.ok()) {
      staging_ = nullptr;
      return;
    }
    staging_bytes_ = size;
  }
  // 1 MiB at least: a move of this buffer invalidates every recorded step.
  const absl::Status reserved = step_words_.Reserve(std::max<int64_t>(bytes, 1 << 20), s());
  Record("BeginStep", reserved);
  if (!reserved.ok()) return;
  if (bytes > 0) {
    std::memcpy(staging_, packed_.words.data(), bytes);
    Record("BeginStep", TPK_CUDA(cudaMemcpyAsync(step_words_.data(), staging_, bytes,
                                                 cudaMemcpyHostToDevice, s())));
    Record("BeginStep", TPK_CUDA(cudaEventRecord(upload_done_, s())));
  }
  step_ = packed_.Resolve(step_words_.as<const int32_t>());
  Done("BeginStep");
}

void CudaBackend::MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y,
                         DType y_dtype) {
  Enter();
  Record("MatMul", matmul_->Run(x, m, w, y, y_dtype, stream_));
  Done("MatMul");
}

void CudaBackend::MatMulChunked(const void* x, int64_t m, const WeightMatrix& w,
                                int64_t num_chunks, float* y) {
  Enter();
  Record("MatMulChunked", matmul_->RunChunked(x, m, w, num_chunks, y, stream_));
  Done("MatMulChunked");
}

void CudaBackend::SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) {
  Enter();
  Record("SumChunks", TPK_LAUNCH(cuda::LaunchSumChunks(chunks, num_chunks, count, out, stream_)));
  Done("SumChunks");
}

void CudaBackend::RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim,
                          float eps, void* y) {
  Enter();
  Record("RmsNorm", TPK_LAUNCH(cuda::LaunchRmsNorm(x, weight, rows, dim, eps, y, stream_)));
  Done("RmsNorm");
}

void CudaBackend::Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
                       RopeLayout layout) {
  TP_CHECK(head_dim % 2 == 0, "RoPE needs an even head_dim");
  Enter();
  Record("Rope", TPK_LAUNCH(cuda::LaunchRope(x, step_.num_positions, num_heads, head_dim,
                                             step_.positions, inv_freq,
                                             layout == RopeLayout::kInterleaved, stream_)));
  Done("Rope");
}

void CudaBackend::SiluMul(const void* gate, const void* up, int64_t count, void* out) {
  Enter();
  Record("SiluMul", TPK_LAUNCH(cuda::LaunchSiluMul(gate, up, count, out, stream_)));
  Done("SiluMul");
}

void CudaBackend::Add(const void* a, const void* b, int64_t count, void* out) {
  Enter();
  Record("Add", TPK_LAUNCH(cuda::LaunchAdd(a, b, count, out, stream_)));
  Done("Add");
}

void CudaBackend::EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) {
  TP_CHECK(SupportsWeight(table.format), "embedding format not supported by the CUDA backend");
  Enter();
  Record("EmbeddingRows",
         TPK_LAUNCH(cuda::LaunchEmbeddingRows(cuda::ToDeviceWeight(table), first_row,
                                              step_.token_ids, step_.num_token_ids, out,
                                              stream_)));
  Done("EmbeddingRows");
}

void CudaBackend::GatherLogitRows(const void* x, int64_t row_elems, void* out) {
  Enter();
  Record("GatherLogitRows", TPK_LAUNCH(cuda::LaunchGatherRows(x, row_elems, step_.logit_rows,
                                                              step_.num_logit_rows, out,
                                                              stream_)));
  Done("GatherLogitRows");
}

void CudaBackend::WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) {
  TP_CHECK(SupportsKvDtype(pool.dtype), "KV dtype not supported by the CUDA backend");
  Enter();
  Record("WriteKv",
         TPK_LAUNCH(cuda::LaunchWriteKv(k_new, v_new, ToDevicePool(pool), step_, stream_)));
  Done("WriteKv");
}

void CudaBackend::PagedAttention(const void* q, int64_t num_heads, float scale,
                                 const KvPoolView& pool, void* out) {
  const cuda::DeviceKvPool dp = ToDevicePool(pool);
  TP_CHECK(cuda::AttentionFits(num_heads, dp),
           "attention shape not supported by the CUDA backend (head_dim <= 256, whole groups)");
  Enter();
  // A recorded step keeps its grid, so inside RunCaptured the plan is sized for the context
  // bucket rather than for this step's longest context.
  const int64_t context_bound = fixed_plan_ ? context_bucket_ : step_.max_decode_context;
  const cuda::AttentionPlan plan =
      cuda::PlanAttention(num_heads, dp, step_.num_decode, context_bound, num_sms_);
  float* scratch = nullptr;
  if (plan.scratch_floats > 0) {
    const absl::Status st = attention_scratch_.Reserve(plan.scratch_floats * 4, stream_);
    Record("PagedAttention", st);
    if (!st.ok()) return;
    scratch = attention_scratch_.as<float>();
  }
  Record("PagedAttention", TPK_LAUNCH(cuda::LaunchPagedAttention(q, num_heads, scale, dp, step_,
                                                                 plan, scratch, out, stream_)));
  Done("PagedAttention");
}

void CudaBackend::DisableGraphs(const absl::Status& why) {
  std::fprintf(stderr, "%s: recording a CUDA graph failed (%s); running steps eagerly\n",
               name_.c_str(), why.ToString().c_str());
  graphs_enabled_ = false;
  cudaGetLastError();  // a refused capture call must not surface at the next launch check
}

void CudaBackend::ForgetCaptured(const void* owner) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (std::get<0>(it->first) != owner) {
      ++it;
      continue;
    }
    if (it->second.exec != nullptr) {
      // A replay may still be queued: it must finish before its executable goes.
      Record("ForgetCaptured", TPK_CUDA(cudaStreamSynchronize(s())));
      Record("ForgetCaptured", TPK_CUDA(cudaGraphExecDestroy(it->second.exec)));
    }
    it = graphs_.erase(it);
  }
}

absl::Status CudaBackend::RunCaptured(const void* owner, int64_t key,
                                      absl::FunctionRef<absl::Status()> body) {
  if (!graphs_enabled_ || !first_error_.ok()) return body();
  Enter();
  // One recording serves every step whose longest decode context is in the same power-of-two
  // bucket (the attention grid is baked into the graph; per-row lengths are read from the step).
  int64_t bucket = 256;
  while (bucket < step_.max_decode_context) bucket *= 2;
  Graph& g = graphs_[{owner, key, bucket}];
  if (g.exec != nullptr && g.generation != scratch_generation_) {  // a buffer it baked moved
    cudaGraphExecDestroy(g.exec);
    g = Graph{};
  }
  fixed_plan_ = true;
  context_bucket_ = bucket;
  struct Unfix {
    bool* flag;
    ~Unfix() { *flag = false; }
  } unfix{&fixed_plan_};
  if (g.exec == nullptr && !g.warm) {  // first run eagerly: grows scratch, makes GEMM plans
    g.warm = true;
    return body();
  }
  if (g.exec == nullptr) {
    const int64_t generation = scratch_generation_;
    record_error_ = absl::OkStatus();
    const absl::Status begin =
        TPK_CUDA(cudaStreamBeginCapture(s(), cudaStreamCaptureModeThreadLocal));
    if (!begin.ok()) {
      DisableGraphs(begin);
      return body();
    }
    recording_ = true;
    const absl::Status body_status = body();
    cudaGraph_t graph = nullptr;
    const absl::Status end = TPK_CUDA(cudaStreamEndCapture(s(), &graph));
    recording_ = false;
    absl::Status problem = !end.ok() ? end : record_error_;
    if (problem.ok() && scratch_generation_ != generation) {
      problem = absl::InternalError("a scratch buffer moved while recording");
    }
    if (problem.ok() && body_status.ok()) {
      problem = TPK_CUDA(cudaGraphInstantiate(&g.exec, graph, 0));
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!body_status.ok()) {  // the caller's own error: nothing ran
      if (g.exec != nullptr) cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
      return body_status;
    }
    if (!problem.ok()) {
      g.exec = nullptr;
      DisableGraphs(problem);
      return body();
    }
    g.generation = scratch_generation_;
  }
  Record("RunCaptured", TPK_CUDA(cudaGraphLaunch(g.exec, s())));
  Done("RunCaptured");
  return absl::OkStatus();
}

absl::Status CudaBackend::Synchronize() {
  Enter();
  Record("Synchronize", TPK_CUDA(cudaStreamSynchronize(s())));
  Record("Synchronize", TPK_CUDA(cudaGetLastError()));
  return first_error_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device_ordinal) {
  return CudaBackend::Create(device_ordinal);
}

}  // namespace tpserve
