// Decorators that count what a model launches: CountingBackend forwards every Backend call to
// another backend and counts the ops by kind (worker/step_launches.h's Launch), and
// CountingCommunicator forwards every collective and counts it. step_launches_test runs the
// real LlamaModel::Forward through both and compares with StepLaunchesFor.
//
//   CpuBackend cpu;
//   CountingBackend be(&cpu, CudaProjectionFusion());  // fuse as the CUDA backend would
//   auto model = LlamaModel::Load(cfg, src, {0, 1}, &be, &comm);
//   be.Reset(); model->Forward(...); be.counts()[Launch::kGemm];
//
// A fused MatMulMany counts one GEMM and `fusion.split_launches` splits (what a fusing backend
// launches), then lets the inner backend run it (the CPU multiplies the views). Memory comes
// from the inner backend (its DeviceBuffers free through it). Threading: as the inner object.
#ifndef TPSERVE_WORKER_LAUNCH_COUNTING_H_
#define TPSERVE_WORKER_LAUNCH_COUNTING_H_

#include <cstdint>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "worker/step_launches.h"

namespace tpserve {

class CountingBackend final : public Backend {
 public:
  // `fusion`: what projection_fusion() reports (so the loader stacks for it); unset: inner's.
  explicit CountingBackend(Backend* inner, std::optional<ProjectionFusion> fusion = std::nullopt);

  const LaunchCounts& counts() const { return counts_; }
  void Reset() { counts_ = {}; }

  std::string_view name() const override { return inner_->name(); }
  BackendKind kind() const override { return inner_->kind(); }
  DType activation_dtype() const override { return inner_->activation_dtype(); }
  bool SupportsWeight(const TensorFormat& f) const override { return inner_->SupportsWeight(f); }
  bool SupportsKvDtype(DType d) const override { return inner_->SupportsKvDtype(d); }
  bool host_memory() const override { return inner_->host_memory(); }
  absl::StatusOr<DeviceBuffer> Allocate(int64_t bytes, std::string_view what) override {
    return inner_->Allocate(bytes, what);
  }
  void CopyToDevice(void* dst, const void* src, int64_t bytes) override;
  absl::Status CopyToHost(void* dst, const void* src, int64_t bytes) override;
  void Copy2D(void* dst, int64_t dst_stride_bytes, const void* src, int64_t src_stride_bytes,
              int64_t row_bytes, int64_t rows) override;
  void FillZero(void* dst, int64_t bytes) override;
  absl::StatusOr<PlacedWeight> PlaceWeight(const HostMatrix& host, WeightUse use,
                                           std::string_view what) override {
    return inner_->PlaceWeight(host, use, what);
  }
  void* stream() const override { return inner_->stream(); }
  void Free(void* data, int64_t bytes) override { inner_->Free(data, bytes); }
  void BeginStep(const StepInputs& step) override;
  void MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y, DType y_dtype) override;
  void MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs, DType y_dtype,
                  const WeightMatrix* fused) override;
  ProjectionFusion projection_fusion() const override { return fusion_; }
  void MatMulChunked(const void* x, int64_t m, const WeightMatrix& w, int64_t num_chunks,
                     float* y) override;
  void SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) override;
  void RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim, float eps,
               void* y) override;
  void Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
            RopeLayout layout) override;
  void GatedActivation(Activation act, const void* gate, const void* up, int64_t count,
                       void* out) override;
  bool SupportsExperts() const override { return inner_->SupportsExperts(); }
  void RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                    const float* correction_bias, int32_t* ids, float* weights) override;
  void MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                  const ExpertMlp* shared, Activation act, const int32_t* ids, const float* weights,
                  bool weights_on_input, int64_t top_k, int64_t num_chunks,
                  const MoeWorkspace& scratch, float* out) override;
  void MoeExpertSlots(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                      int64_t first_expert, Activation act, const int32_t* ids,
                      const float* weights, bool weights_on_input, int64_t top_k,
                      int64_t num_chunks, const int32_t* slot_pos, const MoeWorkspace& scratch,
                      float* slots) override;
  void MoeCombine(const void* x, int64_t rows, const float* slots, const int32_t* slot_pos,
                  const float* weights, bool weights_on_input, int64_t top_k, int64_t num_chunks,
                  int64_t hidden, const ExpertMlp* shared, Activation act,
                  const MoeWorkspace& scratch, float* out) override;
  void Add(const void* a, const void* b, int64_t count, void* out) override;
  void Scale(void* x, int64_t count, float factor) override;
  void SoftCapF32(float* x, int64_t count, float cap) override;
  void EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) override;
  void GatherLogitRows(const void* x, int64_t row_elems, void* out) override;
  void WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) override;
  absl::StatusOr<int64_t> ReserveAttention(const AttentionReservation& limits) override {
    return inner_->ReserveAttention(limits);
  }
  bool SupportsAttention(const AttentionParams& p) const override {
    return inner_->SupportsAttention(p);
  }
  void PagedAttention(const void* q, int64_t num_heads, const AttentionParams& params,
                      const KvPoolView& pool, void* out) override;
  bool SupportsLatentAttention() const override { return inner_->SupportsLatentAttention(); }
  void RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset, int64_t rope_dim,
                const float* inv_freq, RopeLayout layout) override;
  bool SupportsPrefillAttention() const override { return inner_->SupportsPrefillAttention(); }
  void PrefillAttention(const void* q, const void* k, const void* v, int64_t num_heads,
                        int64_t key_dim, int64_t value_dim, float scale, void* out) override;
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  void RequestAbort() override { inner_->RequestAbort(); }
  bool SupportsStepCapture() const override { return inner_->SupportsStepCapture(); }
  absl::Status RunCaptured(const void* owner, int64_t key,
                           absl::FunctionRef<absl::Status()> body) override {
    return inner_->RunCaptured(owner, key, body);
  }
  void ForgetCaptured(const void* owner) override { inner_->ForgetCaptured(owner); }

 private:
  Backend* inner_;
  ProjectionFusion fusion_;
  LaunchCounts counts_;
};

class CountingCommunicator final : public Communicator {
 public:
  explicit CountingCommunicator(Communicator* inner) : inner_(inner) {}

  const LaunchCounts& counts() const { return counts_; }
  void Reset() { counts_ = {}; }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string Describe() const override { return inner_->Describe(); }
  absl::Status AllReduceSum(absl::Span<float> data) override;
  absl::Status AllGather(absl::Span<const float> in, absl::Span<float> out) override;
  absl::Status AllReduceSum(void* data, int64_t count, DType dtype) override;
  absl::Status AllGather(const void* in, int64_t in_count, DType dtype, void* out) override;
  absl::Status AllToAll(const void* in, absl::Span<const int64_t> send_counts, void* out,
                        absl::Span<const int64_t> recv_counts, DType dtype) override;
  absl::Status Gather(const void* in, int64_t in_count, DType dtype, void* out, int root) override;
  absl::Status Broadcast(absl::Span<uint8_t> data, int root) override;
  absl::Status Barrier() override { return inner_->Barrier(); }
  absl::Status AwaitCollectives() override { return inner_->AwaitCollectives(); }
  void RequestAbort() override { inner_->RequestAbort(); }

 private:
  Communicator* inner_;
  LaunchCounts counts_;
};

}  // namespace tpserve

#endif  // TPSERVE_WORKER_LAUNCH_COUNTING_H_
