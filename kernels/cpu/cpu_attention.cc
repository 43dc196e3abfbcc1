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

// A task's rows attend together, each K and V block read once for all of them, in groups
// whose scores (query heads x context floats a row) fit this many bytes: all 16 rows of a
// task up to ~5,000 positions of context with 3 query heads per KV head, one row at 128K.
constexpr int64_t kScoreBytesPerGroup = 1 << 20;

// A block's K or V rows of one KV head as a kernel reads them: f16 in place, or f32 (in place,
// or widened to scratch), `stride` elements from one key to the next.
struct KvRows {
  const float* f32;
  const uint16_t* f16;
  int64_t stride;
  KvRows From(int64_t t) const {
    return {f32 != nullptr ? f32 + t * stride : nullptr,
            f16 != nullptr ? f16 + t * stride : nullptr, stride};
  }
};

// The keys one query row attends to, [begin, end), and its scores' scale.
struct RowKeys {
  int64_t begin = 0;
  int64_t end = 0;
  float scale = 0.0f;
};

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
  // Stores one row of f32 values in the pool's dtype (fp8: value / scale, saturating; f16, the
  // CPU's default, through the vector kernel).
  auto store = [&](void* base, int64_t dst, const float* src, float scale) {
    uint8_t* out = static_cast<uint8_t*>(base) + dst * eb;
    if (pool.dtype == DType::kF16) {
      kernels_.f32_to_f16(src, reinterpret_cast<uint16_t*>(out), row_elems);
      return;
    }
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
  const int64_t context = s.start_position + task.row_end;  // longest row's key count
  // Rows attend together in groups whose scores (nh x context floats a row) fit
  // kScoreBytesPerGroup: each K and V block is read once for a group's rows and heads.
  const int64_t group_rows = std::clamp<int64_t>(
      kScoreBytesPerGroup / static_cast<int64_t>(nh * context * sizeof(float)), 1,
      task.row_end - task.row_begin);
  if (static_cast<int64_t>(scores->size()) < group_rows * nh * context) {
    scores->resize(group_rows * nh * context);
  }
  if (static_cast<int64_t>(kv->size()) < bs * head_dim) kv->resize(bs * head_dim);
  // Asks for the block after the one at b0 of this task's KV head in `base` (K or V).
  auto prefetch_next = [&](const void* base, int64_t b0, int64_t end) {
    if (b0 + bs >= end) return;
    PrefetchRows(static_cast<const char*>(base) +
                     SlotOffset(pool, s.block_table, b0 + bs, task.kv_head) * eb,
                 std::min(bs, end - b0 - bs), stride * eb, head_dim * eb);
  };
  for (int64_t r0 = task.row_begin; r0 < task.row_end; r0 += group_rows) {
    const int64_t r1 = std::min(task.row_end, r0 + group_rows);
    const int64_t n_rows = r1 - r0;
    // Row i attends to keys [rk[i].begin, rk[i].end): causal (positions 0..own), from the sliding
    // window's start (own - window + 1) or the chunk's first position (Llama 4).
    absl::InlinedVector<RowKeys, 16> rk(n_rows);
    for (int64_t i = 0; i < n_rows; ++i) {
      const int64_t position = s.start_position + r0 + i;
      RowKeys& r = rk[i];
      r.end = position + 1;
      r.begin = params.sliding_window > 0
                    ? std::max<int64_t>(0, r.end - params.sliding_window) : 0;
      if (params.attention_chunk > 0) {
        r.begin = std::max(r.begin, position / params.attention_chunk * params.attention_chunk);
      }
      r.scale = RowScale(params, position);
    }
    // Later rows start no earlier and end later: the group's keys are [rk[0].begin, last end).
    const int64_t lo = rk[0].begin, hi = rk[n_rows - 1].end;
    // Score (query row i, head h) is row i * nh + h of scores [group rows * nh, context].
    auto score_row = [&](int64_t i, int64_t h) { return scores->data() + (i * nh + h) * context; };
    // For each block, the runs of consecutive rows that see the same keys of it (all rows but
    // near the block holding their own positions) share one kernel call per kMaxDotRows
    // queries: visit(i0, i1, t0, count) for rows [i0, i1) and keys [t0, t0 + count).
    auto for_each_run = [&](int64_t b0, bool by_scale, auto&& visit) {
      int64_t i0 = 0;
      while (i0 < n_rows) {
        const int64_t t0 = std::max(b0, rk[i0].begin);
        const int64_t t1 = std::min(b0 + bs, rk[i0].end);
        int64_t i1 = i0 + 1;
        while (i1 < n_rows && std::max(b0, rk[i1].begin) == t0 &&
               std::min(b0 + bs, rk[i1].end) == t1 && (!by_scale || rk[i1].scale == rk[i0].scale)) {
          ++i1;
        }
        if (t1 > t0) visit(i0, i1, t0, t1 - t0);
        i0 = i1;
      }
    };
    // Visits the blocks of `base` (K or V) the group sees: asks for the next one, widens the
    // keys any row sees to f32 once for all rows (bf16, fp8 pools; f16 is read in place), and
    // calls visit(i0, i1, t0, count, rows) for each run, `rows` starting at key t0.
    auto for_each_block = [&](const void* base, float pool_scale, bool by_scale, auto&& visit) {
      for (int64_t b0 = lo / bs * bs; b0 < hi; b0 += bs) {
        prefetch_next(base, b0, hi);
        const int64_t w0 = std::max(b0, lo);
        const int64_t at = SlotOffset(pool, s.block_table, w0, task.kv_head);
        KvRows block{nullptr, nullptr, stride};
        if (pool.dtype == DType::kF16) {
          block.f16 = static_cast<const uint16_t*>(base) + at;
        } else if (pool.dtype == DType::kF32) {
          block.f32 = static_cast<const float*>(base) + at;
        } else {
          RowsToF32(pool, base, at, std::min(b0 + bs, hi) - w0, stride, pool_scale, kv->data());
          block.f32 = kv->data();
          block.stride = head_dim;
        }
        for_each_run(b0, by_scale, [&](int64_t i0, int64_t i1, int64_t t0, int64_t count) {
          visit(i0, i1, t0, count, block.From(t0 - w0));
        });
      }
    };
    for_each_block(pool.k, pool.k_scale, /*by_scale=*/true,
                   [&](int64_t i0, int64_t i1, int64_t t0, int64_t count, const KvRows& k) {
      const float* q_rows[kMaxDotRows];
      int nq = 0;
      int64_t first_query = i0 * nh;  // scores row of q_rows[0]
      auto flush = [&] {
        if (nq == 0) return;
        float* dst = scores->data() + first_query * context + t0;
        if (k.f16 != nullptr) {
          kernels_.attn_scores_f16(q_rows, nq, k.f16, k.stride, count, head_dim, rk[i0].scale,
                                   dst, context);
        } else {
          kernels_.attn_scores(q_rows, nq, k.f32, k.stride, count, head_dim, rk[i0].scale, dst,
                               context);
        }
        first_query += nq;
        nq = 0;
      };
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t row = s.first_row + r0 + i;
        for (int64_t h = 0; h < nh; ++h) {
          q_rows[nq++] = q + (row * num_heads + first_head + h) * head_dim;
          if (nq == kMaxDotRows) flush();
        }
      }
      flush();
    });
    // Softmax of each (row, head)'s scores.
    absl::InlinedVector<float, 32> sums(n_rows * nh);
    absl::InlinedVector<float*, 32> outs(n_rows * nh);
    for (int64_t i = 0; i < n_rows; ++i) {
      const int64_t row = s.first_row + r0 + i;
      for (int64_t h = 0; h < nh; ++h) {
        float* p = score_row(i, h) + rk[i].begin;
        const int64_t n = rk[i].end - rk[i].begin;
        if (cap > 0) {  // Gemma 2's soft-cap: cap * tanh(score / cap), after the scale
          for (int64_t t = 0; t < n; ++t) p[t] = cap * std::tanh(p[t] / cap);
        }
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < n; ++t) max_score = std::max(max_score, p[t]);
        sums[i * nh + h] = kernels_.exp_sub_sum(p, n, max_score);
        float* o = out + (row * num_heads + first_head + h) * head_dim;
        std::fill(o, o + head_dim, 0.0f);
        outs[i * nh + h] = o;
      }
    }
    // One pass over the V blocks for every (row, head) of the group; each output sums its keys
    // in order, as it would alone.
    absl::InlinedVector<const float*, 32> probs(n_rows * nh);
    for_each_block(pool.v, pool.v_scale, /*by_scale=*/false,
                   [&](int64_t i0, int64_t i1, int64_t t0, int64_t count, const KvRows& v) {
      const int n = static_cast<int>((i1 - i0) * nh);
      for (int64_t j = 0; j < n; ++j) probs[j] = score_row(i0, 0) + j * context + t0;
      float* const* dst = outs.data() + i0 * nh;
      if (v.f16 != nullptr) {
        kernels_.attn_accumulate_f16(probs.data(), n, v.f16, v.stride, count, head_dim, dst);
      } else {
        kernels_.attn_accumulate(probs.data(), n, v.f32, v.stride, count, head_dim, dst);
      }
    });
    for (int64_t j = 0; j < n_rows * nh; ++j) kernels_.scale(1.0f / sums[j], head_dim, outs[j]);
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
