#include "worker/launch_counting.h"

namespace tpserve {

CountingBackend::CountingBackend(Backend* inner, std::optional<ProjectionFusion> fusion)
    : inner_(inner), fusion_(fusion.value_or(inner->projection_fusion())) {}

void CountingBackend::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  ++counts_[Launch::kUpload];
  inner_->CopyToDevice(dst, src, bytes);
}

absl::Status CountingBackend::CopyToHost(void* dst, const void* src, int64_t bytes) {
  ++counts_[Launch::kDownload];
  return inner_->CopyToHost(dst, src, bytes);
}

void CountingBackend::Copy2D(void* dst, int64_t dst_stride_bytes, const void* src,
                             int64_t src_stride_bytes, int64_t row_bytes, int64_t rows) {
  ++counts_[Launch::kCopy];
  inner_->Copy2D(dst, dst_stride_bytes, src, src_stride_bytes, row_bytes, rows);
}

void CountingBackend::FillZero(void* dst, int64_t bytes) {
  ++counts_[Launch::kFill];
  inner_->FillZero(dst, bytes);
}

void CountingBackend::BeginStep(const StepInputs& step) {
  ++counts_[Launch::kUpload];  // a GPU backend's one copy of the step's metadata
  inner_->BeginStep(step);
}

void CountingBackend::MatMul(const void* x, int64_t m, const WeightMatrix& w, void* y,
                             DType y_dtype) {
  ++counts_[Launch::kGemm];
  inner_->MatMul(x, m, w, y, y_dtype);
}

void CountingBackend::MatMulMany(const void* x, int64_t m, absl::Span<const MatMulOut> outs,
                                 DType y_dtype, const WeightMatrix* fused) {
  if (fused != nullptr && fusion_.fuses) {
    counts_[Launch::kGemm] += 1;
    counts_[Launch::kSplit] += fusion_.split_launches;
  } else {
    counts_[Launch::kGemm] += static_cast<int64_t>(outs.size());
  }
  inner_->MatMulMany(x, m, outs, y_dtype, fused);
}

void CountingBackend::MatMulChunked(const void* x, int64_t m, const WeightMatrix& w,
                                    int64_t num_chunks, float* y) {
  ++counts_[Launch::kGemm];
  inner_->MatMulChunked(x, m, w, num_chunks, y);
}

void CountingBackend::SumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out) {
  ++counts_[Launch::kChunkSum];
  inner_->SumChunks(chunks, num_chunks, count, out);
}

void CountingBackend::RmsNorm(const void* x, const float* weight, int64_t rows, int64_t dim,
                              float eps, void* y) {
  ++counts_[Launch::kNorm];
  inner_->RmsNorm(x, weight, rows, dim, eps, y);
}

void CountingBackend::Rope(void* x, int64_t num_heads, int64_t head_dim, const float* inv_freq,
                           RopeLayout layout) {
  ++counts_[Launch::kRope];
  inner_->Rope(x, num_heads, head_dim, inv_freq, layout);
}

void CountingBackend::GatedActivation(Activation act, const void* gate, const void* up,
                                      int64_t count, void* out) {
  ++counts_[Launch::kActivation];
  inner_->GatedActivation(act, gate, up, count, out);
}

void CountingBackend::RouteExperts(const ExpertRouting& routing, const float* logits, int64_t rows,
                                   const float* correction_bias, int32_t* ids, float* weights) {
  ++counts_[Launch::kOtherOp];
  inner_->RouteExperts(routing, logits, rows, correction_bias, ids, weights);
}

void CountingBackend::MoeExperts(const void* x, int64_t rows, absl::Span<const ExpertMlp> experts,
                                 const ExpertMlp* shared, Activation act, const int32_t* ids,
                                 const float* weights, bool weights_on_input, int64_t top_k,
                                 int64_t num_chunks, const MoeWorkspace& scratch, float* out) {
  ++counts_[Launch::kOtherOp];
  inner_->MoeExperts(x, rows, experts, shared, act, ids, weights, weights_on_input, top_k,
                     num_chunks, scratch, out);
}

void CountingBackend::MoeExpertSlots(const void* x, int64_t rows,
                                     absl::Span<const ExpertMlp> experts, int64_t first_expert,
                                     Activation act, const int32_t* ids, const float* weights,
                                     bool weights_on_input, int64_t top_k, int64_t num_chunks,
                                     const int32_t* slot_pos, const MoeWorkspace& scratch,
                                     float* slots) {
  ++counts_[Launch::kOtherOp];
  inner_->MoeExpertSlots(x, rows, experts, first_expert, act, ids, weights, weights_on_input, top_k,
                         num_chunks, slot_pos, scratch, slots);
}

void CountingBackend::MoeCombine(const void* x, int64_t rows, const float* slots,
                                 const int32_t* slot_pos, const float* weights,
                                 bool weights_on_input, int64_t top_k, int64_t num_chunks,
                                 int64_t hidden, const ExpertMlp* shared, Activation act,
                                 const MoeWorkspace& scratch, float* out) {
  ++counts_[Launch::kOtherOp];
  inner_->MoeCombine(x, rows, slots, slot_pos, weights, weights_on_input, top_k, num_chunks, hidden,
                     shared, act, scratch, out);
}

void CountingBackend::Add(const void* a, const void* b, int64_t count, void* out) {
  ++counts_[Launch::kAdd];
  inner_->Add(a, b, count, out);
}

void CountingBackend::Scale(void* x, int64_t count, float factor) {
  ++counts_[Launch::kScale];
  inner_->Scale(x, count, factor);
}

void CountingBackend::SoftCapF32(float* x, int64_t count, float cap) {
  ++counts_[Launch::kSoftCap];
  inner_->SoftCapF32(x, count, cap);
}

void CountingBackend::EmbeddingRows(const WeightMatrix& table, int64_t first_row, void* out) {
  ++counts_[Launch::kEmbedding];
  inner_->EmbeddingRows(table, first_row, out);
}

void CountingBackend::GatherLogitRows(const void* x, int64_t row_elems, void* out) {
  ++counts_[Launch::kGatherRows];
  inner_->GatherLogitRows(x, row_elems, out);
}

void CountingBackend::WriteKv(const void* k_new, const void* v_new, const KvPoolView& pool) {
  ++counts_[Launch::kKvWrite];
  inner_->WriteKv(k_new, v_new, pool);
}

void CountingBackend::PagedAttention(const void* q, int64_t num_heads,
                                     const AttentionParams& params, const KvPoolView& pool,
                                     void* out) {
  ++counts_[Launch::kAttention];
  inner_->PagedAttention(q, num_heads, params, pool, out);
}

void CountingBackend::RopePart(void* x, int64_t num_heads, int64_t head_stride, int64_t offset,
                               int64_t rope_dim, const float* inv_freq, RopeLayout layout) {
  ++counts_[Launch::kOtherOp];
  inner_->RopePart(x, num_heads, head_stride, offset, rope_dim, inv_freq, layout);
}

void CountingBackend::PrefillAttention(const void* q, const void* k, const void* v,
                                       int64_t num_heads, int64_t key_dim, int64_t value_dim,
                                       float scale, void* out) {
  ++counts_[Launch::kOtherOp];
  inner_->PrefillAttention(q, k, v, num_heads, key_dim, value_dim, scale, out);
}

absl::Status CountingCommunicator::AllReduceSum(absl::Span<float> data) {
  ++counts_[Launch::kAllReduce];
  return inner_->AllReduceSum(data);
}

absl::Status CountingCommunicator::AllGather(absl::Span<const float> in, absl::Span<float> out) {
  ++counts_[Launch::kAllGather];
  return inner_->AllGather(in, out);
}

absl::Status CountingCommunicator::AllReduceSum(void* data, int64_t count, DType dtype) {
  ++counts_[Launch::kAllReduce];
  return inner_->AllReduceSum(data, count, dtype);
}

absl::Status CountingCommunicator::AllGather(const void* in, int64_t in_count, DType dtype,
                                             void* out) {
  ++counts_[Launch::kAllGather];
  return inner_->AllGather(in, in_count, dtype, out);
}

absl::Status CountingCommunicator::AllToAll(const void* in, absl::Span<const int64_t> send_counts,
                                            void* out, absl::Span<const int64_t> recv_counts,
                                            DType dtype) {
  ++counts_[Launch::kAllToAll];
  return inner_->AllToAll(in, send_counts, out, recv_counts, dtype);
}

absl::Status CountingCommunicator::Gather(const void* in, int64_t in_count, DType dtype, void* out,
                                          int root) {
  ++counts_[Launch::kGather];
  return inner_->Gather(in, in_count, dtype, out, root);
}

absl::Status CountingCommunicator::Broadcast(absl::Span<uint8_t> data, int root) {
  ++counts_[Launch::kBroadcast];
  return inner_->Broadcast(data, root);
}

}  // namespace tpserve
