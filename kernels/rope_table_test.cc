#include "kernels/rope_table.h"

#include <cmath>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

TEST(RopeTableTest, PlainTableIsThetaPowers) {
  const std::vector<float> inv = RopeInverseFrequencies(64, 100000.0, std::nullopt);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], static_cast<float>(std::pow(100000.0, -2.0 / 64)));
  EXPECT_FLOAT_EQ(inv[31], static_cast<float>(std::pow(100000.0, -62.0 / 64)));
}

// Llama 3.1 8B settings: head_dim 128, theta 500000, factor 8, low 1, high 4, original 8192.
TEST(RopeTableTest, Llama3ScalingKeepsHighDividesLowAndBlendsBetween) {
  const Llama3RopeScaling scaling;  // defaults are the Llama 3.1 values
  const std::vector<float> plain = RopeInverseFrequencies(128, 500000.0, std::nullopt);
  const std::vector<float> scaled = RopeInverseFrequencies(128, 500000.0, scaling);
  ASSERT_EQ(scaled.size(), 64u);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_EQ(scaled[i], plain[i]) << i;
      ++kept;
    } else if (wavelen > 8192.0 / 1.0) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8.0f) << i;
      ++divided;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
      const double expect = (1 - smooth) * plain[i] / 8.0 + smooth * plain[i];
      EXPECT_NEAR(scaled[i], expect, 1e-6 * plain[i]) << i;
      EXPECT_LT(scaled[i], plain[i]) << i;
      EXPECT_GT(scaled[i], plain[i] / 8.0f) << i;
      ++blended;
    }
  }
  // All three regimes must be exercised for the test to mean anything.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
}

// Llama 4 Scout's: factor 16, low = high = 1, original 8192. No band between the bounds: a
// frequency is kept below a wavelength of 8192 and divided by 16 above it.
TEST(RopeTableTest, Llama3ScalingWithEqualFactorsKeepsOrDividesOnly) {
  const Llama3RopeScaling scaling{16.0, 1.0, 1.0, 8192};
  const std::vector<float> plain = RopeInverseFrequencies(128, 500000.0, std::nullopt);
  const std::vector<float> scaled = RopeInverseFrequencies(128, 500000.0, scaling);
  int kept = 0, divided = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    if (2 * M_PI / plain[i] < 8192.0) {
      EXPECT_EQ(scaled[i], plain[i]) << i;
      ++kept;
    } else {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 16.0f) << i;
      ++divided;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
}

}  // namespace
}  // namespace tpserve
