// The SIMT attention kernels' softmax algebra (attention_math.h), run on the CPU over the
// kernels' own schedules, against the CPU backend's attention (the reference every backend is
// checked against): the decode kernel's key splits and their combine, at every split count
// from 1 to one split per key (empty splits included), and the prefill kernel's tiles of 32
// keys folded online with a causal mask.
#include "kernels/cuda/attention_math.h"

#include <algorithm>
#include <cmath>
#include <random>
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

float Score(const std::vector<float>& q, const Keys& keys, int64_t j, float scale) {
  float dot = 0.0f;
  for (int64_t d = 0; d < kHeadDim; ++d) dot = std::fma(q[d], keys.k[j * kHeadDim + d], dot);
  return scale * dot;
}

// The decode kernel's arithmetic: per split (max, sum, weighted values), then the combine.
std::vector<float> DecodeSplits(const std::vector<float>& q, const Keys& keys, int64_t context,
                                int64_t num_splits, float scale) {
  std::vector<float> m(num_splits, -INFINITY), l(num_splits, 0.0f);
  std::vector<float> o(num_splits * kHeadDim, 0.0f);
  for (int64_t s = 0; s < num_splits; ++s) {
    const KeyRange r = SplitKeys(context, num_splits, s);
    for (int64_t j = r.begin; j < r.begin + r.count; ++j) {
      m[s] = std::max(m[s], Score(q, keys, j, scale));
    }
    for (int64_t j = r.begin; j < r.begin + r.count; ++j) {
      const float e = ExpShifted(Score(q, keys, j, scale), m[s]);
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

// The prefill kernel's arithmetic for a query at `position`: tiles of 32 keys folded online,
// keys past the position masked.
std::vector<float> PrefillTiles(const std::vector<float>& q, const Keys& keys, int64_t position,
                                float scale) {
  float m = -INFINITY, l = 0.0f;
  std::vector<float> acc(kHeadDim, 0.0f);
  for (int64_t t0 = 0; t0 <= position; t0 += 32) {
    float tile_max = -INFINITY;
    std::vector<float> score(32, -INFINITY);
    for (int64_t j = 0; j < 32; ++j) {
      if (t0 + j <= position) score[j] = Score(q, keys, t0 + j, scale);
      tile_max = std::max(tile_max, score[j]);
    }
    const float m_new = std::max(m, tile_max);
    const float correction = Rescale(m, m_new);
    float tile_sum = 0.0f;
    std::vector<float> p(32);
    for (int64_t j = 0; j < 32; ++j) {
      p[j] = t0 + j <= position ? ExpShifted(score[j], m_new) : 0.0f;
      tile_sum += p[j];
    }
    l = l * correction + tile_sum;
    m = m_new;
    for (int64_t d = 0; d < kHeadDim; ++d) {
      acc[d] *= correction;
      for (int64_t j = 0; j < 32 && t0 + j <= position; ++j) {
        acc[d] = std::fma(p[j], keys.v[(t0 + j) * kHeadDim + d], acc[d]);
      }
    }
  }
  for (float& x : acc) x /= l;
  return acc;
}

// The CPU backend's attention of one query at `position` over the same keys (f32 everywhere).
std::vector<float> CpuReference(const std::vector<float>& q, const Keys& keys, int64_t position,
                                float scale) {
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
  cpu.PagedAttention(q.data(), 1, scale, pool, out.data());
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
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
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
      const std::vector<float> got = DecodeSplits(q, keys, context, splits, scale);
      EXPECT_LT(NormalizedError(got, want), 1e-10)
          << context << " keys in " << splits << " splits";
    }
  }
}

TEST(AttentionMath, PrefillTilesFoldedOnlineMatchTheCpuBackend) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const Keys keys = RandomKeys(200, 5);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int64_t position : {0, 31, 32, 33, 95, 199}) {
    std::vector<float> q(kHeadDim);
    for (float& x : q) x = normal(rng);
    EXPECT_LT(NormalizedError(PrefillTiles(q, keys, position, scale),
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
}

}  // namespace
}  // namespace tpserve::cuda
