#include "kernels/cuda/cuda_moe.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <string>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/check.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/device_wait.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/guarded_launch.h"
#include "kernels/cuda/moe_routing.h"
#include "kernels/cuda/quant_kernels.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kBf16Bytes = 2;

std::atomic<int64_t> grouped_calls{0};

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

int64_t MoeGroupedGemmCalls() { return grouped_calls.load(); }

CudaMoe::CudaMoe(CudaMatMul* matmul, int64_t* scratch_generation,
                 const std::atomic<bool>* abort, CudaMoeOptions options)
    : matmul_(matmul),
      abort_(abort),
      options_(options),
      scratch_generation_(scratch_generation),
      grouped_args_("grouped expert GEMM arguments", scratch_generation, abort),
      grouped_scales_("grouped expert GEMM weight scales", scratch_generation, abort),
      x_fp8_("grouped expert GEMM e4m3 rows", scratch_generation, abort),
      x_scales_("grouped expert GEMM row scales", scratch_generation, abort),
      plan_("expert grouping", scratch_generation, abort) {}

void CudaMoe::PinnedFree::operator()(void* p) const {
  if (p != nullptr) cudaFreeHost(p);
}

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
    // 4096 words: 4094 experts, more than any model has, so this happens once. A larger one
    // frees the old buffer only after a bounded wait for the queued copies that may read it
    // (cudaFreeHost's own synchronisation then finds nothing left to wait for).
    constexpr int64_t kHeaderWords = 4096;
    if (host_header_ != nullptr) {
      TP_RETURN_IF_ERROR(WaitForStream(stream, "the experts' header buffer", abort_));
      TP_RETURN_IF_ERROR(TPK_CUDA(cudaFreeHost(host_header_)));
    }
    host_header_ = nullptr;
    host_header_words_ = 0;
    const int64_t words = std::max(kHeaderWords, layout_.header_words);
    void* p = nullptr;
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaHostAlloc(&p, words * sizeof(int32_t), cudaHostAllocDefault)));
    host_header_ = static_cast<int32_t*>(p);
    host_header_words_ = words;
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

absl::StatusOr<const MoeGemmWeight*> CudaMoe::WeightTable(
    absl::Span<const Backend::ExpertMlp> experts, int bytes_per_value, void* stream) {
  // Everything the table holds is in the key: matrices placed again at the same addresses
  // with other strides get a table of their own.
  std::vector<int64_t> key = {bytes_per_value};
  key.reserve(1 + 12 * experts.size());
  for (int p = 0; p < 3; ++p) {
    for (const Backend::ExpertMlp& m : experts) {
      const WeightMatrix* w = p == 0 ? m.gate : p == 1 ? m.up : m.down;
      key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(w->data)));
      key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(w->scales)));
      key.push_back(w->row_bytes);
      key.push_back(w->scale_stride);
    }
  }
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    Table t;
    const int64_t entries = 3 * static_cast<int64_t>(experts.size());
    const int64_t bytes = entries * static_cast<int64_t>(sizeof(MoeGemmWeight));
    void* pinned = nullptr;
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault)));
    t.host.reset(static_cast<MoeGemmWeight*>(pinned));
    int64_t i = 0;
    for (int p = 0; p < 3; ++p) {
      for (const Backend::ExpertMlp& m : experts) {
        const WeightMatrix* w = p == 0 ? m.gate : p == 1 ? m.up : m.down;
        t.host[i++] = {w->data, w->row_bytes / bytes_per_value,
                       static_cast<const float*>(w->scales), w->scale_stride};
      }
    }
    t.device = std::make_unique<DeviceScratch>("expert weight table", scratch_generation_, abort_);
    TP_RETURN_IF_ERROR(t.device->Reserve(bytes, stream));
    // The source stays alive in the map: the copy may run whenever the stream gets to it.
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpyAsync(t.device->data(), t.host.get(), bytes,
                                                cudaMemcpyHostToDevice,
                                                static_cast<cudaStream_t>(stream))));
    it = tables_.emplace(std::move(key), std::move(t)).first;
  }
  return it->second.device->as<const MoeGemmWeight>();
}

absl::Status CudaMoe::RunExpertsGrouped(MoeGroupedForm form, const void* x, int64_t rows,
                                        absl::Span<const Backend::ExpertMlp> experts,
                                        Activation act, const float* input_weights,
                                        int64_t top_k, int64_t num_chunks,
                                        const Backend::MoeWorkspace& scratch, void* stream) {
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t hidden = experts[0].down->rows, ffn = experts[0].gate->rows;
  const int64_t slots = rows * top_k;
  const bool fp8 = form == MoeGroupedForm::kFp8Block128;
  const int32_t* plan = plan_.as<const int32_t>();
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchGatherExpertRows(x, slots, top_k, hidden,
                                                       plan + layout_.position, input_weights,
                                                       scratch.x_rows, stream)));
  TP_ASSIGN_OR_RETURN(const MoeGemmWeight* table, WeightTable(experts, fp8 ? 1 : 2, stream));
  // Every size below is the slots' capacity, never the grouped count: the host needs no
  // offsets here (the GEMMs read theirs on the device). Rows past offsets[E] (MoeExpertSlots:
  // other ranks' slots) are activated / quantized but read by nothing.
  MoeGemmCall gu;
  gu.form = form;
  gu.num_experts = static_cast<int32_t>(num_experts);
  gu.projections = 2;
  gu.num_chunks = 1;
  gu.n = ffn;
  gu.k = hidden;
  gu.offsets = plan + layout_.offsets;
  gu.weights = table;
  gu.a = scratch.x_rows;
  gu.a_rows = slots;
  gu.d[0] = scratch.gate;
  gu.d[1] = scratch.up;
  MoeGemmCall dn = gu;
  dn.projections = 1;
  dn.num_chunks = static_cast<int32_t>(num_chunks);
  dn.n = hidden;
  dn.k = ffn;
  dn.weights = table + 2 * num_experts;
  dn.a = scratch.gate;
  dn.d[0] = scratch.down;
  dn.d[1] = nullptr;
  dn.d_f32 = true;
  int64_t gu_scales = 0;
  if (fp8) {
    // The weights' tile scales MN-major, as CUTLASS's sm90 blockwise mainloop reads them (the
    // stored rows are K-major): a few KB per call, in scratch, instead of a second copy at load.
    const int64_t gu_k = hidden / kMoeScaleTile, gu_n = MoeCeilDiv(ffn, kMoeScaleTile);
    const int64_t dn_k = ffn / kMoeScaleTile, dn_n = MoeCeilDiv(hidden, kMoeScaleTile);
    gu_scales = 2 * num_experts * gu_k * gu_n;
    TP_RETURN_IF_ERROR(grouped_scales_.Reserve(
        (gu_scales + num_experts * dn_k * dn_n) * static_cast<int64_t>(sizeof(float)), stream));
    float* scales = grouped_scales_.as<float>();
    TP_RETURN_IF_ERROR(TPK_LAUNCH(
        LaunchMoeScalesMnMajor(table, 2 * num_experts, gu_k, gu_n, scales, stream)));
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchMoeScalesMnMajor(table + 2 * num_experts, num_experts,
                                                         dn_k, dn_n, scales + gu_scales,
                                                         stream)));
    gu.b_scales = scales;
    dn.b_scales = scales + gu_scales;
    const int64_t wide = std::max(hidden, ffn);
    TP_RETURN_IF_ERROR(x_fp8_.Reserve(slots * wide, stream));
    TP_RETURN_IF_ERROR(x_scales_.Reserve(
        MoeCeilDiv(wide, kMoeScaleTile) * slots * static_cast<int64_t>(sizeof(float)), stream));
    gu.a = x_fp8_.data();
    gu.a_scales = x_scales_.as<float>();
    dn.a = x_fp8_.data();
    dn.a_scales = x_scales_.as<float>();
  }
  // One argument region per call (the second call's argument kernel must not overwrite what
  // the first GEMM reads; stream order would allow it, separate regions make it obvious).
  const int sms = options_.sm_count;
  const int64_t gu_bytes =
      (MoeGroupedGemmScratchBytes(form, false, MoeGroupCount(gu), sms) + 255) / 256 * 256;
  const int64_t dn_bytes = MoeGroupedGemmScratchBytes(form, true, MoeGroupCount(dn), sms);
  TP_RETURN_IF_ERROR(grouped_args_.Reserve(gu_bytes + dn_bytes, stream));
  uint8_t* args = grouped_args_.as<uint8_t>();
  if (fp8) {
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchQuantizeGroupsFp8(
        scratch.x_rows, slots, hidden, experts[0].gate->activation_scale_ub,
        x_fp8_.as<uint8_t>(), x_scales_.as<float>(), stream)));
  }
  // CUTLASS's grouped GEMM (its can_implement or run refusing comes back as an error code).
  const std::string shape = StrCat(slots, " slots over ", num_experts, " experts, hidden ", hidden,
                                   ", ffn ", ffn, fp8 ? ", fp8 128x128 tiles" : ", bf16");
  TP_RETURN_IF_ERROR(GuardedLaunch("CUTLASS grouped GEMM gate/up", shape, [&] {
    return LaunchMoeGroupedGemm(gu, sms, args, gu_bytes, stream);
  }));
  TP_RETURN_IF_ERROR(Activate(act, scratch.gate, scratch.up, slots * ffn, stream));
  if (fp8) {
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchQuantizeGroupsFp8(
        scratch.gate, slots, ffn, experts[0].down->activation_scale_ub, x_fp8_.as<uint8_t>(),
        x_scales_.as<float>(), stream)));
  }
  TP_RETURN_IF_ERROR(GuardedLaunch("CUTLASS grouped GEMM down", shape, [&] {
    return LaunchMoeGroupedGemm(dn, sms, args + gu_bytes, dn_bytes, stream);
  }));
  grouped_calls.fetch_add(1);
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
  const MoeGroupedForm form = MoeGroupedFormFor(experts, num_chunks, options_.deterministic,
                                                options_.compute_capability);
  if (form != MoeGroupedForm::kNone) {
    TP_RETURN_IF_ERROR(RunExpertsGrouped(form, x, rows, experts, act,
                                         weights_on_input ? weights : nullptr, top_k, num_chunks,
                                         scratch, stream));
  } else {
    TP_RETURN_IF_ERROR(RunExperts(x, rows, experts, act, weights_on_input ? weights : nullptr,
                                  top_k, num_chunks, scratch, stream));
  }
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
  const MoeGroupedForm form = MoeGroupedFormFor(experts, num_chunks, options_.deterministic,
                                                options_.compute_capability);
  if (form != MoeGroupedForm::kNone) {
    TP_RETURN_IF_ERROR(RunExpertsGrouped(form, x, rows, experts, act, input_weights, top_k,
                                         num_chunks, scratch, stream));
  } else {
    TP_RETURN_IF_ERROR(RunExperts(x, rows, experts, act, input_weights, top_k, num_chunks,
                                  scratch, stream));
  }
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
