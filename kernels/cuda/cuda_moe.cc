#include "kernels/cuda/cuda_moe.h"

#include <cuda_runtime_api.h>

#include <limits>
#include <string>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/moe_routing.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kBf16Bytes = 2;

uint8_t* Bytes(void* p) { return static_cast<uint8_t*>(p); }

// Every expert's shapes agree with the first's (the CPU checks the same).
void CheckExpertShapes(absl::Span<const Backend::ExpertMlp> experts) {
  const int64_t hidden = experts[0].down->rows, ffn = experts[0].gate->rows;
  for (const Backend::ExpertMlp& m : experts) {
    TP_CHECK(m.gate->cols == hidden && m.up->cols == hidden && m.down->rows == hidden &&
                 m.gate->rows == ffn && m.up->rows == ffn && m.down->cols == ffn,
             "MoeExperts: an expert's shapes disagree with the others'");
  }
}

absl::Status Activate(Activation act, void* gate, const void* up, int64_t count, void* stream) {
  switch (act) {
    case Activation::kSilu:
      return TPK_LAUNCH(LaunchSiluMul(gate, up, count, gate, stream));
    case Activation::kGeluTanh:
      return TPK_LAUNCH(LaunchGeluTanhMul(gate, up, count, gate, stream));
  }
  return absl::UnimplementedError(
      StrCat("activation ", static_cast<int>(act), " has no CUDA kernel"));
}

// One gated MLP over n rows of bf16 x: gate and up into `gate` / `up` (bf16 [n, ffn]), the
// activation into `gate`, down cut into num_chunks chunks into `down` (f32 [num_chunks, n,
// hidden]).
absl::Status GatedMlp(CudaMatMul& matmul, const Backend::ExpertMlp& mlp, const void* x,
                      int64_t n, Activation act, int64_t num_chunks, void* gate, void* up,
                      float* down, void* stream) {
  TP_RETURN_IF_ERROR(matmul.Run(x, n, *mlp.gate, gate, DType::kBF16, stream));
  TP_RETURN_IF_ERROR(matmul.Run(x, n, *mlp.up, up, DType::kBF16, stream));
  TP_RETURN_IF_ERROR(Activate(act, gate, up, n * mlp.gate->rows, stream));
  return matmul.RunChunked(gate, n, *mlp.down, num_chunks, down, stream);
}

}  // namespace

CudaMoe::CudaMoe(CudaMatMul* matmul, int64_t* scratch_generation,
                 const std::atomic<bool>* abort)
    : matmul_(matmul), abort_(abort), plan_("expert grouping", scratch_generation, abort) {}

CudaMoe::~CudaMoe() {
  if (host_header_ != nullptr) cudaFreeHost(host_header_);
}

absl::Status CudaMoe::Route(const ExpertRouting& routing, const float* logits, int64_t rows,
                            const float* correction_bias, int32_t* ids, float* weights,
                            void* stream) {
  if (const std::string problem = ExpertRoutingProblem(routing); !problem.empty()) {
    return absl::InvalidArgumentError(StrCat("routing rule: ", problem));
  }
  if (const std::string problem = RoutingRuleProblem(routing); !problem.empty()) {
    return absl::UnimplementedError(StrCat("routing rule: ", problem));
  }
  return TPK_LAUNCH(LaunchRouteExperts(RoutingRuleOf(routing), logits, rows, correction_bias,
                                       ids, weights, stream));
}

absl::Status CudaMoe::Group(const int32_t* ids, int64_t slots, ExpertRange range,
                            bool refuse_foreign, void* stream) {
  TP_CHECK(range.count >= 1 && slots >= 1 && slots <= std::numeric_limits<int32_t>::max(), "expert grouping: bad sizes");
  layout_ = MoePlanLayoutFor(slots, range.count);
  TP_RETURN_IF_ERROR(plan_.Reserve(layout_.words * static_cast<int64_t>(sizeof(int32_t)), stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(
      LaunchGroupByExpert(ids, slots, range, refuse_foreign, plan_.as<int32_t>(), stream)));
  if (layout_.header_words > host_header_words_) {
    if (host_header_ != nullptr) TP_RETURN_IF_ERROR(TPK_CUDA(cudaFreeHost(host_header_)));
    host_header_ = nullptr;
    host_header_words_ = 0;
    void* p = nullptr;
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaHostAlloc(
        &p, layout_.header_words * sizeof(int32_t), cudaHostAllocDefault)));
    host_header_ = static_cast<int32_t*>(p);
    host_header_words_ = layout_.header_words;
  }
  TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpyAsync(
      host_header_, plan_.as<int32_t>() + layout_.offsets, layout_.header_words * sizeof(int32_t),
      cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream))));
  // The one host wait of a MoE op: the experts' GEMMs are sized by their row counts. A grouped
  // GEMM that reads the counts on the device would not wait (README.md, "Mixtures of experts").
  TP_RETURN_IF_ERROR(WaitForStream(stream, "the experts' row counts", abort_));
  if (const int32_t bad = host_header_[layout_.bad_ids]; bad > 0) {
    return absl::InvalidArgumentError(StrCat(
        bad, " of ", slots, " expert ids are outside [", refuse_foreign ? range.first : 0, ", ",
        refuse_foreign ? StrCat(range.first + range.count) : std::string("num_experts"), ")"));
  }
  offsets_.assign(host_header_ + layout_.offsets,
                  host_header_ + layout_.offsets + range.count + 1);
  return absl::OkStatus();
}

SlotOutputs CudaMoe::Grouped(const float* down, const int32_t* ids, int32_t first_expert) const {
  const int32_t* plan = plan_.as<const int32_t>();
  SlotOutputs o;
  o.data = down;
  o.offsets = plan + layout_.offsets;
  o.position = plan + layout_.position;
  o.ids = ids;
  o.first_expert = first_expert;
  return o;
}

absl::Status CudaMoe::RunExperts(const void* x, int64_t rows,
                                 absl::Span<const Backend::ExpertMlp> experts, Activation act,
                                 const float* input_weights, int64_t top_k, int64_t num_chunks,
                                 const Backend::MoeWorkspace& scratch, void* stream) {
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t hidden = experts[0].down->rows, ffn = experts[0].gate->rows;
  const int32_t* position = plan_.as<const int32_t>() + layout_.position;
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchGatherExpertRows(x, rows * top_k, top_k, hidden, position,
                                                       input_weights, scratch.x_rows, stream)));
  // Gate and up of each expert over its block of grouped rows; one activation over them all.
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t first = offsets_[e], n = offsets_[e + 1] - offsets_[e];
    if (n == 0) continue;
    const void* xe = Bytes(scratch.x_rows) + first * hidden * kBf16Bytes;
    TP_RETURN_IF_ERROR(matmul_->Run(xe, n, *experts[e].gate,
                                    Bytes(scratch.gate) + first * ffn * kBf16Bytes, DType::kBF16,
                                    stream));
    TP_RETURN_IF_ERROR(matmul_->Run(xe, n, *experts[e].up,
                                    Bytes(scratch.up) + first * ffn * kBf16Bytes, DType::kBF16,
                                    stream));
  }
  TP_RETURN_IF_ERROR(Activate(act, scratch.gate, scratch.up, offsets_[num_experts] * ffn, stream));
  // Down: expert e's block [num_chunks, n_e, hidden] from row num_chunks * offsets[e].
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t first = offsets_[e], n = offsets_[e + 1] - offsets_[e];
    if (n == 0) continue;
    TP_RETURN_IF_ERROR(matmul_->RunChunked(Bytes(scratch.gate) + first * ffn * kBf16Bytes, n,
                                           *experts[e].down, num_chunks,
                                           scratch.down + num_chunks * first * hidden, stream));
  }
  return absl::OkStatus();
}

absl::Status CudaMoe::AddShared(const void* x, int64_t rows, const Backend::ExpertMlp* shared,
                                Activation act, int64_t num_chunks,
                                const Backend::MoeWorkspace& scratch, float* out, void* stream) {
  if (shared == nullptr) return absl::OkStatus();
  const int64_t hidden = shared->down->rows;
  TP_CHECK(shared->gate->cols == hidden && shared->up->cols == hidden,
           "MoeExperts: the shared expert's shapes disagree");
  // The routed outputs are in `out` now: the shared expert reuses the scratch.
  TP_RETURN_IF_ERROR(GatedMlp(*matmul_, *shared, x, rows, act, num_chunks, scratch.gate,
                              scratch.up, scratch.down, stream));
  return TPK_LAUNCH(LaunchAddF32(out, scratch.down, num_chunks * rows * hidden, out, stream));
}

absl::Status CudaMoe::Run(const void* x, int64_t rows,
                          absl::Span<const Backend::ExpertMlp> experts,
                          const Backend::ExpertMlp* shared, Activation act, const int32_t* ids,
                          const float* weights, bool weights_on_input, int64_t top_k,
                          int64_t num_chunks, const Backend::MoeWorkspace& scratch, float* out,
                          void* stream) {
  TP_CHECK(!experts.empty() && top_k >= 1 && num_chunks >= 1, "MoeExperts: nothing to run");
  CheckExpertShapes(experts);
  if (rows <= 0) return absl::OkStatus();
  const int64_t hidden = experts[0].down->rows;
  const ExpertRange all{0, static_cast<int32_t>(experts.size())};
  TP_RETURN_IF_ERROR(Group(ids, rows * top_k, all, /*refuse_foreign=*/true, stream));
  TP_RETURN_IF_ERROR(RunExperts(x, rows, experts, act, weights_on_input ? weights : nullptr,
                                top_k, num_chunks, scratch, stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchCombineExperts(Grouped(scratch.down, ids, 0), rows, top_k,
                                                     num_chunks, hidden,
                                                     weights_on_input ? nullptr : weights, out,
                                                     stream)));
  return AddShared(x, rows, shared, act, num_chunks, scratch, out, stream);
}

absl::Status CudaMoe::RunSlots(const void* x, int64_t rows,
                               absl::Span<const Backend::ExpertMlp> experts,
                               int64_t first_expert, Activation act, const int32_t* ids,
                               const float* input_weights, int64_t top_k, int64_t num_chunks,
                               const int32_t* slot_pos, const Backend::MoeWorkspace& scratch,
                               float* slots, void* stream) {
  TP_CHECK(!experts.empty() && top_k >= 1 && num_chunks >= 1, "MoeExpertSlots: nothing to run");
  CheckExpertShapes(experts);
  if (rows <= 0) return absl::OkStatus();
  const ExpertRange mine{static_cast<int32_t>(first_expert), static_cast<int32_t>(experts.size())};
  TP_RETURN_IF_ERROR(Group(ids, rows * top_k, mine, /*refuse_foreign=*/false, stream));
  if (offsets_.back() == 0) return absl::OkStatus();  // no slot of this rank's experts
  TP_RETURN_IF_ERROR(RunExperts(x, rows, experts, act, input_weights, top_k, num_chunks, scratch,
                                stream));
  return TPK_LAUNCH(LaunchWriteExpertSlots(Grouped(scratch.down, ids, mine.first), rows * top_k,
                                           num_chunks, experts[0].down->rows, slot_pos, slots,
                                           stream));
}

absl::Status CudaMoe::Combine(const void* x, int64_t rows, const float* slots,
                              const int32_t* slot_pos, const float* weights,
                              bool weights_on_input, int64_t top_k, int64_t num_chunks,
                              int64_t hidden, const Backend::ExpertMlp* shared, Activation act,
                              const Backend::MoeWorkspace& scratch, float* out, void* stream) {
  TP_CHECK(top_k >= 1 && num_chunks >= 1, "MoeCombine: nothing to combine");
  if (rows <= 0) return absl::OkStatus();
  SlotOutputs received;
  received.data = slots;
  received.slot_pos = slot_pos;
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchCombineExperts(received, rows, top_k, num_chunks, hidden,
                                                     weights_on_input ? nullptr : weights, out,
                                                     stream)));
  return AddShared(x, rows, shared, act, num_chunks, scratch, out, stream);
}

}  // namespace tpserve::cuda
