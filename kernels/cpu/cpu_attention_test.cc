// Paged attention and KV writes through both CPU backends against a naive contiguous-KV f64
// reference, with shuffled block tables, GQA groups and mixed prefill / decode batches.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "formats/dtype.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/cpu/cpu_backend.h"

namespace tpserve {
namespace {

using parity_test::Random;
using parity_test::Nmse;

struct SeqSpec {
  int64_t start;   // tokens already cached
  int64_t count;   // new query tokens
};

struct Case {
  int64_t num_heads, num_kv_heads, head_dim, block_size_tokens;
};

// Runs one batch through `backend`: writes each sequence's full history (earlier positions and
// the new ones) into the paged pool, then attends for the new rows only.
class AttentionHarness {
 public:
  // `data_tokens` > 0: every sequence's K and V history is the first tokens of one history of
  // that many tokens, whatever its own length (so differently split batches see the same KV).
  AttentionHarness(const Case& c, const std::vector<SeqSpec>& seqs, int64_t data_tokens = 0)
      : c_(c), seqs_(seqs) {
    const int64_t kv_row = c.num_kv_heads * c.head_dim;
    int64_t blocks = 0;
    for (const SeqSpec& s : seqs) {
      const int64_t total = data_tokens > 0 ? data_tokens : s.start + s.count;
      history_k_.push_back(Random(total * kv_row, 100 + total));
      history_v_.push_back(Random(total * kv_row, 200 + total));
      blocks += (total + c.block_size_tokens - 1) / c.block_size_tokens;
    }
    num_blocks_ = blocks + 3;  // spare blocks that nobody owns must stay untouched
    // Shuffled physical blocks: logical order must come from the table, not the layout.
    std::vector<int32_t> physical(num_blocks_);
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), std::mt19937(42));
    int64_t next = 0;
    for (const SeqSpec& s : seqs) {
      const int64_t n = (s.start + s.count + c.block_size_tokens - 1) / c.block_size_tokens;
      tables_.emplace_back(physical.begin() + next, physical.begin() + next + n);
      next += n;
    }
    int64_t rows = 0;
    for (const SeqSpec& s : seqs) rows += s.count;
    num_rows_ = rows;
    q_ = Random(rows * c.num_heads * c.head_dim, 7);
  }

  int64_t num_rows() const { return num_rows_; }
  const std::vector<float>& q() const { return q_; }
  void set_q(std::vector<float> q) { q_ = std::move(q); }
  int64_t pool_floats() const {
    return num_blocks_ * c_.block_size_tokens * c_.num_kv_heads * c_.head_dim;
  }

  // Returns the attention output; `pool_k` is left holding the final K pool's bytes (0xFF,
  // a NaN in every KV dtype, where nothing was written).
  std::vector<float> Run(Backend& backend, std::vector<uint8_t>* pool_k,
                         DType dtype = DType::kF32, Backend::AttentionParams params = {}) {
    if (params.scale == 1.0f) params.scale = 1.0f / std::sqrt(float(c_.head_dim));
    const float sentinel = std::numeric_limits<float>::quiet_NaN();
    pool_k->assign(pool_floats() * BlockBytes(dtype), 0xFF);
    std::vector<uint8_t> pool_v(pool_k->size(), 0xFF);
    const float scale = dtype == DType::kF8E4M3 ? 0.25f : 1.0f;  // exercise the fp8 scale
    const KvPoolView view{pool_k->data(),        pool_v.data(),   dtype,
                          scale,                 scale,           num_blocks_,
                          c_.block_size_tokens,  c_.num_kv_heads, c_.head_dim};
    const int64_t kv_row = c_.num_kv_heads * c_.head_dim;
    // History first (as earlier steps would have), one sequence at a time.
    for (size_t s = 0; s < seqs_.size(); ++s) {
      if (seqs_[s].start == 0) continue;
      const AttentionSequence prior{0, seqs_[s].start, 0, tables_[s]};
      backend.BeginStep(StepInputs{{}, {}, {&prior, 1}, {}});
      backend.WriteKv(history_k_[s].data(), history_v_[s].data(), view);
    }
    // Then this step's rows, batched.
    std::vector<AttentionSequence> batch;
    std::vector<float> k_new, v_new;
    int64_t row = 0;
    for (size_t s = 0; s < seqs_.size(); ++s) {
      batch.push_back({row, seqs_[s].count, seqs_[s].start, tables_[s]});
      const auto from = seqs_[s].start * kv_row, to = (seqs_[s].start + seqs_[s].count) * kv_row;
      k_new.insert(k_new.end(), history_k_[s].begin() + from, history_k_[s].begin() + to);
      v_new.insert(v_new.end(), history_v_[s].begin() + from, history_v_[s].begin() + to);
      row += seqs_[s].count;
    }
    backend.BeginStep(StepInputs{{}, {}, batch, {}});
    backend.WriteKv(k_new.data(), v_new.data(), view);
    std::vector<float> out(num_rows_ * c_.num_heads * c_.head_dim, sentinel);
    backend.PagedAttention(q_.data(), c_.num_heads, params, view, out.data());
    return out;
  }

  // Plain causal attention in f64; a window keeps the last `window` positions (the query's
  // own included), a chunk the positions from floor(p / chunk) * chunk, a temperature
  // multiplies a query's scores by log(floor((p + 1) / floor_scale) + 1) * temp_scale + 1, and
  // a cap maps each scaled score s to cap * tanh(s / cap).
  std::vector<double> Naive(int64_t window = 0, double cap = 0, int64_t chunk = 0,
                            int64_t floor_scale = 0, double temp_scale = 0) const {
    const int64_t hd = c_.head_dim, group = c_.num_heads / c_.num_kv_heads;
    std::vector<double> out(num_rows_ * c_.num_heads * hd, 0.0);
    int64_t row = 0;
    for (size_t s = 0; s < seqs_.size(); ++s) {
      for (int64_t i = 0; i < seqs_[s].count; ++i, ++row) {
        const int64_t keys = seqs_[s].start + i + 1;
        int64_t first = window > 0 ? std::max<int64_t>(0, keys - window) : 0;
        if (chunk > 0) first = std::max(first, (keys - 1) / chunk * chunk);
        const double temperature =
            floor_scale > 0
                ? std::log(std::floor(double(keys) / double(floor_scale)) + 1.0) * temp_scale + 1.0
                : 1.0;
        for (int64_t h = 0; h < c_.num_heads; ++h) {
          const int64_t g = h / group;
          const float* qh = q_.data() + (row * c_.num_heads + h) * hd;
          std::vector<double> p(keys, -std::numeric_limits<double>::infinity());
          for (int64_t t = first; t < keys; ++t) {
            const float* kt = history_k_[s].data() + (t * c_.num_kv_heads + g) * hd;
            double dot = 0;
            for (int64_t d = 0; d < hd; ++d) dot += double{qh[d]} * kt[d];
            p[t] = dot * temperature / std::sqrt(double(hd));
            if (cap > 0) p[t] = cap * std::tanh(p[t] / cap);
          }
          const double mx = *std::max_element(p.begin(), p.end());
          double sum = 0;
          for (double& v : p) sum += (v = std::exp(v - mx));
          double* o = out.data() + (row * c_.num_heads + h) * hd;
          for (int64_t t = first; t < keys; ++t) {
            const float* vt = history_v_[s].data() + (t * c_.num_kv_heads + g) * hd;
            for (int64_t d = 0; d < hd; ++d) o[d] += p[t] / sum * vt[d];
          }
        }
      }
    }
    return out;
  }

  // Floats of the K pool that no (sequence, position) owns.
  std::vector<bool> OwnedSlots() const {
    std::vector<bool> owned(num_blocks_ * c_.block_size_tokens, false);
    for (size_t s = 0; s < seqs_.size(); ++s) {
      for (int64_t p = 0; p < seqs_[s].start + seqs_[s].count; ++p) {
        owned[tables_[s][p / c_.block_size_tokens] * c_.block_size_tokens +
              p % c_.block_size_tokens] = true;
      }
    }
    return owned;
  }

 private:
  Case c_;
  std::vector<SeqSpec> seqs_;
  std::vector<std::vector<float>> history_k_, history_v_;  // [total, kv_heads, head_dim]
  std::vector<std::vector<int32_t>> tables_;
  int64_t num_blocks_ = 0;
  int64_t num_rows_ = 0;
  std::vector<float> q_;
};

TEST(CpuAttentionTest, PagedGqaMatchesNaiveForMixedBatches) {
  CpuBackend ref(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend opt(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  const std::vector<SeqSpec> batch = {{0, 7}, {37, 1}, {5, 20}};  // prefill, decode, chunk
  for (const Case& c : {Case{4, 4, 32, 4}, Case{9, 3, 64, 16}, Case{8, 2, 64, 1},
                        Case{6, 1, 16, 5}, Case{12, 2, 8, 3}, Case{4, 2, 12, 3}}) {
    AttentionHarness h(c, batch);
    const std::vector<double> want = h.Naive();
    std::vector<uint8_t> pool_ref, pool_opt;
    const std::vector<float> got_ref = h.Run(ref, &pool_ref);
    const std::vector<float> got_opt = h.Run(opt, &pool_opt);
    const std::string where = "heads " + std::to_string(c.num_heads) + "/" +
                              std::to_string(c.num_kv_heads) + " hd " +
                              std::to_string(c.head_dim) + " bs " +
                              std::to_string(c.block_size_tokens);
    ASSERT_TRUE(std::all_of(got_opt.begin(), got_opt.end(),
                            [](float v) { return std::isfinite(v); }))
        << where;
    EXPECT_LT(Nmse(got_ref, want), 1e-12) << where;
    EXPECT_LT(Nmse(got_opt, want), 1e-11) << where;
    // Slots that belong to no sequence keep their sentinel: no stray KV writes.
    const std::vector<bool> owned = h.OwnedSlots();
    const int64_t slot_floats = c.num_kv_heads * c.head_dim;
    for (size_t slot = 0; slot < owned.size(); ++slot) {
      uint32_t bits;
      std::memcpy(&bits, pool_opt.data() + slot * slot_floats * 4, 4);
      EXPECT_EQ(bits == 0xFFFFFFFFu, !owned[slot]) << where << " slot " << slot;
    }
  }
}

// A sequence's new rows attend together, each K and V block read once for all of them, and
// each row gets the very floats it gets as the only new row of its own step: a verification
// step of speculative decoding (or a prefill chunk) sees what one-token decode steps see.
// Through every KV dtype, a sliding window, Llama 4's chunks and temperatures, and both ISAs.
TEST(CpuAttentionTest, NewRowsTogetherGiveEachRowTheFloatsOfItsOwnStep) {
  const int64_t start = 37, count = 6;
  Backend::AttentionParams window;
  window.sliding_window = 9;
  Backend::AttentionParams chunked;
  chunked.attention_chunk = 8;
  chunked.temperature_floor = 4;
  chunked.temperature_scale = 0.1f;
  for (CpuIsa isa : {CpuIsa::kScalar, DetectCpuIsa()}) {
    CpuBackend backend(CpuBackendOptions{.num_threads = 2, .isa = isa});
    for (const Case& c : {Case{9, 3, 64, 16}, Case{4, 2, 12, 3}, Case{8, 8, 16, 5}}) {
      for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3}) {
        for (const Backend::AttentionParams& params :
             {Backend::AttentionParams{}, window, chunked}) {
          AttentionHarness together(c, {{start, count}}, start + count);
          std::vector<uint8_t> pool;
          const std::vector<float> all = together.Run(backend, &pool, dtype, params);
          const int64_t row_floats = c.num_heads * c.head_dim;
          for (int64_t i = 0; i < count; ++i) {
            AttentionHarness alone(c, {{start + i, 1}}, start + count);
            alone.set_q(std::vector<float>(together.q().begin() + i * row_floats,
                                           together.q().begin() + (i + 1) * row_floats));
            const std::vector<float> one = alone.Run(backend, &pool, dtype, params);
            ASSERT_EQ(one.size(), static_cast<size_t>(row_floats));
            EXPECT_EQ(std::memcmp(one.data(), all.data() + i * row_floats,
                                  row_floats * sizeof(float)), 0)
                << "isa " << static_cast<int>(isa) << " heads " << c.num_heads << "/"
                << c.num_kv_heads << " hd " << c.head_dim << " dtype " << DTypeName(dtype)
                << " window " << params.sliding_window << " chunk " << params.attention_chunk
                << " row " << i;
          }
        }
      }
    }
  }
}

// Narrow KV caches: the same attention through f16, bf16 and fp8 pools, against the naive f64
// result, within what each dtype's rounding of K and V costs (normalized squared error: f16
// keeps 11 bits, bf16 8, e4m3 4; inputs are N(0, 1)).
TEST(CpuAttentionTest, NarrowKvDtypesMatchNaiveWithinTheirRounding) {
  CpuBackend ref(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend opt(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  const std::vector<SeqSpec> batch = {{0, 7}, {37, 1}, {5, 20}};
  for (const auto& [dtype, bound] : {std::pair{DType::kF16, 1e-6}, std::pair{DType::kBF16, 5e-5},
                                     std::pair{DType::kF8E4M3, 5e-3}}) {
    for (const Case& c : {Case{9, 3, 64, 16}, Case{4, 2, 12, 3}}) {
      AttentionHarness h(c, batch);
      const std::vector<double> want = h.Naive();
      std::vector<uint8_t> pool_ref, pool_opt;
      const std::vector<float> got_ref = h.Run(ref, &pool_ref, dtype);
      const std::vector<float> got_opt = h.Run(opt, &pool_opt, dtype);
      EXPECT_EQ(pool_ref, pool_opt) << DTypeName(dtype);  // the stored codes are exact
      EXPECT_LT(Nmse(got_ref, want), bound) << DTypeName(dtype) << " hd " << c.head_dim;
      EXPECT_LT(Nmse(got_opt, want), bound) << DTypeName(dtype) << " hd " << c.head_dim;
      EXPECT_GT(Nmse(got_opt, want), 0.0) << DTypeName(dtype);  // it really was narrowed
    }
  }
}

// Gemma's local layers: a window of 6 (so blocks of 4 are entered mid-block) and a soft-cap of
// 1.5 on the scaled scores (small enough that it bends most of them), alone and together.
TEST(CpuAttentionTest, SlidingWindowAndSoftCapMatchNaive) {
  CpuBackend ref(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend opt(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  const std::vector<SeqSpec> batch = {{0, 7}, {37, 1}, {5, 20}, {3, 1}};
  const float hd_scale = 1.0f / std::sqrt(32.0f);
  for (const auto& [window, cap] : {std::pair{int64_t{6}, 0.0f}, std::pair{int64_t{0}, 1.5f},
                                    std::pair{int64_t{6}, 1.5f}, std::pair{int64_t{1}, 0.0f}}) {
    for (const Case& c : {Case{4, 2, 32, 4}, Case{6, 1, 32, 5}}) {
      AttentionHarness h(c, batch);
      const std::vector<double> want = h.Naive(window, cap);
      const std::vector<double> full = h.Naive();
      const Backend::AttentionParams params{hd_scale, window, cap};
      std::vector<uint8_t> pool;
      const std::vector<float> got_ref = h.Run(ref, &pool, DType::kF32, params);
      const std::vector<float> got_opt = h.Run(opt, &pool, DType::kF32, params);
      const std::string where = "window " + std::to_string(window) + " cap " +
                                std::to_string(cap) + " heads " + std::to_string(c.num_heads);
      EXPECT_LT(Nmse(got_ref, want), 1e-12) << where;
      EXPECT_LT(Nmse(got_opt, want), 1e-11) << where;
      EXPECT_GT(Nmse(got_opt, full), 1e-4) << where << ": the window or cap changed nothing";
    }
  }
}

// Llama 4: chunks of 8 (a query at p sees [floor(p / 8) * 8, p]; blocks of 4 and 5, so chunks
// start mid-block too) on the RoPE layers, temperature tuning on the NoPE layers (floor 4,
// scale 0.5: the scale grows at positions 3, 7, 11, ...), alone, together and with a window.
TEST(CpuAttentionTest, ChunkedAttentionAndTemperatureTuningMatchNaive) {
  CpuBackend ref(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  CpuBackend opt(CpuBackendOptions{.num_threads = 2, .isa = DetectCpuIsa()});
  // Prompts crossing chunks, decodes at a chunk's first position (8, 24) and past it (37).
  const std::vector<SeqSpec> batch = {{0, 7}, {37, 1}, {5, 20}, {8, 1}, {24, 1}};
  const float hd_scale = 1.0f / std::sqrt(32.0f);
  struct Features {
    int64_t window, chunk, floor_scale;
    float temp_scale;
  };
  for (const Features& f : {Features{0, 8, 0, 0.0f}, Features{0, 0, 4, 0.5f},
                            Features{0, 8, 4, 0.5f}, Features{6, 8, 0, 0.0f}}) {
    for (const Case& c : {Case{4, 2, 32, 4}, Case{6, 1, 32, 5}}) {
      AttentionHarness h(c, batch);
      const std::vector<double> want = h.Naive(f.window, 0, f.chunk, f.floor_scale, f.temp_scale);
      const std::vector<double> without = h.Naive(f.window);
      Backend::AttentionParams params{hd_scale, f.window, 0.0f};
      params.attention_chunk = f.chunk;
      params.temperature_floor = f.floor_scale;
      params.temperature_scale = f.temp_scale;
      EXPECT_TRUE(ref.SupportsAttention(params));
      std::vector<uint8_t> pool;
      const std::vector<float> got_ref = h.Run(ref, &pool, DType::kF32, params);
      const std::vector<float> got_opt = h.Run(opt, &pool, DType::kF32, params);
      const std::string where = "window " + std::to_string(f.window) + " chunk " +
                                std::to_string(f.chunk) + " floor " +
                                std::to_string(f.floor_scale) + " heads " +
                                std::to_string(c.num_heads);
      EXPECT_LT(Nmse(got_ref, want), 1e-12) << where;
      EXPECT_LT(Nmse(got_opt, want), 1e-11) << where;
      EXPECT_GT(Nmse(got_opt, without), 1e-4) << where << ": the chunk or temperature changed "
                                                          "nothing";
    }
  }
  Backend::AttentionParams both{hd_scale, 0, 0.0f};
  both.attention_chunk = 8192;
  both.temperature_floor = 8192;
  both.temperature_scale = 0.1f;
  EXPECT_EQ(Backend::AttentionExtrasString(both),
            "chunked attention (chunks of 8192 tokens), attention temperature tuning (floor "
            "8192, scale 0.1)");
  EXPECT_EQ(Backend::AttentionExtrasString({hd_scale, 4096, 50.0f}), "");
}

TEST(CpuAttentionTest, FirstTokenAttendsOnlyToItself) {
  // With one key, softmax is 1 and the output is exactly that key's V row.
  CpuBackend be(CpuBackendOptions{.num_threads = 1});
  const Case c{2, 1, 8, 4};
  AttentionHarness h(c, {{0, 1}});
  std::vector<uint8_t> pool_k;
  const std::vector<float> out = h.Run(be, &pool_k);
  const std::vector<double> want = h.Naive();
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6) << i;
}

}  // namespace
}  // namespace tpserve
