// The sampling of one logit row (kernels/sampling_rows.h) written once, as TP_HD code over a
// "reducer" that says how a pass over the vocabulary runs: HostRowReducer below runs each pass
// as a loop in id order (sampling_rows_test checks the result equals the CPU sampler,
// step/sampling.h, token for token), and the CUDA kernel (sampling_kernels.cu) as one block per
// row, each thread taking every blockDim-th id and the block combining (only the order of
// floating-point sums differs).
//
// Why not FlashInfer's sampling kernels (sampling.cuh): they draw with curand's Philox in their
// own order and find top-p by pivots that keep ties together, so a seeded request would get other
// tokens on a GPU than on the CPU reference, and a draft model's proposal (the target's draw r
// ahead) would no longer use the noise the target samples with. Here each token id has its own counter-based
// noise (SamplingUniform, shared with the CPU sampler), so a GPU rank draws what the CPU draws.
//
// A row is a fixed number of passes, each a reduction over the vocabulary:
//   adjusted = logits + logit bias, -inf where the mask forbids (kSample rows);
//   log Z = max + log sum exp(adjusted - max) (the logprobs reported);
//   x = adjusted with the penalties applied at the history's ids;
//   greedy: the largest x, ties to the lower id;
//   otherwise: the candidates are a prefix of the ids ordered by (x descending, id ascending),
//     found as a threshold on an order key (OrderKey) by binary search: top-k's k-th key, then
//     top-p's (the shortest prefix whose tempered mass reaches top_p), then min-p's floor
//     relative to the most likely; the draw is the Gumbel-max over them:
//     argmax x / T + Gumbel(key, draw, id);
//   alternatives: the top_n largest logprobs, one max pass each.
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_ROW_SAMPLING_H_
#define TPSERVE_KERNELS_CUDA_ROW_SAMPLING_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/host_device.h"
#include "kernels/sampling_rows.h"

namespace tpserve {

// A uniform in (0, 1) that depends only on (key, draw, id): counter-based (SplitMix64's
// finalizer), so each token id gets its own noise however the candidates are ordered or
// divided among threads. The CPU sampler draws with this function too.
TP_HD double SamplingUniform(uint64_t key, uint64_t draw, uint32_t id) {
  uint64_t z = key ^ (draw * 0x9E3779B97F4A7C15ull) ^ (uint64_t{id} * 0xD1B54A32D192ED03ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
}

// Standard Gumbel noise for (key, draw, id).
TP_HD double SamplingGumbel(uint64_t key, uint64_t draw, uint32_t id) {
  return -log(-log(SamplingUniform(key, draw, id)));
}

// A float's bits mapped so that unsigned order is numeric order (-0 taken as +0).
TP_HD uint32_t OrderBits(float v) {
#if defined(__CUDA_ARCH__)
  uint32_t b = __float_as_uint(v);
#else
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
#endif
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

// A key whose unsigned order is (value descending, id ascending) reversed: the largest key is the
// largest value, ties to the lowest id. Every id's key is distinct and not 0.
TP_HD uint64_t OrderKey(float value, int64_t id) {
  return (uint64_t{OrderBits(value)} << 32) | (0xFFFFFFFFull - static_cast<uint64_t>(id));
}
TP_HD int32_t KeyId(uint64_t key) {
  return static_cast<int32_t>(0xFFFFFFFFull - (key & 0xFFFFFFFFull));
}

// The raw pointers of a SamplingRows' shared arrays (device pointers in the kernel).
struct RowArrays {
  const int32_t* bias_ids;
  const float* bias_values;
  const int32_t* penalty_ids;
  const int32_t* penalty_counts;
  const int32_t* mask_words;
};

// The largest T with pred(T) (pred true at 0, monotone: true up to some key, false after),
// by fixing T's bits from the top: 64 passes.
template <class Pred>
TP_HD uint64_t LargestKeyWhere(Pred pred) {
  uint64_t t = 0;
  for (int bit = 63; bit >= 0; --bit) {
    const uint64_t candidate = t | (uint64_t{1} << bit);
    if (pred(candidate)) t = candidate;
  }
  return t;
}

// One row of a step's logits where they lie: row `row` of `rows`, its ids cut into slices of
// `per_rank` (the vocabulary slices a gather to the sampling rank lays out as
// [world, rows, per_rank]; per_rank = vocab for rows stored whole).
struct RowView {
  float* base;
  int64_t row;
  int64_t rows;
  int64_t per_rank;
  TP_HD float& operator[](int64_t i) const {
    const int64_t slice = i / per_rank;
    return base[(slice * rows + row) * per_rank + (i - slice * per_rank)];
  }
};

// Samples or scores one row, in place: `v` ends holding the row's adjusted (and, for a draw
// with penalties, penalised) logits. `saved` has an entry per penalty entry of the SamplingRows
// (the value before the penalty, kept for the chosen id's logprob). R provides, every call
// made by all of its threads alike:
//   int64_t vocab() const;
//   void ForEach(F f)            f(i) for every id, then a barrier;
//   void Serial(F f)             f() once, then a barrier;
//   float MaxF(F f)              max of f(i) (float);
//   double SumD(F f)             sum of f(i) (double);
//   int64_t Count(F f)           ids with f(i) true;
//   uint64_t MaxKey(F f)         max of f(i) (uint64_t; 0 if the row is empty);
//   ScoredId ArgMax(F f)         the id with the largest finite f(i) (double), ties to the
//                                lower id; id -1 when none is finite;
// each returning the same value to every thread. Only Serial writes `out`.
struct ScoredId {
  double score;
  int32_t id;
};

#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class R>
TP_HD void SampleRow(R& r, const SamplingRow& row, const RowArrays& a, const RowView& v,
                     float* saved, RowSample* out) {
  const int64_t vocab = r.vocab();
  const float kNegInf = -INFINITY;
  // The model's distribution: the raw row for a scored token; with bias and mask for a draw.
  if (row.kind == RowKind::kSample) {
    if (row.bias_end > row.bias_begin) {
      r.Serial([&] {
        for (int32_t b = row.bias_begin; b < row.bias_end; ++b) {
          if (a.bias_ids[b] >= 0 && a.bias_ids[b] < vocab) v[a.bias_ids[b]] += a.bias_values[b];
        }
      });
    }
    if (row.mask_begin >= 0) {
      r.ForEach([&](int64_t i) {
        const int64_t word = i / 32;
        const uint32_t bits = word < row.mask_word_count
                                  ? static_cast<uint32_t>(a.mask_words[row.mask_begin + word])
                                  : 0u;
        if (((bits >> (i % 32)) & 1u) == 0) v[i] = kNegInf;
      });
    }
  }
  const float max = r.MaxF([&](int64_t i) { return v[i]; });
  const double sum = r.SumD([&](int64_t i) { return exp(static_cast<double>(v[i] - max)); });
  const float log_z = max + static_cast<float>(log(sum));

  // The alternatives, by logprob (ties to the lower id), forbidden ids never; before any
  // penalty changes the row.
  int32_t top_ids[kMaxRowTopLogprobs];
  float top_logprobs[kMaxRowTopLogprobs];
  int32_t num_top = 0;
  uint64_t below = ~uint64_t{0};
  for (int32_t n = 0; n < row.top_n && n < kMaxRowTopLogprobs; ++n) {
    const uint64_t bound = below;
    const uint64_t key = r.MaxKey([&](int64_t i) {
      const uint64_t k = OrderKey(v[i] - log_z, i);
      return k < bound ? k : uint64_t{0};
    });
    if (key == 0) break;
    const int32_t alt = KeyId(key);
    const float lp = v[alt] - log_z;
    if (lp == -INFINITY || lp == INFINITY) break;
    top_ids[n] = alt;
    top_logprobs[n] = lp;
    num_top = n + 1;
    below = key;
  }

  int32_t id = row.scored_id;
  const bool penalised = row.kind == RowKind::kSample && row.penalty_end > row.penalty_begin;
  if (row.kind == RowKind::kSample) {
    if (penalised) {
      r.Serial([&] {
        for (int32_t p = row.penalty_begin; p < row.penalty_end; ++p) {
          const int32_t t = a.penalty_ids[p];
          if (t < 0 || t >= vocab) continue;
          float x = v[t];
          saved[p] = x;
          if (row.repetition_penalty != 1.0f) {
            x = x > 0 ? x / row.repetition_penalty : x * row.repetition_penalty;
          }
          x -= row.presence_penalty +
               row.frequency_penalty * static_cast<float>(a.penalty_counts[p]);
          v[t] = x;
        }
      });
    }
    if (row.temperature == 0.0f) {
      id = KeyId(r.MaxKey([&](int64_t i) { return OrderKey(v[i], i); }));
    } else {
      const double inv_t = 1.0 / row.temperature;
      const bool truncates = row.top_k > 0 || row.top_p < 1.0f || row.min_p > 0.0f;
      // The candidates: ids whose key is at least `floor_key` and, under min-p, whose tempered
      // probability is at least min_p times the most likely one's.
      uint64_t floor_key = 0;
      float x0 = 0.0f;
      double total = 1.0;
      // A candidate's tempered weight relative to the most likely (x0): exp((x - x0) / T).
      const auto weight = [&](int64_t i) {
        return exp(static_cast<double>(v[i] - x0) * inv_t);
      };
      if (truncates) {
        if (row.top_k > 0 && row.top_k < vocab) {
          floor_key = LargestKeyWhere([&](uint64_t t) {
            return r.Count([&](int64_t i) { return OrderKey(v[i], i) >= t; }) >= row.top_k;
          });
        }
        x0 = v[KeyId(r.MaxKey([&](int64_t i) { return OrderKey(v[i], i); }))];
        const uint64_t k_floor = floor_key;
        total = r.SumD([&](int64_t i) { return OrderKey(v[i], i) >= k_floor ? weight(i) : 0.0; });
        if (row.top_p < 1.0f) {
          // The shortest prefix whose mass reaches top_p ends at the largest key whose
          // prefix (keys at or above it) still has that mass; all of them when none has.
          const double top_p = row.top_p;
          const uint64_t nucleus = LargestKeyWhere([&](uint64_t t) {
            return r.SumD([&](int64_t i) {
                     const uint64_t k = OrderKey(v[i], i);
                     return k >= t && k >= k_floor ? weight(i) / total : 0.0;
                   }) >= top_p;
          });
          if (nucleus > floor_key) floor_key = nucleus;
        }
      }
      const uint64_t k_floor = floor_key;
      const double p_floor = row.min_p > 0.0f ? row.min_p * (1.0 / total) : 0.0;
      const ScoredId best = r.ArgMax([&](int64_t i) -> double {
        if (truncates) {
          if (OrderKey(v[i], i) < k_floor) return -INFINITY;
          if (row.min_p > 0.0f && !(weight(i) / total >= p_floor)) {
            return -INFINITY;
          }
        }
        return v[i] * inv_t + SamplingGumbel(row.key, row.draw, static_cast<uint32_t>(i));
      });
      id = best.id;
    }
  }
  r.Serial([&] {
    float chosen = kNegInf;  // the chosen id's logit before any penalty
    if (id >= 0 && id < vocab) {
      chosen = v[id];
      if (penalised) {
        for (int32_t p = row.penalty_begin; p < row.penalty_end; ++p) {
          if (a.penalty_ids[p] == id) chosen = saved[p];
        }
      }
    }
    out->id = id;
    out->logprob = chosen == kNegInf ? kNegInf : chosen - log_z;
    out->num_top = num_top;
    for (int32_t n = 0; n < num_top; ++n) {
      out->top_ids[n] = top_ids[n];
      out->top_logprobs[n] = top_logprobs[n];
    }
  });
}

// Runs each pass as a loop over the ids in order, on the calling thread.
class HostRowReducer {
 public:
  explicit HostRowReducer(int64_t vocab) : vocab_(vocab) {}
  int64_t vocab() const { return vocab_; }
  template <class F>
  void ForEach(F f) {
    for (int64_t i = 0; i < vocab_; ++i) f(i);
  }
  template <class F>
  void Serial(F f) {
    f();
  }
  template <class F>
  float MaxF(F f) {
    float m = -INFINITY;
    for (int64_t i = 0; i < vocab_; ++i) {
      const float x = f(i);
      m = x > m ? x : m;
    }
    return m;
  }
  template <class F>
  double SumD(F f) {
    double s = 0.0;
    for (int64_t i = 0; i < vocab_; ++i) s += f(i);
    return s;
  }
  template <class F>
  int64_t Count(F f) {
    int64_t n = 0;
    for (int64_t i = 0; i < vocab_; ++i) n += f(i) ? 1 : 0;
    return n;
  }
  template <class F>
  uint64_t MaxKey(F f) {
    uint64_t m = 0;
    for (int64_t i = 0; i < vocab_; ++i) {
      const uint64_t k = f(i);
      m = k > m ? k : m;
    }
    return m;
  }
  template <class F>
  ScoredId ArgMax(F f) {
    ScoredId best{-INFINITY, -1};
    for (int64_t i = 0; i < vocab_; ++i) {
      const double s = f(i);
      if (s > best.score) best = {s, static_cast<int32_t>(i)};
    }
    return best;
  }

 private:
  int64_t vocab_;
};

// Every row of `rows` over `logits` (RowView's layout: `layout_rows` rows in slices of
// `per_rank` ids; changed in place as the kernel changes it) on the calling thread: the CUDA
// kernel's algorithm, pass for pass. `out` has one entry per row.
inline void SampleRowsOnHost(float* logits, int64_t vocab, int64_t per_rank, int64_t layout_rows,
                             const SamplingRows& rows, RowSample* out) {
  const RowArrays arrays{rows.bias_ids.data(), rows.bias_values.data(), rows.penalty_ids.data(),
                         rows.penalty_counts.data(), rows.mask_words.data()};
  std::vector<float> saved(rows.penalty_ids.size());
  HostRowReducer reducer(vocab);
  for (size_t r = 0; r < rows.rows.size(); ++r) {
    SampleRow(reducer, rows.rows[r], arrays,
              RowView{logits, static_cast<int64_t>(r), layout_rows, per_rank}, saved.data(),
              &out[r]);
  }
}

// Rows stored whole: [rows, vocab].
inline void SampleRowsOnHost(float* logits, int64_t vocab, const SamplingRows& rows,
                             RowSample* out) {
  SampleRowsOnHost(logits, vocab, vocab, static_cast<int64_t>(rows.rows.size()), rows, out);
}

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CUDA_ROW_SAMPLING_H_
