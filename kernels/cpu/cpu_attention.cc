#include "kernels/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "formats/dtype.h"
#include "kernels/check.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

// Query rows per task: small enough to balance prefill over threads, large enough that decode
// (one row) and short prompts make few tasks.
constexpr int64_t kRowsPerTask = 16;

// Offset in floats of (position's slot, kv head) inside one layer's pool.
int64_t SlotOffset(const KvPoolView& pool, absl::Span<const int32_t> block_table,
                   int64_t position, int64_t kv_head) {
  const int64_t logical = position / pool.block_size_tokens;
  TP_CHECK(logical < static_cast<int64_t>(block_table.size()), "block table too short");
  const int64_t physical = block_table[logical];
  TP_CHECK(physical >= 0 && physical < pool.num_blocks, "physical block out of range");
  const int64_t slot = physical * pool.block_size_tokens + position % pool.block_size_tokens;
  return (slot * pool.num_kv_heads + kv_head) * pool.head_dim;
}

// The scores' scale of a query at `position`: the layer's, times Llama 4's temperature
// log(floor((position + 1) / floor_scale) + 1) * temperature_scale + 1 where it has one (as
// transformers and llama.cpp scale q by it; computed in double, rounded once, as llama.cpp's).
float RowScale(const Backend::AttentionParams& p, int64_t position) {
  if (p.temperature_floor <= 0) return p.scale;
  const double floors = std::floor(static_cast<double>(position + 1) /
                                   static_cast<double>(p.temperature_floor));
  const float t = static_cast<float>(std::log(floors + 1.0) * p.temperature_scale + 1.0);
  return p.scale * t;
}

// Bytes of one element of the pool.
int64_t ElemBytes(const KvPoolView& pool) { return BlockBytes(pool.dtype); }

// Asks for the `count` rows (row_bytes each, `stride_bytes` apart) of the block a task reads
// next. A task reads one KV head's slice of every slot (head_dim of num_kv_heads * head_dim
// elements), a stride the hardware prefetchers follow poorly: decode attention ran at about
// a third of the DRAM bandwidth.
void PrefetchRows(const void* base, int64_t count, int64_t stride_bytes, int64_t row_bytes) {
  const char* p = static_cast<const char*>(base);
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(p + t * stride_bytes + b);
  }
}

}  // namespace

void CpuAttention::RowsToF32(const KvPoolView& pool, const void* base, int64_t offset,
                             int64_t count, int64_t stride, float scale, float* out) const {
  const auto* bytes = static_cast<const uint8_t*>(base);
  const int64_t hd = pool.head_dim, eb = ElemBytes(pool);
  for (int64_t t = 0; t < count; ++t) {
    const uint8_t* src = bytes + (offset + t * stride) * eb;
    float* dst = out + t * hd;
    switch (pool.dtype) {
      case DType::kF16:
        kernels_.f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, hd);
        break;
      case DType::kBF16:
        kernels_.bf16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, hd);
        break;
      default:  // fp8: code * scale
        DequantizeRow(DType::kF8E4M3, src, dst, hd);
        kernels_.scale(scale, hd, dst);
        break;
    }
  }
}

CpuAttention::CpuAttention(const CpuKernels& kernels, ThreadPool* pool)
    : kernels_(kernels),
      pool_(pool),
      scores_(pool->num_threads()),
      kv_scratch_(pool->num_threads()) {}

void CpuAttention::WriteKv(const float* k_new, const float* v_new,
                           absl::Span<const AttentionSequence> seqs,
                           const KvPoolView& pool) const {
  const int64_t row_elems = pool.num_kv_heads * pool.head_dim, eb = ElemBytes(pool);
  std::vector<float> scaled(pool.dtype == DType::kF8E4M3 ? row_elems : 0);
  // Stores one row of f32 values in the pool's dtype (fp8: value / scale, saturating).
  auto store = [&](void* base, int64_t dst, const float* src, float scale) {
    uint8_t* out = static_cast<uint8_t*>(base) + dst * eb;
    if (pool.dtype == DType::kF8E4M3) {
      for (int64_t e = 0; e < row_elems; ++e) scaled[e] = src[e] / scale;
      src = scaled.data();
    }
    QuantizeRow(pool.dtype, src, out, row_elems);
  };
  for (const AttentionSequence& s : seqs) {
    if (s.padding) continue;  // padding rows own no KV slots
    for (int64_t i = 0; i < s.num_query_tokens; ++i) {
      const int64_t dst = SlotOffset(pool, s.block_table, s.start_position + i, 0);
      const int64_t src = (s.first_row + i) * row_elems;
      store(pool.k, dst, k_new + src, pool.k_scale);
      store(pool.v, dst, v_new + src, pool.v_scale);
    }
  }
}

void CpuAttention::RunTask(const Task& task, const float* q, int64_t num_heads,
                           const Backend::AttentionParams& params,
                           absl::Span<const AttentionSequence> seqs, const KvPoolView& pool,
                           float* out, std::vector<float>* scores,
                           std::vector<float>* kv) const {
  const AttentionSequence& s = seqs[task.seq];
  const int64_t head_dim = pool.head_dim, bs = pool.block_size_tokens;
  const int64_t first_head = task.kv_head * (num_heads / pool.num_kv_heads) + task.head_begin;
  const int64_t nh = task.head_end - task.head_begin;
  const int64_t stride = pool.num_kv_heads * head_dim;  // elements between consecutive tokens
  const int64_t eb = ElemBytes(pool);
  const float cap = params.logit_softcap;
  // Asks for the block after the one at t0 of this task's KV head in `base` (K or V).
  auto prefetch_next = [&](const void* base, int64_t t0, int64_t num_keys) {
    if (t0 + bs >= num_keys) return;
    PrefetchRows(static_cast<const char*>(base) +
                     SlotOffset(pool, s.block_table, t0 + bs, task.kv_head) * eb,
                 std::min(bs, num_keys - t0 - bs), stride * eb, head_dim * eb);
  };
  const int64_t context = s.start_position + task.row_end;  // longest row's key count
  if (static_cast<int64_t>(scores->size()) < nh * context) scores->resize(nh * context);
  if (static_cast<int64_t>(kv->size()) < bs * head_dim) kv->resize(bs * head_dim);
  for (int64_t i = task.row_begin; i < task.row_end; ++i) {
    const int64_t row = s.first_row + i;
    const int64_t position = s.start_position + i;
    const int64_t num_keys = position + 1;  // causal: positions 0..own
    // A sliding window starts at own - window + 1, a chunk (Llama 4) at the chunk's first
    // position. Blocks are visited from the one holding the first key; the first visit starts
    // mid-block (slots within a block are contiguous).
    int64_t first_key =
        params.sliding_window > 0 ? std::max<int64_t>(0, num_keys - params.sliding_window) : 0;
    if (params.attention_chunk > 0) {
      first_key = std::max(first_key, position / params.attention_chunk * params.attention_chunk);
    }
    const float scale = RowScale(params, position);
    for (int64_t h0 = 0; h0 < nh; h0 += kMaxDotRows) {
      const int nq = static_cast<int>(std::min<int64_t>(kMaxDotRows, nh - h0));
      const float* q_heads[kMaxDotRows];
      for (int h = 0; h < nq; ++h) {
        q_heads[h] = q + (row * num_heads + first_head + h0 + h) * head_dim;
      }
      for (int64_t b0 = first_key / bs * bs; b0 < num_keys; b0 += bs) {
        const int64_t t0 = std::max(b0, first_key);
        const int64_t count = std::min(b0 + bs, num_keys) - t0;
        const int64_t at = SlotOffset(pool, s.block_table, t0, task.kv_head);
        prefetch_next(pool.k, b0, num_keys);
        if (pool.dtype == DType::kF16) {  // widened in registers, no f32 copy of the block
          kernels_.attn_scores_f16(q_heads, nq, static_cast<const uint16_t*>(pool.k) + at,
                                   stride, count, head_dim, scale,
                                   scores->data() + h0 * context + t0, context);
          continue;
        }
        const float* k = static_cast<const float*>(pool.k) + at;
        int64_t k_stride = stride;
        if (pool.dtype != DType::kF32) {  // widen this block's rows of the head once
          RowsToF32(pool, pool.k, at, count, stride, pool.k_scale, kv->data());
          k = kv->data();
          k_stride = head_dim;
        }
        kernels_.attn_scores(q_heads, nq, k, k_stride, count, head_dim, scale,
                             scores->data() + h0 * context + t0, context);
      }
    }
    // Softmax of each head's scores, then one pass over the V rows for all the group's heads.
    absl::InlinedVector<float, 16> sums(nh);
    absl::InlinedVector<float*, 16> outs(nh);
    absl::InlinedVector<const float*, 16> probs(nh);
    for (int64_t h = 0; h < nh; ++h) {
      float* p = scores->data() + h * context + first_key;
      const int64_t n = num_keys - first_key;
      if (cap > 0) {  // Gemma 2's soft-cap: cap * tanh(score / cap), after the scale
        for (int64_t t = 0; t < n; ++t) p[t] = cap * std::tanh(p[t] / cap);
      }
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < n; ++t) max_score = std::max(max_score, p[t]);
      sums[h] = kernels_.exp_sub_sum(p, n, max_score);
      outs[h] = out + (row * num_heads + first_head + h) * head_dim;
      std::fill(outs[h], outs[h] + head_dim, 0.0f);
    }
    for (int64_t b0 = first_key / bs * bs; b0 < num_keys; b0 += bs) {
      const int64_t t0 = std::max(b0, first_key);
      const int64_t count = std::min(b0 + bs, num_keys) - t0;
      const int64_t at = SlotOffset(pool, s.block_table, t0, task.kv_head);
      prefetch_next(pool.v, b0, num_keys);
      for (int64_t h = 0; h < nh; ++h) probs[h] = scores->data() + h * context + t0;
      const int n = static_cast<int>(nh);
      if (pool.dtype == DType::kF16) {
        kernels_.attn_accumulate_f16(probs.data(), n, static_cast<const uint16_t*>(pool.v) + at,
                                     stride, count, head_dim, outs.data());
        continue;
      }
      const float* v = static_cast<const float*>(pool.v) + at;
      int64_t v_stride = stride;
      if (pool.dtype != DType::kF32) {
        RowsToF32(pool, pool.v, at, count, stride, pool.v_scale, kv->data());
        v = kv->data();
        v_stride = head_dim;
      }
      kernels_.attn_accumulate(probs.data(), n, v, v_stride, count, head_dim, outs.data());
    }
    for (int64_t h = 0; h < nh; ++h) kernels_.scale(1.0f / sums[h], head_dim, outs[h]);
  }
}

void CpuAttention::Run(const float* q, int64_t num_heads, const Backend::AttentionParams& params,
                       absl::Span<const AttentionSequence> seqs, const KvPoolView& pool,
                       float* out) {
  TP_CHECK(pool.num_kv_heads > 0 && num_heads % pool.num_kv_heads == 0,
           "num_heads must be a multiple of num_kv_heads");
  const int64_t group = num_heads / pool.num_kv_heads;
  // One task per (sequence, KV head, row range), serving every query head of the group from
  // one read of its keys. The grouping depends only on the model (heads per KV head is the same
  // at every tensor-parallel degree), never on how many tasks or threads there are, so each
  // output is the same float at every degree: splitting a group's heads into separate tasks
  // when tasks were few changed the multi-query dot's shape and with it the last bits, which
  // 8-bit activation rounding then amplified.
  tasks_.clear();
  for (int64_t s = 0; s < static_cast<int64_t>(seqs.size()); ++s) {
    // Padding rows, and fresh prefills the expanded form serves: zeros, and no task.
    if (seqs[s].padding || (params.skip_fresh_sequences && seqs[s].start_position == 0)) {
      const int64_t row_floats = num_heads * pool.head_dim;
      std::fill(out + seqs[s].first_row * row_floats,
                out + (seqs[s].first_row + seqs[s].num_query_tokens) * row_floats, 0.0f);
      continue;
    }
    for (int64_t g = 0; g < pool.num_kv_heads; ++g) {
      for (int64_t r = 0; r < seqs[s].num_query_tokens; r += kRowsPerTask) {
        tasks_.push_back(
            Task{s, g, r, std::min(seqs[s].num_query_tokens, r + kRowsPerTask), 0, group});
      }
    }
  }
  pool_->ParallelFor(static_cast<int64_t>(tasks_.size()), [&](int64_t t, int thread) {
    RunTask(tasks_[t], q, num_heads, params, seqs, pool, out, &scores_[thread],
            &kv_scratch_[thread]);
  });
}

void CpuAttention::RunPrefill(const float* q, const float* k, const float* v, int64_t num_heads,
                              int64_t key_dim, int64_t value_dim, float scale,
                              absl::Span<const AttentionSequence> seqs, float* out) {
  fresh_.clear();
  for (const AttentionSequence& s : seqs) {
    if (s.start_position == 0 && !s.padding) fresh_.push_back(&s);
  }
  const int64_t num_seqs = static_cast<int64_t>(fresh_.size());
  const int64_t k_stride = num_heads * key_dim, v_stride = num_heads * value_dim;
  pool_->ParallelFor(num_seqs * num_heads, [&](int64_t task, int thread) {
    const AttentionSequence& s = *fresh_[task / num_heads];
    const int64_t h = task % num_heads;
    std::vector<float>& scores = scores_[thread];
    if (static_cast<int64_t>(scores.size()) < s.num_query_tokens) {
      scores.resize(s.num_query_tokens);
    }
    const float* k_head = k + s.first_row * k_stride + h * key_dim;
    const float* v_head = v + s.first_row * v_stride + h * value_dim;
    for (int64_t i = 0; i < s.num_query_tokens; ++i) {
      const int64_t row = s.first_row + i;
      const float* q_head = q + row * k_stride + h * key_dim;
      const int64_t n = i + 1;  // causal: the sequence's rows 0..i
      kernels_.attn_scores(&q_head, 1, k_head, k_stride, n, key_dim, scale, scores.data(), n);
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t t = 0; t < n; ++t) max_score = std::max(max_score, scores[t]);
      const float sum = kernels_.exp_sub_sum(scores.data(), n, max_score);
      float* o = out + row * v_stride + h * value_dim;
      std::fill(o, o + value_dim, 0.0f);
      const float* p = scores.data();
      kernels_.attn_accumulate(&p, 1, v_head, v_stride, n, value_dim, &o);
      kernels_.scale(1.0f / sum, value_dim, o);
    }
  });
}

}  // namespace tpserve
