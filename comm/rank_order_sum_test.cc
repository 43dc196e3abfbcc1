#include "comm/rank_order_sum.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

// Values whose float sums depend on the order of addition.
float Value(int rank, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * rank) * 1000.0 /
                            (rank + 1));
}

TEST(SumF32InRankOrder, AddsRankByRankForEveryWorldSize) {
  constexpr size_t kN = 1001;  // odd: exercises a vector loop's tail
  for (int world = 1; world <= 6; ++world) {
    std::vector<std::vector<float>> x(world, std::vector<float>(kN));
    std::vector<const uint8_t*> inputs;
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < kN; ++i) x[r][i] = Value(r, i);
      inputs.push_back(reinterpret_cast<const uint8_t*>(x[r].data()));
    }
    std::vector<float> out(kN, -1.0f);
    SumF32InRankOrder(inputs.data(), world, kN, out.data());
    int differs_from_reverse_order = 0;
    for (size_t i = 0; i < kN; ++i) {
      float forward = x[0][i];
      for (int r = 1; r < world; ++r) forward += x[r][i];
      float reverse = x[world - 1][i];
      for (int r = world - 2; r >= 0; --r) reverse += x[r][i];
      ASSERT_EQ(std::memcmp(&out[i], &forward, 4), 0) << "world " << world << " i " << i;
      differs_from_reverse_order += forward != reverse;
    }
    // The data can tell the orders apart, so the bitwise check above means something.
    if (world >= 3) {
      EXPECT_GT(differs_from_reverse_order, 0) << "world " << world;
    }
  }
}

TEST(SumHalfInRankOrder, RoundsOnceAfterAnF32Sum) {
  // bf16 has 7 fraction bits: 1 + 2^-8 rounds back to 1 (ties to even), so adding 2^-8 twice
  // with a rounding after each addition stays 1; one rounding of the f32 sum gives 1 + 2^-7.
  const uint16_t bf16[3] = {F32ToBF16(1.0f), F32ToBF16(0.00390625f), F32ToBF16(0.00390625f)};
  // f16 near 2048 has a spacing of 2: 2048 + 1 + 1 is 2048 rounded per step, 2050 rounded once.
  const uint16_t f16[3] = {F32ToF16(2048.0f), F32ToF16(1.0f), F32ToF16(1.0f)};
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const uint16_t* x = dtype == DType::kBF16 ? bf16 : f16;
    const uint8_t* inputs[3];
    for (int r = 0; r < 3; ++r) inputs[r] = reinterpret_cast<const uint8_t*>(&x[r]);
    uint16_t out = 0;
    SumHalfInRankOrder(dtype, inputs, 3, 1, &out);
    if (dtype == DType::kBF16) {
      EXPECT_EQ(out, 0x3F81);  // 1 + 2^-7
    } else {
      EXPECT_EQ(out, 0x6801);  // 2050
    }
  }
}

}  // namespace
}  // namespace tpserve
