// MoeGroupedFormFor (moe_grouped_gemm.h): which experts take the grouped GEMM. Plain C++.
#include <cstdint>

#include "formats/tensor_format.h"
#include "kernels/cuda/moe_grouped_gemm.h"

namespace tpserve::cuda {
namespace {

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// w's values as a plain row-major matrix the TMA reads: 16-byte base and rows.
bool PlainRows(const WeightMatrix& w, FormatKind kind) {
  return w.format.kind == kind && w.data != nullptr && Aligned16(w.data) && w.row_bytes % 16 == 0 &&
         w.bias == nullptr && w.input_perm == nullptr && w.rows > 0 && w.cols > 0;
}

}  // namespace

MoeGroupedForm MoeGroupedFormFor(absl::Span<const Backend::ExpertMlp> experts, int64_t num_chunks,
                                 bool deterministic, int compute_capability) {
  if (deterministic || compute_capability != 90 || experts.empty() || num_chunks < 1) {
    return MoeGroupedForm::kNone;
  }
  const FormatKind kind = experts[0].gate->format.kind;
  const int64_t hidden = experts[0].gate->cols, ffn = experts[0].gate->rows;
  if (ffn % num_chunks != 0) return MoeGroupedForm::kNone;
  const int64_t kc = ffn / num_chunks;
  MoeGroupedForm form = MoeGroupedForm::kNone;
  if (kind == FormatKind::kBF16) {
    // bf16 rows of whole 16 bytes for A, B and D (bf16 gate / up out, f32 down out).
    if (hidden % 8 != 0 || ffn % 8 != 0 || kc % 8 != 0) return MoeGroupedForm::kNone;
    form = MoeGroupedForm::kBf16;
  } else if (kind == FormatKind::kFp8Block128) {
    // Whole 128-column scale groups for every K (hidden for gate / up, a chunk for down).
    if (hidden % kMoeScaleTile != 0 || kc % kMoeScaleTile != 0 || ffn % 8 != 0) {
      return MoeGroupedForm::kNone;
    }
    form = MoeGroupedForm::kFp8Block128;
  } else {
    return MoeGroupedForm::kNone;
  }
  const float gate_ub = experts[0].gate->activation_scale_ub;
  const float down_ub = experts[0].down->activation_scale_ub;
  for (const Backend::ExpertMlp& m : experts) {
    for (const WeightMatrix* w : {m.gate, m.up, m.down}) {
      if (!PlainRows(*w, kind)) return MoeGroupedForm::kNone;
      if (form == MoeGroupedForm::kFp8Block128) {
        const int64_t k_tiles = (w->cols + kMoeScaleTile - 1) / kMoeScaleTile;
        if (w->scales == nullptr || w->scale_stride < k_tiles) return MoeGroupedForm::kNone;
      }
    }
    if (m.gate->rows != ffn || m.up->rows != ffn || m.gate->cols != hidden ||
        m.up->cols != hidden || m.down->rows != hidden || m.down->cols != ffn) {
      return MoeGroupedForm::kNone;
    }
    if (form == MoeGroupedForm::kFp8Block128 &&
        (m.gate->activation_scale_ub != gate_ub || m.up->activation_scale_ub != gate_ub ||
         m.down->activation_scale_ub != down_ub)) {
      return MoeGroupedForm::kNone;
    }
  }
  return form;
}

}  // namespace tpserve::cuda
