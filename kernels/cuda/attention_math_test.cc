// The SIMT attention kernels' softmax algebra (attention_math.h), run on the CPU over the
// kernels' own schedules, against the CPU backend's attention (the reference every backend is
// checked against): the decode kernel's key splits and their combine, at every split count
// from 1 to one split per key (empty splits included), and the prefill kernel's tiles of 32
// keys folded online with a causal mask; and both under a sliding window (keys from
// WindowFirstKey; prefill tiles wholly before a row's window) and a logit soft-cap.
#include "kernels/cuda/attention_math.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace tpserve::cuda {
namespace {

constexpr int64_t kHeadDim = 48, kBlock = 16;

struct Keys {
  std::vector<float> k, v;  // [context][kHeadDim], one KV head
};

Keys RandomKeys(int64_t context, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Keys keys{std::vector<float>(context * kHeadDim), std::vector<float>(context * kHeadDim)};
  for (float& x : keys.k) x = normal(rng);
  for (float& x : keys.v) x = normal(rng);
  return keys;
}

// A layer's scoring, as the kernels take it (attention_kernels.h AttentionScores).
struct Scoring {
  float scale = 1.0f;
  int64_t window = 0;
  float softcap = 0.0f;
};

float Score(const std::vector<float>& q, const Keys& keys, int64_t j, const Scoring& sc) {
  float dot = 0.0f;
  for (int64_t d = 0; d < kHeadDim; ++d) dot = std::fma(q[d], keys.k[j * kHeadDim + d], dot);
  return SoftCapScore(sc.scale * dot, sc.softcap);
}

// The decode kernel's arithmetic: the row's keys from its window's first key split, per split
// (max, sum, weighted values), then the combine.
std::vector<float> DecodeSplits(const std::vector<float>& q, const Keys& keys, int64_t context,
                                int64_t num_splits, const Scoring& sc) {
  std::vector<float> m(num_splits, -INFINITY), l(num_splits, 0.0f);
  std::vector<float> o(num_splits * kHeadDim, 0.0f);
  const int64_t first_key = WindowFirstKey(context - 1, sc.window);
  for (int64_t s = 0; s < num_splits; ++s) {
    const KeyRange split = SplitKeys(context - first_key, num_splits, s);
    const KeyRange r{first_key + split.begin, split.count};
    for (int64_t j = r.begin; j < r.begin + r.count; ++j) {
      m[s] = std::max(m[s], Score(q, keys, j, sc));
    }
    for (int64_t j = r.begin; j < r.begin + r.count; ++j) {
      const float e = ExpShifted(Score(q, keys, j, sc), m[s]);
      l[s] += e;
      for (int64_t d = 0; d < kHeadDim; ++d) {
        o[s * kHeadDim + d] = std::fma(e, keys.v[j * kHeadDim + d], o[s * kHeadDim + d]);
      }
    }
  }
  const float max_of_maxes = *std::max_element(m.begin(), m.end());
  float total = 0.0f;
  std::vector<float> w(num_splits);
  for (int64_t s = 0; s < num_splits; ++s) {
    w[s] = CombineWeight(m[s], max_of_maxes);
    total += w[s] * l[s];
  }
  std::vector<float> out(kHeadDim);
  for (int64_t d = 0; d < kHeadDim; ++d) {
    float acc = 0.0f;
    for (int64_t s = 0; s < num_splits; ++s) acc = std::fma(w[s], o[s * kHeadDim + d], acc);
    out[d] = acc / total;
  }
  return out;
}

// The prefill kernel's arithmetic for a query at `position` in a query tile whose first row is
// at `tile_first_position`: tiles of 32 keys from the one holding that row's first key, folded
// online, keys the row does not see (KeyVisible) masked.
std::vector<float> PrefillTiles(const std::vector<float>& q, const Keys& keys, int64_t position,
                                int64_t tile_first_position, const Scoring& sc) {
  float m = -INFINITY, l = 0.0f;
  std::vector<float> acc(kHeadDim, 0.0f);
  const int64_t first_tile = WindowFirstKey(tile_first_position, sc.window) / 32;
  for (int64_t t0 = first_tile * 32; t0 <= position; t0 += 32) {
    float tile_max = -INFINITY;
    std::vector<float> score(32, -INFINITY);
    std::vector<bool> seen(32);
    for (int64_t j = 0; j < 32; ++j) {
      seen[j] = KeyVisible(t0 + j, position, sc.window);
      if (seen[j]) score[j] = Score(q, keys, t0 + j, sc);
      tile_max = std::max(tile_max, score[j]);
    }
    const float m_new = std::max(m, tile_max);
    const float correction = Rescale(m, m_new);
    float tile_sum = 0.0f;
    std::vector<float> p(32);
    for (int64_t j = 0; j < 32; ++j) {
      p[j] = seen[j] ? ExpShifted(score[j], m_new) : 0.0f;
      tile_sum += p[j];
    }
    l = l * correction + tile_sum;
    m = m_new;
    for (int64_t d = 0; d < kHeadDim; ++d) {
      acc[d] *= correction;
      for (int64_t j = 0; j < 32 && t0 + j <= position; ++j) {
        acc[d] = std::fma(p[j], keys.v[(t0 + j) * kHeadDim + d], acc[d]);  // p = 0 if unseen
      }
    }
  }
  for (float& x : acc) x /= l;
  return acc;
}

// The CPU backend's attention of one query at `position` over the same keys (f32 everywhere).
std::vector<float> CpuReference(const std::vector<float>& q, const Keys& keys, int64_t position,
                                const Scoring& sc) {
  CpuBackend cpu(CpuBackendOptions{.num_threads = 1, .isa = CpuIsa::kScalar});
  const int64_t blocks = (position + kBlock) / kBlock;
  std::vector<float> k_pool(blocks * kBlock * kHeadDim, 0.0f), v_pool(k_pool.size(), 0.0f);
  std::copy(keys.k.begin(), keys.k.begin() + (position + 1) * kHeadDim, k_pool.begin());
  std::copy(keys.v.begin(), keys.v.begin() + (position + 1) * kHeadDim, v_pool.begin());
  std::vector<int32_t> table(blocks);
  for (int32_t b = 0; b < blocks; ++b) table[b] = b;
  const KvPoolView pool{k_pool.data(), v_pool.data(), DType::kF32, 1.0f, 1.0f, blocks,
                        kBlock, 1, kHeadDim};
  const AttentionSequence seq{0, 1, position, table};
  cpu.BeginStep(StepInputs{{}, {}, {&seq, 1}, {}});
  std::vector<float> out(kHeadDim);
  cpu.PagedAttention(q.data(), 1, {.scale = sc.scale, .sliding_window = sc.window,
                                   .logit_softcap = sc.softcap},
                     pool, out.data());
  return out;
}

double NormalizedError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return num / den;
}

TEST(AttentionMath, SplitKeysCoverEveryKeyOnceInOrder) {
  for (int64_t context : {1, 2, 31, 64, 100, 1000}) {
    for (int64_t splits = 1; splits <= 70; ++splits) {
      int64_t next = 0;
      for (int64_t s = 0; s < splits; ++s) {
        const KeyRange r = SplitKeys(context, splits, s);
        ASSERT_GE(r.count, 0);
        if (r.count > 0) EXPECT_EQ(r.begin, next) << context << "/" << splits << " split " << s;
        next += r.count;
      }
      EXPECT_EQ(next, context) << context << " keys in " << splits << " splits";
    }
  }
}

TEST(AttentionMath, DecodeSplitsAndCombineMatchTheCpuBackendAtEverySplitCount) {
  const Scoring scale{.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  for (int64_t context : {1, 37, 300}) {
    const Keys keys = RandomKeys(context, static_cast<uint32_t>(context));
    std::mt19937 rng(99);
    std::normal_distribution<float> normal(0.0f, 2.0f);  // peaked softmax: rescaling matters
    std::vector<float> q(kHeadDim);
    for (float& x : q) x = normal(rng);
    const std::vector<float> want = CpuReference(q, keys, context - 1, scale);
    // Up to more splits than keys: the trailing splits are empty and must weigh nothing.
    for (int64_t splits : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, context,
                           context + 5}) {
      const std::vector<float> got = DecodeSplits(q, keys, context, splits, scale);  // no window
      EXPECT_LT(NormalizedError(got, want), 1e-10)
          << context << " keys in " << splits << " splits";
    }
  }
}

TEST(AttentionMath, PrefillTilesFoldedOnlineMatchTheCpuBackend) {
  const Scoring scale{.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  const Keys keys = RandomKeys(200, 5);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t position : {0, 31, 32, 33, 95, 199}) {
    std::vector<float> q(kHeadDim);
    for (float& x : q) x = normal(rng);
    EXPECT_LT(NormalizedError(PrefillTiles(q, keys, position, 0, scale),
                              CpuReference(q, keys, position, scale)),
              1e-10)
        << "position " << position;
  }
}

TEST(AttentionMath, EmptyAndMaskedTermsWeighNothing) {
  EXPECT_EQ(CombineWeight(-INFINITY, 3.0f), 0.0f);  // an empty split
  EXPECT_EQ(Rescale(-INFINITY, 3.0f), 0.0f);        // the first tile: nothing to rescale
  EXPECT_EQ(ExpShifted(-INFINITY, 3.0f), 0.0f);     // a masked key
  EXPECT_EQ(CombineWeight(3.0f, 3.0f), 1.0f);       // the split holding the max
  // A tile wholly before a row's window: nothing seen yet, the zero sums stay as they are
  // (not exp(-inf - -inf) = NaN).
  EXPECT_EQ(Rescale(-INFINITY, -INFINITY), 1.0f);
}

TEST(AttentionMath, WindowFirstKeyIsTheBackendsWindow) {
  // backend.h: a query at p attends positions max(0, p - window + 1)..p; 0 is no window.
  EXPECT_EQ(WindowFirstKey(0, 0), 0);
  EXPECT_EQ(WindowFirstKey(500, 0), 0);
  EXPECT_EQ(WindowFirstKey(36, 37), 0);   // 37 keys: 0..36
  EXPECT_EQ(WindowFirstKey(37, 37), 1);   // 1..37
  EXPECT_EQ(WindowFirstKey(100, 37), 64);
  EXPECT_EQ(WindowFirstKey(100, 1), 100);  // a window of one: the row's own key
  EXPECT_TRUE(KeyVisible(64, 100, 37));
  EXPECT_FALSE(KeyVisible(63, 100, 37));
  EXPECT_FALSE(KeyVisible(101, 100, 37));  // causal
  EXPECT_TRUE(KeyVisible(0, 100, 0));
}

TEST(AttentionMath, SoftCapScoreIsCapTimesTanh) {
  EXPECT_EQ(SoftCapScore(7.5f, 0.0f), 7.5f);  // no cap
  EXPECT_FLOAT_EQ(SoftCapScore(10.0f, 50.0f), 50.0f * std::tanh(0.2f));
  EXPECT_FLOAT_EQ(SoftCapScore(-1000.0f, 20.0f), -20.0f);  // saturates at -cap
  EXPECT_LT(SoftCapScore(1e6f, 30.0f), 30.0f + 1e-4f);
}

// Gemma's local layers: the window starts mid-block and mid-tile, with and without a cap.
const Scoring kWindowed[] = {{0.0625f, 37, 0.0f}, {0.0625f, 37, 50.0f}, {0.0625f, 0, 20.0f},
                             {0.0625f, 1, 0.0f}, {0.0625f, 64, 5.0f}};

TEST(AttentionMath, DecodeUnderAWindowAndCapMatchesTheCpuBackend) {
  for (const Scoring& sc : kWindowed) {
    for (int64_t context : {1, 37, 38, 300}) {
      const Keys keys = RandomKeys(context, static_cast<uint32_t>(context + 3));
      std::mt19937 rng(11);
      std::normal_distribution<float> normal(0.0f, 8.0f);  // large scores: the cap bites
      std::vector<float> q(kHeadDim);
      for (float& x : q) x = normal(rng);
      const std::vector<float> want = CpuReference(q, keys, context - 1, sc);
      for (int64_t splits : {int64_t{1}, int64_t{3}, int64_t{40}}) {
        EXPECT_LT(NormalizedError(DecodeSplits(q, keys, context, splits, sc), want), 1e-10)
            << context << " keys in " << splits << " splits, window " << sc.window << ", cap "
            << sc.softcap;
      }
    }
  }
}

TEST(AttentionMath, PrefillUnderAWindowAndCapMatchesTheCpuBackend) {
  const Keys keys = RandomKeys(200, 9);
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 8.0f);
  for (const Scoring& sc : kWindowed) {
    // (row position, the position of its query tile's first row): the later rows of a tile
    // walk key tiles wholly before their own window first.
    for (auto [position, tile_first] : {std::pair<int64_t, int64_t>{0, 0}, {36, 5}, {37, 6},
                                        {95, 64}, {130, 99}, {199, 168}, {199, 199}}) {
      std::vector<float> q(kHeadDim);
      for (float& x : q) x = normal(rng);
      EXPECT_LT(NormalizedError(PrefillTiles(q, keys, position, tile_first, sc),
                                CpuReference(q, keys, position, sc)),
                1e-10)
          << "position " << position << " in a tile from " << tile_first << ", window "
          << sc.window << ", cap " << sc.softcap;
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda
