// A layer's window and soft-cap in FlashInfer's terms (scoring.h), and the plans that serve it:
// the window_left convention checked against FlashInfer's own mask expression (variants.cuh's
// DefaultAttention::LogitsMask, copied below) over every (query, key) of a prompt chunk.
#include "kernels/cuda/flashinfer/scoring.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace tpserve::cuda::fi {
namespace {

// FlashInfer 0.7.4 include/flashinfer/attention/variants.cuh, DefaultAttention: window_left =
// params.window_left >= 0 ? params.window_left : kv_len; with use_sliding_window the key is
// kept when kv_idx + qo_len + window_left >= kv_len + qo_idx; the causal mask (prefill.cuh
// logits_mask) drops kv_idx + qo_len > kv_len + qo_idx.
bool FlashInferKeeps(int32_t window_left_param, uint32_t qo_len, uint32_t kv_len, uint32_t qo_idx,
                     uint32_t kv_idx) {
  const uint32_t window_left =
      window_left_param >= 0 ? static_cast<uint32_t>(window_left_param) : kv_len;
  const bool causal = !(kv_idx + qo_len > kv_len + qo_idx);
  return causal && kv_idx + qo_len + window_left >= kv_len + qo_idx;
}

// backend.h: a query at position p attends max(0, p - window + 1)..p (every key up to p for 0).
bool BackendKeeps(int64_t window, int64_t position, int64_t key) {
  if (key > position) return false;
  return window <= 0 || key >= position - window + 1;
}

TEST(FiScoring, WindowLeftIsTheWindowMinusOne) {
  EXPECT_EQ(FiScoringFor(0, 0.0f).window_left, -1);
  EXPECT_EQ(FiScoringFor(1, 0.0f).window_left, 0);
  EXPECT_EQ(FiScoringFor(37, 0.0f).window_left, 36);
  EXPECT_EQ(FiScoringFor(4096, 0.0f).window_left, 4095);
  // Past int32: no window FlashInfer could tell apart from every key.
  EXPECT_EQ(FiScoringFor(int64_t{1} << 40, 0.0f).window_left, -1);
}

TEST(FiScoring, FlashInfersMaskKeepsExactlyTheBackendsWindow) {
  // A prompt chunk of 9 rows after 40 cached keys, and a single decode row, at several windows
  // (including none and windows longer than the context).
  for (int64_t window : {0, 1, 2, 7, 37, 48, 49, 1000}) {
    const FiScoring s = FiScoringFor(window, 0.0f);
    for (auto [cached, rows] : {std::pair<uint32_t, uint32_t>{40, 9}, {0, 17}, {63, 1}}) {
      const uint32_t kv_len = cached + rows;
      for (uint32_t qo = 0; qo < rows; ++qo) {
        for (uint32_t kv = 0; kv < kv_len; ++kv) {
          EXPECT_EQ(FlashInferKeeps(s.window_left, rows, kv_len, qo, kv),
                    BackendKeeps(window, cached + qo, kv))
              << "window " << window << ", row " << qo << " of " << rows << " after " << cached
              << ", key " << kv;
        }
      }
    }
  }
}

TEST(FiScoring, VariantFollowsWindowAndCap) {
  EXPECT_EQ(FiScoringFor(0, 0.0f).variant, FiVariant::kPlain);
  EXPECT_EQ(FiScoringFor(4096, 0.0f).variant, FiVariant::kWindow);
  const FiScoring both = FiScoringFor(4096, 50.0f);
  EXPECT_EQ(both.variant, FiVariant::kWindowSoftCap);
  EXPECT_EQ(both.window_left, 4095);
  EXPECT_EQ(both.logits_soft_cap, 50.0f);
  // A cap alone runs the window-and-cap variant with no window (window_left -1 = every key).
  const FiScoring cap = FiScoringFor(0, 20.0f);
  EXPECT_EQ(cap.variant, FiVariant::kWindowSoftCap);
  EXPECT_EQ(cap.window_left, -1);
  EXPECT_EQ(cap.logits_soft_cap, 20.0f);
  EXPECT_EQ(FiScoringFor(0, 0.0f).logits_soft_cap, 0.0f);  // the plain variant never divides
}

TEST(FiScoring, Fa3ServesPlainLayersOnly) {
  EXPECT_TRUE(Fa3Serves(FiScoringFor(0, 0.0f)));
  EXPECT_FALSE(Fa3Serves(FiScoringFor(37, 0.0f)));
  EXPECT_FALSE(Fa3Serves(FiScoringFor(0, 50.0f)));
}

TEST(FiScoring, PlanConstraints) {
  const PlanConstraints plain = PlanConstraintsFor(FiScoringFor(0, 0.0f));
  EXPECT_FALSE(plain.no_fa3);
  EXPECT_FALSE(plain.no_split_keys);
  const PlanConstraints cap = PlanConstraintsFor(FiScoringFor(0, 50.0f));
  EXPECT_TRUE(cap.no_fa3);
  EXPECT_FALSE(cap.no_split_keys);  // a cap does not move any key: splits stay valid
  const PlanConstraints window = PlanConstraintsFor(FiScoringFor(37, 0.0f));
  EXPECT_TRUE(window.no_fa3);
  EXPECT_TRUE(window.no_split_keys);

  EXPECT_TRUE(plain.Covers(plain));
  EXPECT_FALSE(plain.Covers(cap));
  EXPECT_TRUE(window.Covers(cap));
  EXPECT_FALSE(cap.Covers(window));
  const PlanConstraints both = cap.With(window);
  EXPECT_TRUE(both.no_fa3 && both.no_split_keys);
  EXPECT_TRUE(both.Covers(window) && both.Covers(cap) && both.Covers(plain));
}

TEST(FiScoring, PlanServes) {
  const FiScoring plain = FiScoringFor(0, 0.0f), window = FiScoringFor(37, 0.0f),
                  cap = FiScoringFor(0, 50.0f);
  for (bool fa3 : {false, true}) {
    for (bool split : {false, true}) EXPECT_TRUE(PlanServes(fa3, split, plain));
  }
  EXPECT_TRUE(PlanServes(false, false, window));
  EXPECT_FALSE(PlanServes(false, true, window));  // split partials laid out for no window
  EXPECT_FALSE(PlanServes(true, false, window));
  EXPECT_TRUE(PlanServes(false, true, cap));
  EXPECT_FALSE(PlanServes(true, false, cap));
  // A plan made under a layer's constraints serves it, whatever FlashInfer chose within them.
  for (const FiScoring& s : {plain, window, cap, FiScoringFor(37, 50.0f)}) {
    const PlanConstraints c = PlanConstraintsFor(s);
    for (bool fa3 : {false, true}) {
      for (bool split : {false, true}) {
        if ((fa3 && c.no_fa3) || (split && c.no_split_keys)) continue;
        EXPECT_TRUE(PlanServes(fa3, split, s));
      }
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda::fi
