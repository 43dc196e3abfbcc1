// The CPU implementation of Backend: SIMD kernels picked at run time (AVX2 or the portable
// scalar reference), a persistent thread pool, and host memory for everything.
//
//   auto backend = std::make_unique<CpuBackend>(CpuBackendOptions{.num_threads = 2});
//   backend->MatMul(x, m, w, y, DType::kF32);  // see kernels/backend.h
//
// Set TPSERVE_CPU_ISA=scalar in the environment (or options.isa) to force the reference path.
// TPSERVE_CPU_BF16_MATMUL=onednn (or options.onednn_bf16) multiplies bf16 weights through
// oneDNN (kernels/cpu/onednn_bf16_matmul.h) on CPUs with AVX-512 BF16: activations rounded to
// bf16, each matrix packed at PlaceWeight beside its stored form; the name says "+onednn-bf16".
// Opt-in while the memory plan does not count the packed copies, one-row steps are slower than
// ours, and MatMulChunked (--deterministic_tp) keeps our kernels and f32 activations, so that
// every degree agrees but a chunk no longer equals MatMul of it alone.
// Threading: like every Backend, one caller thread at a time; ops use the pool internally.
#ifndef TPSERVE_KERNELS_CPU_CPU_BACKEND_H_
#define TPSERVE_KERNELS_CPU_CPU_BACKEND_H_

#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_attention.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_matmul.h"
#include "kernels/cpu/cpu_moe.h"
#include "kernels/cpu/onednn_bf16_matmul.h"
#include "kernels/cpu/thread_pool.h"

namespace tpserve {

struct CpuBackendOptions {
  int num_threads = 1;         // >= 1; 1 runs every op on the calling thread
  std::optional<CpuIsa> isa;   // default: DetectCpuIsa()
  // Tests of callers of Backend::RunCaptured: SupportsStepCapture() says true, and RunCaptured
  // runs body every time (the CPU records nothing), so the padded-batch logic runs on the CPU.
  // It keys and counts runs as the CUDA backend does (step_capture_counts()), and holds body
  // to RunCaptured's contract: CopyToHost, Synchronize, Allocate and BeginStep inside it, or a
  // replay of a step whose shape differs from its recording's, are FAILED_PRECONDITION.
  bool emulate_step_capture = false;
  // Time every op (wall clock, calling thread) into profile(): where a step's time goes. Off
  // by default; on, it costs two clock reads per op.
  bool profile = false;
  // bf16 weights through oneDNN, where OneDnnBf16MatMul::Supported() (else ignored). Default:
  // the environment, TPSERVE_CPU_BF16_MATMUL=onednn.
  std::optional<bool> onednn_bf16;
};

// What RunCaptured did under CpuBackendOptions::emulate_step_capture, since the backend was
// made, per recording key (owner, key, the step's context bucket: kernels/step_capture.h), as
// the CUDA backend does: the key's first run eager (it warms buffers and plans), the second
// recorded, every later one a replay. The CPU runs body each time.
struct StepCaptureCounts {
  int64_t warm_runs = 0;
  int64_t recordings = 0;
  int64_t replays = 0;
};

// Wall time and calls per op kind, summed since the last ResetProfile().
struct CpuOpProfile {
  enum Op { kMatMul, kMatMulChunked, kSumChunks, kRmsNorm, kRope, kGatedActivation, kAdd,
            kElementwise, kEmbedding, kGatherLogitRows, kWriteKv, kAttention, kRouteExperts,
            kMoeExperts, kNumOps };
  static const char* Name(int op);
  std::array<double, kNumOps> seconds{};
  std::array<int64_t, kNumOps> calls{};
  double TotalSeconds() const;
};

class CpuBackend : public Backend {
 public:
  // REQUIRES: options.num_threads >= 1; an explicit isa must be supported by this CPU.
  explicit CpuBackend(const CpuBackendOptions& options);

  CpuIsa isa() const { return isa_; }
  // Whether bf16 weights placed from now on are multiplied through oneDNN.
  bool onednn_bf16() const { return onednn_bf16_; }
  // With CpuBackendOptions::profile: what the ops took since the last reset (else all zero).
  const CpuOpProfile& profile() const { return profile_; }
  void ResetProfile() { profile_ = CpuOpProfile{}; }
  int num_threads() const { return pool_.num_threads(); }

  std::string_view name() const override { return name_; }
  BackendKind kind() const override { return BackendKind::kCpu; }
  DType activation_dtype() const override { return DType::kF32; }
  bool SupportsWeight(const TensorFormat& format) const override;
  bool SupportsKvDtype(DType dtype) const override;
  bool host_memory() const override { return true; }

  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what) override;
  void CopyToDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, int64_t bytes) override;
  void Copy2D(void* dst, int64_t dst_stride_bytes, const void* src, int64_t src_stride_bytes,
              int64_t row_bytes, int64_t rows) override;
  void FillZero(void* dst, int64_t bytes) override;
  void* stream() const override { return nullptr; }
  void Free(void* data, int64_t bytes) override;

  // A Q8_0, Q4_0/1 or Q5_0/1 matrix that is only multiplied (WeightUse::kMatMul): CpuMatMul's
  // interleaved form instead of the stored one (kernels/cpu/cpu_matmul.h, matrix.data null),
  // its bytes copied. Otherwise the stored form; with onednn_bf16(), a bf16 matrix also gets its
  // oneDNN packing beside it (matrix.prepared, counted in bytes_copied).
  absl::StatusOr<PlacedWeight> PlaceWeight(const HostMatrix& host, WeightUse use,
                                           std::string_view what) override;

  void BeginStep(const StepInputs& step) override;

  void MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype) override;
  // Does not fuse (projection_fusion() is the default): a `fused` matrix is ignored and its
  // views (outs[i].w, stored form on this backend) multiplied in the one pass.
  void MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs, DType y_dtype,
                  const WeightMatrix* fused) override;
  void MatMulChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                     float* y) override;
  void SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) override;
  void RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim, float eps,
               void* y) override;
  void Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
            RopeLayout layout) override;
  bool SupportsLatentAttention() const override { return true; }
  bool SupportsPrefillAttention() const override { return true; }
  void RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset, int64_t rope_dim,
                const float* inv_freq, RopeLayout layout) override;
  void PrefillAttention(const void* q, const void* k, const void* v, int64_t num_heads,
                        int64_t key_dim, int64_t value_dim, float scale, void* out) override;
  void GatedActivation(Activation act, const void* gate, const void* up, int64_t count,
                       void* out) override;
  void Add(const void* a, const void* b, int64_t count, void* out) override;
  void Scale(void* x, int64_t count, float factor) override;
  void SoftCapF32(float* x, int64_t count, float cap) override;
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
                  const float* weights, bool weights_on_input, int64_t top_k,
                  int64_t num_chunks, int64_t hidden, const ExpertMlp* shared, Activation act,
                  const MoeWorkspace& scratch, float* out) override;
  void EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) override;
  void GatherLogitRows(const void* x, int64_t row_elems, void* out) override;
  void WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) override;
  bool SupportsAttention(const AttentionParams&) const override { return true; }
  void PagedAttention(const void* q, int64_t num_heads, const AttentionParams& params,
                      const KvPoolView& pool, void* out) override;
  absl::Status Synchronize() override;
  bool SupportsStepCapture() const override { return emulate_step_capture_; }
  absl::Status RunCaptured(const void* owner, int64_t key,
                           absl::FunctionRef<absl::Status()> body) override;
  void ForgetCaptured(const void* owner) override;
  // With emulate_step_capture: what RunCaptured did (else all zero).
  const StepCaptureCounts& step_capture_counts() const { return capture_counts_; }

 private:
  // Adds the scope's wall time to profile_ (when profiling).
  class OpTimer {
   public:
    OpTimer(CpuBackend* backend, CpuOpProfile::Op op)
        : profile_(backend->profiling_ ? &backend->profile_ : nullptr), op_(op) {
      if (profile_ != nullptr) start_ = std::chrono::steady_clock::now();
    }
    ~OpTimer() {
      if (profile_ == nullptr) return;
      profile_->seconds[op_] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      ++profile_->calls[op_];
    }

   private:
    CpuOpProfile* profile_;
    CpuOpProfile::Op op_;
    std::chrono::steady_clock::time_point start_;
  };

  // Add without its own profile entry (SumChunks' time already counts it).
  void AddUntimed(const void* a, const void* b, int64_t count, void* out);
  // Runs fn(begin, end) over [0, count) in chunks worth a thread wake-up.
  void ParallelChunks(int64_t count, int64_t min_chunk,
                      absl::FunctionRef<void(int64_t, int64_t)> fn);

  // FAILED_PRECONDITION naming `op` inside an emulated RunCaptured body.
  absl::Status RefusedInsideCapture(const char* op) const;

  const CpuIsa isa_;
  const bool emulate_step_capture_;
  // The emulation's recordings: each key's step shape (rows, sequences, logit rows) and how
  // many runs it has had; whether a body is running.
  struct Recording {
    size_t rows = 0, seqs = 0, logit_rows = 0;
    int64_t runs = 0;
  };
  std::map<std::tuple<const void*, int64_t, int64_t>, Recording> recordings_;
  StepCaptureCounts capture_counts_;
  bool in_capture_body_ = false;
  const bool profiling_;
  CpuOpProfile profile_;
  const bool onednn_bf16_;
  const std::string name_;
  const CpuKernels& kernels_;
  ThreadPool pool_;
  CpuMatMul matmul_;
  CpuMoe moe_;
  CpuAttention attention_;
  StepInputs step_;
  // cos and sin of every row's angles for one table of inverse frequencies, [rows, half] each:
  // made by the step's first RopePart with those frequencies (the model keeps one table per
  // distinct RoPE configuration), shared by every layer's q and k after it; BeginStep clears.
  struct RopeAngles {
    const float* inv_freq = nullptr;
    int64_t half = 0;
    std::vector<float> cos, sin;
  };
  const RopeAngles& AnglesFor(const float* inv_freq, int64_t half);
  // w's oneDNN packing when PlaceWeight made one for exactly this matrix (not a view of other
  // rows or columns of it); nullptr otherwise.
  const OneDnnBf16MatMul* PackedBf16(const WeightMatrix& w) const;
  // y = x * w^T (+ w.bias) through `packed`.
  void RunPacked(const OneDnnBf16MatMul& packed, const float* x, int64_t m, const WeightMatrix& w,
                 float* y);
  std::vector<RopeAngles> rope_angles_;
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_BACKEND_H_
