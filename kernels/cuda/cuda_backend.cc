#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "base/str_cat.h"
#include "base/status_macros.h"
#include "kernels/check.h"
#include "kernels/step_capture.h"
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/column_split.h"
#include "kernels/cuda/column_split_kernels.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_moe.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_scratch.h"
#include "kernels/cuda/device_wait.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/flashinfer/flashinfer_attention.h"
#include "kernels/cuda/flashinfer/mla_attention.h"
#include "kernels/cuda/flashinfer/scoring.h"
#include "kernels/cuda/mla_plan.h"
#include "kernels/cuda/pinned_staging.h"
#include "kernels/cuda/sampling_kernels.h"
#include "kernels/cuda/staged_copy.h"
#include "kernels/cuda/step_metadata.h"
#include "kernels/cuda/weight_placement.h"

namespace tpserve {
namespace {

using cuda::DeviceScratch;

// Bytes of a fused MatMulMany's product: m rows of n elements of y's type.
int64_t FusedProductBytes(int64_t m, int64_t n, DType y_dtype) {
  return m * n * (y_dtype == DType::kF32 ? 4 : 2);
}

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

// A latent pool (MLA): one KV head of [c (512), k_rope (64)], keys read as values.
bool IsLatentPoolView(const KvPoolView& p) {
  return cuda::IsLatentPool(p.num_kv_heads, p.head_dim) && p.k == p.v;
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

// TPSERVE_CUDA_HOST_SYNC, when set: the host-sync mode, overriding `fallback` (cuda_backend.h).
absl::StatusOr<HostSyncMode> HostSyncFromEnv(HostSyncMode fallback) {
  const char* v = std::getenv("TPSERVE_CUDA_HOST_SYNC");
  if (v == nullptr || *v == '\0') return fallback;
  absl::StatusOr<HostSyncMode> mode = ParseHostSyncMode(v);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(StrCat("TPSERVE_CUDA_HOST_SYNC: ", mode.status().message()));
  }
  return mode;
}

// Whether RunCaptured may record CUDA graphs, as far as the environment says:
// TPSERVE_CUDA_GRAPHS=0 turns them off (a GPU check comparing both without a rebuild; the
// flag is --enforce_eager, CudaBackendOptions::cuda_graphs), and check mode does, as it waits
// after every op.
bool GraphsFromEnv() {
  const char* v = std::getenv("TPSERVE_CUDA_GRAPHS");
  return !(v != nullptr && std::string(v) == "0") && !CheckEachOpFromEnv();
}

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(int ordinal,
                                                         const CudaBackendOptions& options);
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
  // int4 and fp8 matrices the mixed-input GEMM takes, in its form (weight_placement.h).
  absl::StatusOr<PlacedWeight> PlaceWeight(const HostMatrix& host, WeightUse use,
                                           std::string_view what) override {
    TP_ASSIGN_OR_RETURN(PlacedWeight placed,
                        cuda::PlaceCudaWeight(*this, host, use, compute_capability_, what));
    Enter();  // its kernels checked now, not at a step (CudaMatMul::CheckWeight)
    TP_RETURN_IF_ERROR(matmul_->CheckWeight(placed.matrix, what));
    if (use == WeightUse::kFused) {  // its product's scratch for the step budget, now
      TP_RETURN_IF_ERROR(fused_product_.Reserve(
          FusedProductBytes(max_tokens_per_step_, placed.matrix.rows, DType::kBF16), s()));
    }
    return placed;
  }
  void* stream() const override { return stream_; }
  void Free(void* data, int64_t bytes) override;

  void BeginStep(const StepInputs& step) override;

  void MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype) override;
  // With `fused`: one GEMM over the stack into fused_product_, then one kernel splitting its
  // columns into the outputs (column_split.h says why a copy). Without: a GEMM per matrix.
  void MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs, DType y_dtype,
                  const WeightMatrix* fused) override;
  ProjectionFusion projection_fusion() const override { return cuda::CudaProjectionFusion(); }
  void MatMulChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                     float* y) override;
  void SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) override;
  void RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim, float eps,
               void* y) override;
  void Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
            RopeLayout layout) override;
  void GatedActivation(Activation act, const void* gate, const void* up, int64_t count,
                       void* out) override;
  void Add(const void* a, const void* b, int64_t count, void* out) override;
  void Scale(void* x, int64_t count, float factor) override;
  // Mixtures of experts (cuda_moe.h): the router and the grouping are our kernels, the
  // experts' GEMMs the MatMul paths, run per expert over its block of rows. The grouping's row
  // counts are read back on the host (a stream sync per MoE op), so these ops refuse to be
  // recorded into a CUDA graph (the recording then falls back to eager steps).
  bool SupportsExperts() const override { return true; }
  void RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                    const float* correction_bias, int32_t* ids, float* weights) override;
  void MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                  const ExpertMlp* shared, Activation act, const int32_t* ids,
                  const float* weights, bool weights_on_input, int64_t top_k,
                  int64_t num_chunks, const MoeWorkspace& scratch, float* out) override;
  void MoeExpertSlots(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                      int64_t first_expert, Activation act, const int32_t* ids,
                      const float* weights, bool weights_on_input, int64_t top_k,
                      int64_t num_chunks, const int32_t* slot_pos, const MoeWorkspace& scratch,
                      float* slots) override;
  void MoeCombine(const void* x, int64_t rows, const float* slots, const int32_t* slot_pos,
                  const float* weights, bool weights_on_input, int64_t top_k, int64_t num_chunks,
                  int64_t hidden, const ExpertMlp* shared, Activation act,
                  const MoeWorkspace& scratch, float* out) override;
  void SoftCapF32(float* x, int64_t count, float cap) override;
  // FlashInfer's variants here (and the SIMT kernels) score a window and a soft-cap, not Llama
  // 4's chunks nor its per-query temperature: such a model is refused at load, by name.
  bool SupportsAttention(const AttentionParams& params) const override {
    return params.attention_chunk == 0 && params.temperature_floor == 0 &&
           !params.skip_fresh_sequences;
  }
  void EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) override;
  void GatherLogitRows(const void* x, int64_t row_elems, void* out) override;
  void WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) override;
  absl::StatusOr<int64_t> ReserveAttention(const AttentionReservation& limits) override;
  void PagedAttention(const void* q, int64_t num_heads, const AttentionParams& params,
                      const KvPoolView& pool, void* out) override;
  // Multi-head latent attention: the absorbed form over a latent pool (one KV head of 576:
  // kernels/cuda/mla_plan.h) on FlashInfer's Hopper MLA kernel (flashinfer/mla_attention.h),
  // bf16 or fp8 latent cache, compute capability 9.0; never deterministic. The expanded
  // prefill (PrefillAttention) is not built: SupportsPrefillAttention() is false, so a model
  // asking for it is refused at load (were it called, it records UNIMPLEMENTED).
  bool SupportsLatentAttention() const override {
    return compute_capability_ == 90 && !deterministic_;
  }
  void RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset,
                int64_t rope_dim, const float* inv_freq, RopeLayout layout) override;
  void PrefillAttention(const void* q, const void* k, const void* v, int64_t num_heads,
                        int64_t key_dim, int64_t value_dim, float scale, void* out) override;
  absl::Status Synchronize() override;
  void RequestAbort() override { abort_requested_.store(true); }
  absl::Status RecoverFromAbort() override;
  int64_t TakeDecodedWeightBytes() override {
    const int64_t total = matmul_->decoded_weight_bytes();
    const int64_t since = total - decoded_reported_;
    decoded_reported_ = total;
    return since;
  }
  // Sampling on the device: only token ids and logprobs come back to the host.
  bool PrefersSampleRows() const override { return true; }
  absl::Status SampleRows(float* logits, int64_t vocab, int64_t per_rank, int64_t layout_rows,
                          const SamplingRows& rows, absl::Span<RowSample> out) override;

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

  CudaBackend(int ordinal, std::string name, int num_sms, int compute_capability,
              bool deterministic, int64_t max_tokens_per_step)
      : ordinal_(ordinal), name_(std::move(name)), num_sms_(num_sms),
        compute_capability_(compute_capability), deterministic_(deterministic),
        max_tokens_per_step_(max_tokens_per_step > 0 ? max_tokens_per_step : kGpuMaxTokensPerStep),
        check_each_op_(CheckEachOpFromEnv()),
        // FlashInfer's fixed-split plan cannot run on a recorded step's fixed grid.
        graphs_enabled_(GraphsFromEnv() && !deterministic) {}

  // The FlashInfer limits for `r` on this device.
  cuda::AttentionLimits LimitsFor(const AttentionReservation& r) const;
  // FlashInfer sized for this step's attention: the reserved instance, or (without a
  // reservation: tests, benchmarks) one made or grown to fit. Null after a recorded error.
  cuda::FlashInferAttention* FlashInferFor(int64_t num_heads, const cuda::DeviceKvPool& pool);
  // Plans this step's FlashInfer attention (cuda_graph: for a recorded decode step) under
  // attention_constraints_.
  void PlanAttentionStep(bool cuda_graph);
  // PagedAttention on FlashInfer: plans the step again when this layer's window or cap is one
  // its plan cannot run (flashinfer/scoring.h).
  void RunFlashInfer(const void* q, int64_t num_heads, const AttentionParams& params,
                     const cuda::DeviceKvPool& pool, void* out);
  // PagedAttention over a latent pool on FlashInfer's MLA kernel: the reserved instance, or
  // (without a reservation) one made or grown to fit the step; planned once per step.
  void RunMla(const void* q, int64_t num_heads, const AttentionParams& params,
              const cuda::DeviceKvPool& pool, void* out);

  // Makes this backend's device current for the calling thread (ranks may share a process).
  // Not while recording: the capture is this thread's, on this device already.
  void Enter() {
    if (!recording_) Record("cudaSetDevice", TPK_CUDA(cudaSetDevice(ordinal_)));
  }
  // True (and `op` recorded as FAILED_PRECONDITION) inside a recording: the MoE ops wait for
  // the experts' row counts on the host, which a recorded step cannot.
  bool RefusedWhileRecording(const char* op);
  // A recording that failed: say so once, run eagerly from then on.
  void DisableGraphs(const absl::Status& why);
  // Keeps the first failure; every later Synchronize and CopyToHost reports it.
  void Record(const char* op, const absl::Status& status);
  // In check mode, waits for `op` and records a device error under its name.
  void Done(const char* op);
  cudaStream_t s() const { return static_cast<cudaStream_t>(stream_); }
  // Every host wait on the stream: a deadline, and RequestAbort ends it (device_wait.h).
  // Record(op, ...) puts the backend and the op in front of its errors.
  absl::Status WaitForQueuedWork() {
    return cuda::WaitForStream(stream_, "queued device work", &abort_requested_);
  }
  std::atomic<bool> abort_requested_{false};  // set by RequestAbort, from any thread

  const int ordinal_;
  const std::string name_;
  const int num_sms_;
  const int compute_capability_;  // major * 10 + minor
  const bool deterministic_;      // CudaBackendOptions::deterministic
  const int64_t max_tokens_per_step_;  // CudaBackendOptions' (or matmul_plan_load.h's default)
  const bool check_each_op_;
  bool graphs_enabled_;
  bool recording_ = false;     // inside cudaStreamBeginCapture .. EndCapture
  absl::Status record_error_;  // the first failure while recording (not the backend's)
  bool fixed_plan_ = false;    // inside RunCaptured: attention plans use context_bucket_
  int64_t context_bucket_ = 0;
  int64_t scratch_generation_ = 0;  // bumped whenever a scratch buffer moves
  std::map<std::tuple<const void*, int64_t, int64_t>, Graph> graphs_;
  void* stream_ = nullptr;  // cudaStream_t
  std::unique_ptr<cuda::CudaMatMul> matmul_;
  int64_t decoded_reported_ = 0;  // matmul_'s decoded weight bytes at the last Take
  // A fused MatMulMany's product before its split: reserved for the step budget when a fused
  // matrix is placed (the widest one's), grown only by a step past that budget.
  DeviceScratch fused_product_{"fused projection product", &scratch_generation_,
                               &abort_requested_};
  std::unique_ptr<cuda::CudaMoe> moe_;  // runs its experts' GEMMs on matmul_
  // SampleRows' rows and arrays, the penalties' saved values and the results; never read by
  // a recorded step.
  DeviceScratch sampling_{"sampling rows", nullptr, &abort_requested_};
  std::vector<unsigned char> sampling_host_;  // the same inputs, packed for one upload
  absl::Status first_error_;
  // Every copy between host and device (CopyToHost, CopyToDevice, the step metadata) goes
  // through these pinned slots, allocated once in Create (staged_copy.h says why).
  std::unique_ptr<cuda::PinnedStaging> staging_;

  // Step metadata: packed on the host, staged through staging_ to the device.
  cuda::PackedStep packed_;
  DeviceScratch step_words_{"step metadata", &scratch_generation_, &abort_requested_};
  cuda::DeviceStep step_;
  DeviceScratch attention_scratch_{"attention split partials", &scratch_generation_,
                                   &abort_requested_};
  // FlashInfer's attention (kernels/cuda/flashinfer/): its workspace and per-step plan.
  std::unique_ptr<cuda::FlashInferAttention> flashinfer_;
  bool attention_reserved_ = false;  // ReserveAttention sized it: it never grows
  bool attention_planned_ = false;   // this step's FlashInfer plan is made
  // FlashInfer's MLA (kernels/cuda/flashinfer/mla_attention.h): its workspace and step plan.
  std::unique_ptr<cuda::MlaAttention> mla_;
  bool mla_planned_ = false;  // this step's MLA plan is made
  // What FlashInfer plans avoid for the windows and soft-caps of every layer seen so far
  // (flashinfer/scoring.h); only grows, and a change invalidates recorded steps.
  cuda::fi::PlanConstraints attention_constraints_;
};

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::Create(int ordinal,
                                                             const CudaBackendOptions& options) {
  TP_ASSIGN_OR_RETURN(const int count, CudaDeviceCount());
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(
        StrCat("CUDA device ", ordinal, " requested, but ", count, " are visible"));
  }
  TP_ASSIGN_OR_RETURN(const HostSyncMode host_sync, HostSyncFromEnv(options.host_sync));
  // Before anything else on the device: the driver's own waits block rather than spin.
  TP_RETURN_IF_ERROR(SetHostSyncMode(ordinal, host_sync));
  cudaDeviceProp prop;
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaGetDeviceProperties(&prop, ordinal)));
  if (prop.major < 9) {  // the kernels are built for sm_90 (tools/cuda.bzl)
    return absl::FailedPreconditionError(StrCat(
        "CUDA device ", ordinal, " (", prop.name, ") has compute capability ", prop.major, ".",
        prop.minor, "; the CUDA backend is built for 9.0 (Hopper) and newer"));
  }
  std::unique_ptr<CudaBackend> be(new CudaBackend(
      ordinal, StrCat("cuda:", ordinal, " ", prop.name), prop.multiProcessorCount,
      prop.major * 10 + prop.minor, options.deterministic, options.max_tokens_per_step));
  cudaStream_t stream = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream other code may use.
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)));
  be->stream_ = stream;
  // --enforce_eager: nothing recorded (deterministic and check mode never record either).
  be->graphs_enabled_ = be->graphs_enabled_ && options.cuda_graphs;
  TP_ASSIGN_OR_RETURN(be->staging_, cuda::PinnedStaging::Create(stream, &be->abort_requested_));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<cuda::CublasLtGemm> gemm,
                      cuda::CublasLtGemm::Create({.deterministic = options.deterministic}));
  be->matmul_ = std::make_unique<cuda::CudaMatMul>(
      std::move(gemm), &be->scratch_generation_,
      cuda::CudaMatMulOptions{.deterministic = options.deterministic,
                              .abort = &be->abort_requested_,
                              .sm_count = prop.multiProcessorCount,
                              .strict_kernels = options.strict_kernels,
                              .max_tokens_per_step = options.max_tokens_per_step});
  be->moe_ = std::make_unique<cuda::CudaMoe>(
      be->matmul_.get(), &be->scratch_generation_, &be->abort_requested_,
      cuda::CudaMoeOptions{.deterministic = options.deterministic,
                           .compute_capability = prop.major * 10 + prop.minor,
                           .sm_count = prop.multiProcessorCount});
  return std::unique_ptr<Backend>(std::move(be));
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(ordinal_);
  if (stream_ != nullptr) (void)WaitForQueuedWork();  // bounded even behind a dead peer
  for (auto& [key, graph] : graphs_) {
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }
  moe_.reset();
  matmul_.reset();
  staging_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(s());
}

void CudaBackend::Record(const char* op, const absl::Status& status) {
  absl::Status& first = recording_ ? record_error_ : first_error_;
  if (status.ok() || !first.ok()) return;
  first = absl::Status(status.code(), StrCat(name_, " ", op, ": ", status.message()));
}

void CudaBackend::Done(const char* op) {
  if (!check_each_op_ || recording_) return;
  Record(op, WaitForQueuedWork());
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
  // Returns once `src` is in the pinned slots (the caller may reuse it); a cudaMemcpyAsync from
  // pageable memory may instead wait in the driver for the queued work, with no deadline.
  Record("CopyToDevice", cuda::StagedCopyToDevice(*staging_, dst, src, bytes));
  Done("CopyToDevice");
}

absl::Status CudaBackend::CopyToHost(void* dst, const void* src, int64_t bytes) {
  Enter();
  // Through the pinned slots with a bounded wait: a cudaMemcpyAsync into pageable `dst` (the
  // logits' std::vector) would wait in the driver for the whole step, with no deadline.
  if (bytes > 0) Record("CopyToHost", cuda::StagedCopyToHost(*staging_, dst, src, bytes));
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
  // 1 MiB at least: a move of this buffer invalidates every recorded step.
  const absl::Status reserved = step_words_.Reserve(std::max<int64_t>(bytes, 1 << 20), s());
  Record("BeginStep", reserved);
  if (!reserved.ok()) return;
  // Through the pinned slots (no allocation here): each slot is rewritten only once the last
  // step's copy has read it.
  Record("BeginStep",
         cuda::StagedCopyToDevice(*staging_, step_words_.data(), packed_.words.data(), bytes));
  step_ = packed_.Resolve(step_words_.as<const int32_t>());
  attention_planned_ = false;
  mla_planned_ = false;
  Done("BeginStep");
}

void CudaBackend::MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y,
                         DType y_dtype) {
  Enter();
  Record("MatMul", matmul_->Run(x, m, w, y, y_dtype, stream_));
  Done("MatMul");
}

void CudaBackend::MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs,
                             DType y_dtype, const WeightMatrix* fused) {
  if (fused == nullptr) {
    for (const MatMulOut& o : outs) MatMul(x, m, *o.w, o.y, y_dtype);
    return;
  }
  Enter();
  std::vector<void*> dst;
  std::vector<int64_t> cols;
  for (const MatMulOut& o : outs) {
    dst.push_back(o.y);
    cols.push_back(o.w->rows);
  }
  TP_CHECK(std::accumulate(cols.begin(), cols.end(), int64_t{0}) == fused->rows,
           "MatMulMany: the outputs' rows do not add up to the fused matrix's");
  if (m <= 0) return;
  const absl::Status reserved =
      fused_product_.Reserve(FusedProductBytes(m, fused->rows, y_dtype), s());
  Record("MatMulMany", reserved);
  if (!reserved.ok()) return;
  Record("MatMulMany", matmul_->Run(x, m, *fused, fused_product_.data(), y_dtype, stream_));
  const cuda::ColumnSplit split = cuda::PlanColumnSplit(fused_product_.data(), dst, cols,
                                                        y_dtype == DType::kF32 ? 4 : 2);
  Record("MatMulMany", TPK_LAUNCH(cuda::LaunchSplitColumns(split, fused_product_.data(), m,
                                                           stream_)));
  Done("MatMulMany");
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

void CudaBackend::RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset,
                           int64_t rope_dim, const float* inv_freq, RopeLayout layout) {
  TP_CHECK(rope_dim % 2 == 0, "RoPE needs an even head_dim");
  TP_CHECK(offset >= 0 && offset + rope_dim <= head_stride, "RoPE dims outside the head");
  Enter();
  Record("RopePart", TPK_LAUNCH(cuda::LaunchRopePart(
                         x, step_.num_positions, num_heads, head_stride, offset, rope_dim,
                         step_.positions, inv_freq, layout == RopeLayout::kInterleaved,
                         stream_)));
  Done("RopePart");
}

void CudaBackend::PrefillAttention(const void*, const void*, const void*, int64_t, int64_t,
                                   int64_t, float, void*) {
  Record("PrefillAttention",
         absl::UnimplementedError(
             "the expanded form of a fresh MLA prefill (LlamaLoadOptions::"
             "mla_expand_fresh_prefill) is not built on CUDA; the absorbed form, the default, "
             "serves every step"));
}

void CudaBackend::GatedActivation(Activation act, const void* gate, const void* up,
                                  int64_t count, void* out) {
  Enter();
  switch (act) {
    case Activation::kSilu:
      Record("GatedActivation(silu)",
             TPK_LAUNCH(cuda::LaunchSiluMul(gate, up, count, out, stream_)));
      break;
    case Activation::kGeluTanh:
      Record("GatedActivation(gelu_tanh)",
             TPK_LAUNCH(cuda::LaunchGeluTanhMul(gate, up, count, out, stream_)));
      break;
    default:
      Record("GatedActivation", absl::UnimplementedError(StrCat(
                                    "activation ", static_cast<int>(act), " has no CUDA kernel")));
      return;
  }
  Done("GatedActivation");
}

void CudaBackend::Add(const void* a, const void* b, int64_t count, void* out) {
  Enter();
  Record("Add", TPK_LAUNCH(cuda::LaunchAdd(a, b, count, out, stream_)));
  Done("Add");
}

void CudaBackend::Scale(void* x, int64_t count, float factor) {
  Enter();
  Record("Scale", TPK_LAUNCH(cuda::LaunchScaleBf16(x, count, factor, stream_)));
  Done("Scale");
}

bool CudaBackend::RefusedWhileRecording(const char* op) {
  if (!recording_) return false;
  Record(op, absl::FailedPreconditionError(
                 "waits for the experts' row counts on the host, which a recorded step cannot"));
  return true;
}

void CudaBackend::RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                               const float* correction_bias, int32_t* ids, float* weights) {
  Enter();
  Record("RouteExperts",
         moe_->Route(routing, logits, rows, correction_bias, ids, weights, stream_));
  Done("RouteExperts");
}

void CudaBackend::MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                             const ExpertMlp* shared, Activation act, const int32_t* ids,
                             const float* weights, bool weights_on_input, int64_t top_k,
                             int64_t num_chunks, const MoeWorkspace& scratch, float* out) {
  Enter();
  if (RefusedWhileRecording("MoeExperts")) return;
  Record("MoeExperts", moe_->Run(x, rows, experts, shared, act, ids, weights, weights_on_input,
                                 top_k, num_chunks, scratch, out, stream_));
  Done("MoeExperts");
}

void CudaBackend::MoeExpertSlots(const void* x, int64_t rows,
                                 absl::Span<const ExpertMlp> experts, int64_t first_expert,
                                 Activation act, const int32_t* ids, const float* weights,
                                 bool weights_on_input, int64_t top_k, int64_t num_chunks,
                                 const int32_t* slot_pos, const MoeWorkspace& scratch,
                                 float* slots) {
  Enter();
  if (RefusedWhileRecording("MoeExpertSlots")) return;
  Record("MoeExpertSlots",
         moe_->RunSlots(x, rows, experts, first_expert, act, ids,
                        weights_on_input ? weights : nullptr, top_k, num_chunks, slot_pos,
                        scratch, slots, stream_));
  Done("MoeExpertSlots");
}

void CudaBackend::MoeCombine(const void* x, int64_t rows, const float* slots,
                             const int32_t* slot_pos, const float* weights,
                             bool weights_on_input, int64_t top_k, int64_t num_chunks,
                             int64_t hidden, const ExpertMlp* shared, Activation act,
                             const MoeWorkspace& scratch, float* out) {
  Enter();
  if (RefusedWhileRecording("MoeCombine")) return;
  Record("MoeCombine", moe_->Combine(x, rows, slots, slot_pos, weights, weights_on_input, top_k,
                                     num_chunks, hidden, shared, act, scratch, out, stream_));
  Done("MoeCombine");
}

void CudaBackend::SoftCapF32(float* x, int64_t count, float cap) {
  TP_CHECK(cap > 0, "SoftCapF32 needs a positive cap");
  Enter();
  Record("SoftCapF32", TPK_LAUNCH(cuda::LaunchSoftCapF32(x, count, cap, stream_)));
  Done("SoftCapF32");
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

absl::Status CudaBackend::SampleRows(float* logits, int64_t vocab, int64_t per_rank,
                                     int64_t layout_rows, const SamplingRows& rows,
                                     absl::Span<RowSample> out) {
  TP_RETURN_IF_ERROR(CheckSampleRows(vocab, per_rank, layout_rows, rows, out.size()));
  if (recording_) {
    return absl::FailedPreconditionError("SampleRows inside a recorded step (it waits for its "
                                         "results on the host)");
  }
  const int64_t n = static_cast<int64_t>(rows.rows.size());
  if (n == 0) return first_error_;
  Enter();
  // The inputs packed back to back (each part 16-byte aligned) for one upload, then the
  // kernel's own parts: a saved value per penalty entry and a result per row.
  struct Part {
    const void* src;
    int64_t bytes;
    int64_t offset = 0;
  };
  const auto bytes_of = [](const auto& v) {
    return static_cast<int64_t>(v.size() * sizeof(v[0]));
  };
  Part parts[] = {{rows.rows.data(), bytes_of(rows.rows)},
                  {rows.bias_ids.data(), bytes_of(rows.bias_ids)},
                  {rows.bias_values.data(), bytes_of(rows.bias_values)},
                  {rows.penalty_ids.data(), bytes_of(rows.penalty_ids)},
                  {rows.penalty_counts.data(), bytes_of(rows.penalty_counts)},
                  {rows.mask_words.data(), bytes_of(rows.mask_words)}};
  const auto align = [](int64_t b) { return (b + 15) / 16 * 16; };
  int64_t inputs = 0;
  for (Part& p : parts) {
    p.offset = inputs;
    inputs += align(p.bytes);
  }
  const int64_t saved_offset = inputs;
  const int64_t out_offset = saved_offset + align(bytes_of(rows.penalty_ids));
  const int64_t out_bytes = n * static_cast<int64_t>(sizeof(RowSample));
  TP_RETURN_IF_ERROR(sampling_.Reserve(out_offset + out_bytes, stream_));
  sampling_host_.assign(static_cast<size_t>(inputs), 0);
  for (const Part& p : parts) {
    if (p.bytes > 0) std::memcpy(sampling_host_.data() + p.offset, p.src, p.bytes);
  }
  unsigned char* base = static_cast<unsigned char*>(sampling_.data());
  CopyToDevice(base, sampling_host_.data(), inputs);
  const auto at = [&](const Part& p) { return static_cast<const void*>(base + p.offset); };
  const RowArrays arrays{static_cast<const int32_t*>(at(parts[1])),
                         static_cast<const float*>(at(parts[2])),
                         static_cast<const int32_t*>(at(parts[3])),
                         static_cast<const int32_t*>(at(parts[4])),
                         static_cast<const int32_t*>(at(parts[5]))};
  RowSample* device_out = reinterpret_cast<RowSample*>(base + out_offset);
  Record("SampleRows",
         TPK_LAUNCH(cuda::LaunchSampleRows(
             logits, vocab, per_rank, layout_rows, static_cast<const SamplingRow*>(at(parts[0])),
             n, arrays, reinterpret_cast<float*>(base + saved_offset), device_out, stream_)));
  Done("SampleRows");
  return CopyToHost(out.data(), device_out, out_bytes);
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

cuda::AttentionLimits CudaBackend::LimitsFor(const AttentionReservation& r) const {
  return cuda::AttentionLimitsFor(r, num_sms_, compute_capability_, deterministic_);
}

absl::StatusOr<int64_t> CudaBackend::ReserveAttention(const AttentionReservation& r) {
  if (r.num_heads <= 0 || r.num_kv_heads <= 0 || r.num_heads % r.num_kv_heads != 0 ||
      r.head_dim <= 0 || r.block_size_tokens <= 0 || r.max_tokens_per_step <= 0 ||
      r.max_sequences <= 0 || r.max_context <= 0) {
    return absl::InvalidArgumentError(StrCat(
        name_, " ReserveAttention: heads ", r.num_heads, "/", r.num_kv_heads, ", head_dim ",
        r.head_dim, ", block ", r.block_size_tokens, ", tokens ", r.max_tokens_per_step,
        ", sequences ", r.max_sequences, ", context ", r.max_context,
        ": each must be positive and the heads whole groups"));
  }
  Enter();
  const cuda::AttentionLimits limits = LimitsFor(r);
  const cuda::AttentionWorkspace w = cuda::AttentionWorkspaceFor(limits);
  if (cuda::IsLatentPool(r.num_kv_heads, r.head_dim)) {
    if (w.kernels != cuda::AttentionKernels::kMla || deterministic_) {
      return absl::FailedPreconditionError(StrCat(
          name_, ": multi-head latent attention runs on FlashInfer's MLA kernels only (compute "
          "capability 9.0, latent cache bf16 or fp8, not deterministic); this is compute "
          "capability ", compute_capability_, ", KV ", DTypeName(r.kv_dtype),
          deterministic_ ? ", deterministic" : ""));
    }
    TP_ASSIGN_OR_RETURN(mla_, cuda::MlaAttention::Create(limits, &abort_requested_));
    attention_reserved_ = true;
    return w.DeviceBytes();
  }
  if (deterministic_ && w.kernels != cuda::AttentionKernels::kFlashInfer) {
    return absl::FailedPreconditionError(StrCat(
        name_, ": deterministic attention runs on FlashInfer's kernels only (compute "
        "capability 9.0, KV bf16, f16 or fp8, head_dim 64 or 128); this is compute capability ",
        compute_capability_, ", KV ", DTypeName(r.kv_dtype), ", head_dim ", r.head_dim));
  }
  if (w.kernels == cuda::AttentionKernels::kFlashInfer) {
    TP_ASSIGN_OR_RETURN(flashinfer_, cuda::FlashInferAttention::Create(
                                         limits, compute_capability_ == 90, &abort_requested_));
  } else {
    TP_RETURN_IF_ERROR(attention_scratch_.Reserve(w.float_bytes, stream_));
  }
  attention_reserved_ = true;
  return w.DeviceBytes();
}

cuda::FlashInferAttention* CudaBackend::FlashInferFor(int64_t num_heads,
                                                      const cuda::DeviceKvPool& pool) {
  AttentionReservation need;
  need.num_heads = num_heads;
  need.num_kv_heads = pool.num_kv_heads;
  need.head_dim = pool.head_dim;
  need.kv_dtype = pool.kind == cuda::KvKind::kFp8   ? DType::kF8E4M3
                  : pool.kind == cuda::KvKind::kF16 ? DType::kF16
                                                    : DType::kBF16;
  need.block_size_tokens = pool.block_size;
  need.max_tokens_per_step = std::max(step_.num_rows, step_.num_seqs);
  need.max_sequences = step_.num_seqs;
  need.max_context = step_.fi_max_kv_len;
  if (flashinfer_ != nullptr) {
    const cuda::AttentionLimits& have = flashinfer_->limits();
    const bool same_shape = have.num_qo_heads == need.num_heads &&
                            have.num_kv_heads == need.num_kv_heads &&
                            have.head_dim == need.head_dim && have.kv_dtype == need.kv_dtype &&
                            have.page_size == need.block_size_tokens;
    // (FlashInfer's workspace does not depend on the context length.)
    if (same_shape && have.max_tokens_per_step >= need.max_tokens_per_step &&
        have.max_decode_rows >= need.max_sequences) {
      return flashinfer_.get();
    }
    if (attention_reserved_) {
      Record("PagedAttention",
             absl::InvalidArgumentError(StrCat(
                 "a step beyond the reserved attention: ", need.num_heads, " heads over ",
                 need.num_kv_heads, ", ", need.max_tokens_per_step, " rows, ", need.max_sequences,
                 " sequences; reserved ", have.num_qo_heads, " over ", have.num_kv_heads, ", ",
                 have.max_tokens_per_step, " rows, ", have.max_decode_rows, " sequences")));
      return nullptr;
    }
    if (same_shape) {  // grow, never shrink, so a test's steps settle quickly
      need.max_tokens_per_step = std::max(need.max_tokens_per_step, have.max_tokens_per_step);
      need.max_sequences = std::max(need.max_sequences, have.max_decode_rows);
    }
    // Queued work may still read the old workspace.
    Record("PagedAttention", WaitForQueuedWork());
    flashinfer_.reset();
    ++scratch_generation_;  // recordings baked its addresses
  }
  need.max_tokens_per_step = std::max<int64_t>(need.max_tokens_per_step, 64);
  need.max_sequences = std::max<int64_t>(need.max_sequences, 64);
  need.max_context = std::max<int64_t>(need.max_context, 4096);
  absl::StatusOr<std::unique_ptr<cuda::FlashInferAttention>> made =
      cuda::FlashInferAttention::Create(LimitsFor(need), compute_capability_ == 90,
                                        &abort_requested_);
  Record("PagedAttention", made.status());
  if (!made.ok()) return nullptr;
  flashinfer_ = *std::move(made);
  attention_planned_ = false;
  return flashinfer_.get();
}

void CudaBackend::PlanAttentionStep(bool cuda_graph) {
  Record("PagedAttention",
         flashinfer_->Plan(packed_, cuda_graph, attention_constraints_, stream_));
  attention_planned_ = true;
}

void CudaBackend::RunFlashInfer(const void* q, int64_t num_heads, const AttentionParams& params,
                                const cuda::DeviceKvPool& pool, void* out) {
  TP_CHECK(num_heads % pool.num_kv_heads == 0, "query heads are whole KV-head groups");
  const cuda::fi::FiScoring scoring =
      cuda::fi::FiScoringFor(params.sliding_window, params.logit_softcap);
  const cuda::fi::PlanConstraints need = cuda::fi::PlanConstraintsFor(scoring);
  if (!attention_constraints_.Covers(need)) {
    // The first layer with a window or cap: from now on every plan serves it (the model's
    // layers repeat each step), and recordings made under the old plans are stale.
    attention_constraints_ = attention_constraints_.With(need);
    ++scratch_generation_;
  }
  cuda::FlashInferAttention* fi = FlashInferFor(num_heads, pool);
  if (fi == nullptr) return;
  if (!attention_planned_) PlanAttentionStep(/*cuda_graph=*/false);
  if (!fi->PlanServes(scoring)) {
    // Planned before this layer's scoring was known: plan the step again (stream-ordered
    // behind the layers that read the old plan), but never inside a recording.
    if (recording_) {
      Record("PagedAttention", absl::FailedPreconditionError(
                                   "a FlashInfer plan for a new window or cap while recording"));
      return;
    }
    PlanAttentionStep(/*cuda_graph=*/fixed_plan_);
  }
  Record("PagedAttention", fi->Run(q, num_heads, params.scale, scoring, pool, step_, out,
                                   stream_));
  Done("PagedAttention");
}

void CudaBackend::RunMla(const void* q, int64_t num_heads, const AttentionParams& params,
                         const cuda::DeviceKvPool& pool, void* out) {
  if (params.skip_fresh_sequences) {
    Record("PagedAttention", absl::UnimplementedError(
                                 "MLA's absorbed form beside the expanded prefill (LlamaLoad"
                                 "Options::mla_expand_fresh_prefill) is not built on CUDA"));
    return;
  }
  if (params.sliding_window > 0 || params.logit_softcap > 0.0f || !SupportsAttention(params)) {
    Record("PagedAttention",
           absl::UnimplementedError(StrCat(
               "FlashInfer's MLA kernel is built causal only: no sliding window (",
               params.sliding_window, "), soft-cap (", params.logit_softcap, ") or ",
               AttentionExtrasString(params))));
    return;
  }
  if (recording_) {  // MLAPlan is host work per step, outside what a replay re-runs
    Record("PagedAttention", absl::FailedPreconditionError(
                                 "FlashInfer's MLA plan is made on the host every step, which "
                                 "a recorded step cannot"));
    return;
  }
  const DType kv_dtype = pool.kind == cuda::KvKind::kFp8 ? DType::kF8E4M3 : DType::kBF16;
  if (pool.kind != cuda::KvKind::kFp8 && pool.kind != cuda::KvKind::kBF16) {
    Record("PagedAttention", absl::UnimplementedError(
                                 "FlashInfer's MLA kernel reads a bf16 or fp8 latent cache"));
    return;
  }
  const int64_t rows = std::max<int64_t>(step_.num_rows, 1);
  const bool fits = mla_ != nullptr && mla_->limits().num_qo_heads == num_heads &&
                    mla_->limits().kv_dtype == kv_dtype &&
                    mla_->limits().page_size == pool.block_size &&
                    mla_->limits().max_tokens_per_step >= rows &&
                    mla_->limits().max_decode_rows >= step_.num_seqs;
  if (!fits) {
    if (attention_reserved_) {
      Record("PagedAttention",
             absl::InvalidArgumentError(StrCat(
                 "an MLA step beyond the reserved attention: ", num_heads, " heads, ", rows,
                 " rows, ", step_.num_seqs, " sequences, KV ", DTypeName(kv_dtype))));
      return;
    }
    AttentionReservation need;  // no reservation (tests, benchmarks): grow to fit
    need.num_heads = num_heads;
    need.num_kv_heads = 1;
    need.head_dim = cuda::kMlaEntryDim;
    need.kv_dtype = kv_dtype;
    need.block_size_tokens = pool.block_size;
    need.max_tokens_per_step = std::max<int64_t>(rows, 64);
    need.max_sequences = std::max<int64_t>(step_.num_seqs, 64);
    need.max_context = std::max<int64_t>(step_.fi_max_kv_len, 4096);
    if (mla_ != nullptr) Record("PagedAttention", WaitForQueuedWork());  // may read the old one
    mla_.reset();
    absl::StatusOr<std::unique_ptr<cuda::MlaAttention>> made =
        cuda::MlaAttention::Create(LimitsFor(need), &abort_requested_);
    Record("PagedAttention", made.status());
    if (!made.ok()) return;
    mla_ = *std::move(made);
    mla_planned_ = false;
  }
  if (!mla_planned_) {
    const absl::Status planned = mla_->Plan(packed_, stream_);
    Record("PagedAttention", planned);
    if (!planned.ok()) return;
    mla_planned_ = true;
  }
  Record("PagedAttention", mla_->Run(q, num_heads, params.scale, pool, step_, out, stream_));
  Done("PagedAttention");
}

void CudaBackend::PagedAttention(const void* q, int64_t num_heads,
                                 const AttentionParams& params, const KvPoolView& pool,
                                 void* out) {
  if (!(params.scale > 0.0f) || params.sliding_window < 0 || params.logit_softcap < 0.0f) {
    Record("PagedAttention",
           absl::InvalidArgumentError(StrCat("scale ", params.scale, ", sliding_window ",
                                             params.sliding_window, ", logit_softcap ",
                                             params.logit_softcap,
                                             ": the scale must be positive, the others >= 0")));
    return;
  }
  if (IsLatentPoolView(pool)) {
    Enter();
    RunMla(q, num_heads, params, ToDevicePool(pool), out);
    return;
  }
  if (!SupportsAttention(params)) {  // the model refuses such layers at load; never compute
    Record("PagedAttention", absl::UnimplementedError(StrCat(
                                 AttentionExtrasString(params), " is not implemented on CUDA")));
    return;
  }
  const cuda::DeviceKvPool dp = ToDevicePool(pool);
  Enter();
  // FlashInfer where it is built for the shape (attention_workspace.h) and the step is a batch
  // of requests in row order (every step of the model is); our SIMT kernels otherwise.
  if (cuda::AttentionKernelsFor(pool.dtype, pool.head_dim, compute_capability_) ==
          cuda::AttentionKernels::kFlashInfer &&
      step_.fi_rows_in_order) {
    RunFlashInfer(q, num_heads, params, dp, out);
    return;
  }
  TP_CHECK(cuda::AttentionFits(num_heads, dp),
           "attention shape not supported by the CUDA backend (head_dim <= 256, whole groups)");
  if (deterministic_) {  // the SIMT kernels' split count depends on the batch
    Record("PagedAttention",
           absl::FailedPreconditionError("deterministic attention needs FlashInfer's kernels"));
    return;
  }
  // A recorded step keeps its grid, so inside RunCaptured the plan is sized for the context
  // bucket rather than for this step's longest context.
  const int64_t context_bound = fixed_plan_ ? context_bucket_ : step_.max_decode_context;
  const cuda::AttentionPlan plan =
      cuda::PlanAttention(num_heads, dp, step_.num_decode, context_bound, num_sms_);
  float* scratch = nullptr;
  if (plan.scratch_floats > 0) {
    if (attention_reserved_ && plan.scratch_floats * 4 > attention_scratch_.capacity()) {
      Record("PagedAttention", absl::InvalidArgumentError(StrCat(
                                   "attention splits need ", plan.scratch_floats * 4,
                                   " bytes, more than the ", attention_scratch_.capacity(),
                                   " reserved")));
      return;
    }
    const absl::Status st = attention_scratch_.Reserve(plan.scratch_floats * 4, stream_);
    Record("PagedAttention", st);
    if (!st.ok()) return;
    scratch = attention_scratch_.as<float>();
  }
  const cuda::AttentionScores scores{.scale = params.scale,
                                     .window = params.sliding_window,
                                     .softcap = params.logit_softcap};
  Record("PagedAttention", TPK_LAUNCH(cuda::LaunchPagedAttention(q, num_heads, scores, dp, step_,
                                                                 plan, scratch, out, stream_)));
  Done("PagedAttention");
}

void CudaBackend::DisableGraphs(const absl::Status& why) {
  std::fprintf(stderr, "%s: recording a CUDA graph failed (%s); running steps eagerly\n",
               name_.c_str(), why.ToString().c_str());
  graphs_enabled_ = false;
  cudaGetLastError();  // a refused capture call must not surface at the next launch check
}

absl::Status CudaBackend::RecoverFromAbort() {
  Enter();
  // The latch still set, so no other wait starts meanwhile; this one ignores it.
  const std::atomic<bool> keep_waiting{false};
  TP_RETURN_IF_ERROR(cuda::WaitForStream(stream_, StrCat(name_, " RecoverFromAbort: the aborted "
                                                                "step's queued work"),
                                         &keep_waiting));
  // A fault is sticky (the context is lost); a refused call of the aborted step is not.
  if (const cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess) {
    return absl::InternalError(StrCat(name_, " RecoverFromAbort: ", cudaGetErrorString(err)));
  }
  cudaGetLastError();
  for (auto& [key, graph] : graphs_) {
    if (graph.exec != nullptr) cudaGraphExecDestroy(graph.exec);
  }
  graphs_.clear();
  first_error_ = absl::OkStatus();
  abort_requested_.store(false);
  return absl::OkStatus();
}

void CudaBackend::ForgetCaptured(const void* owner) {
  for (auto it = graphs_.begin(); it != graphs_.end();) {
    if (std::get<0>(it->first) != owner) {
      ++it;
      continue;
    }
    if (it->second.exec != nullptr) {
      // A replay may still be queued: it must finish before its executable goes.
      Record("ForgetCaptured", WaitForQueuedWork());
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
  // bucket (the attention grid is baked into the graph; per-row lengths are read from the step):
  // kernels/step_capture.h, which the memory plan counts the recordings by.
  const int64_t bucket = CaptureContextBucket(step_.max_decode_context);
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
  // FlashInfer's plan for a recorded step: a fixed grid that always splits keys, uploaded
  // (outside the recording) before the run or replay that reads it.
  if (flashinfer_ != nullptr) PlanAttentionStep(/*cuda_graph=*/true);
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
  Record("Synchronize", WaitForQueuedWork());
  Record("Synchronize", TPK_CUDA(cudaGetLastError()));
  return first_error_;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device_ordinal,
                                                           const CudaBackendOptions& options) {
  return CudaBackend::Create(device_ordinal, options);
}

}  // namespace tpserve
