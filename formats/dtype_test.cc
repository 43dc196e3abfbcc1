#include "formats/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace tpserve {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

// GCC's _Float16 converts through libgcc's soft-float routines: an implementation not written
// here, used as the reference for every non-NaN value.
float ReferenceHalfToFloat(uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
uint16_t ReferenceFloatToHalf(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

TEST(DTypeTest, BlockGeometryMatchesGgmlLayouts) {
  EXPECT_EQ(BlockElems(DType::kF32), 1);
  EXPECT_EQ(BlockBytes(DType::kF32), 4);
  EXPECT_EQ(BlockBytes(DType::kF16), 2);
  EXPECT_EQ(BlockBytes(DType::kBF16), 2);
  EXPECT_EQ(BlockBytes(DType::kF8E4M3), 1);
  EXPECT_EQ(BlockElems(DType::kQ8_0), 32);
  EXPECT_EQ(BlockBytes(DType::kQ8_0), 34);
  EXPECT_EQ(BlockElems(DType::kQ4_0), 32);
  EXPECT_EQ(BlockBytes(DType::kQ4_0), 18);
  EXPECT_EQ(BlockElems(DType::kQ4_1), 32);
  EXPECT_EQ(BlockBytes(DType::kQ4_1), 20);
  EXPECT_EQ(DTypeName(DType::kQ4_1), "Q4_1");
  EXPECT_EQ(DTypeName(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(BlockElems(DType::kI32), 1);
  EXPECT_EQ(BlockBytes(DType::kI32), 4);
  EXPECT_EQ(DTypeName(DType::kI32), "I32");
}

TEST(DTypeTest, OnlyI32IsAnIntegerTypeAndItDecodesToValues) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kQ8_0,
                  DType::kQ4_0, DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_FALSE(IsIntegerDType(t)) << DTypeName(t);
  }
  EXPECT_TRUE(IsIntegerDType(DType::kI32));
  const int32_t words[4] = {-7, 0, 16777216, 16777217};
  std::vector<float> out(4);
  DequantizeRow(DType::kI32, words, out.data(), 4);
  EXPECT_EQ(out, (std::vector<float>{-7.0f, 0.0f, 16777216.0f, 16777216.0f}));  // 2^24 + 1 rounds
}

TEST(DTypeTest, RowBytesChecksMultiplesAndOverflow) {
  EXPECT_EQ(RowBytes(DType::kQ4_1, 4096), 2560);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 576), 612);
  EXPECT_EQ(RowBytes(DType::kBF16, 3), 6);
  EXPECT_EQ(RowBytes(DType::kF32, 0), 0);
  EXPECT_EQ(RowBytes(DType::kQ4_0, 33), std::nullopt);
  EXPECT_EQ(RowBytes(DType::kF16, -2), std::nullopt);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(RowBytes(DType::kF32, kMax / 4), (kMax / 4) * 4);
  EXPECT_EQ(RowBytes(DType::kF32, kMax / 4 + 1), std::nullopt);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 32 * (kMax / 34 + 1)), std::nullopt);
}

TEST(HalfTest, EveryHalfMatchesTheReferenceAndRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (is_nan) {
      // numpy (the gguf package's converter) keeps sign and payload bit for bit.
      const uint32_t expected = ((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x03FFu) << 13);
      ASSERT_EQ(Bits(f), expected) << std::hex << h;
      continue;
    }
    ASSERT_EQ(Bits(f), Bits(ReferenceHalfToFloat(static_cast<uint16_t>(h)))) << std::hex << h;
    ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
  }
}

TEST(HalfTest, FloatToHalfRoundsLikeTheReference) {
  // A stride through all 2^32 patterns (prime, so every exponent and low-bit pattern shows up),
  // plus the values around each rounding boundary.
  std::vector<uint32_t> patterns;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 65521) patterns.push_back(static_cast<uint32_t>(u));
  for (uint32_t boundary : {0x33000000u, 0x33800000u, 0x387FC000u, 0x38800000u, 0x3F801000u,
                            0x3F803000u, 0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x7F7FFFFFu}) {
    for (int delta = -2; delta <= 2; ++delta) patterns.push_back(boundary + delta);
  }
  for (uint32_t u : patterns) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float f = FromBits(u ^ sign);
      if (std::isnan(f)) continue;
      ASSERT_EQ(F32ToF16(f), ReferenceFloatToHalf(f)) << std::hex << (u ^ sign);
    }
  }
}

TEST(HalfTest, NanAndSpecialValuesFollowNumpy) {
  // Values observed from numpy: float32(bits).astype(float16).
  EXPECT_EQ(F32ToF16(FromBits(0x7FA00001u)), 0x7D00);  // payload kept, not quieted
  EXPECT_EQ(F32ToF16(FromBits(0x7F800001u)), 0x7C01);  // payload lost below bit 13: still NaN
  EXPECT_EQ(F32ToF16(FromBits(0xFFC00000u)), 0xFE00);
  EXPECT_EQ(F32ToF16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);  // halfway past 65504 ties up to infinity
  EXPECT_EQ(F32ToF16(65519.996f), 0x7BFF);
  EXPECT_EQ(F32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even zero
  EXPECT_EQ(F32ToF16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
}

TEST(BFloat16Test, IsTheHighHalfOfAFloat) {
  EXPECT_EQ(BF16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(BF16ToF32(0xC040), -3.0f);
  EXPECT_EQ(Bits(BF16ToF32(0x7FC1)), 0x7FC10000u);
  EXPECT_EQ(Bits(BF16ToF32(0x0001)), 0x00010000u);  // fp32 subnormal kept
}

TEST(Float8E4M3Test, DecodesNormalsSubnormalsAndTheOneNan) {
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);    // exponent 7 = bias
  EXPECT_EQ(F8E4M3ToF32(0x7E), 448.0f);  // largest finite
  EXPECT_EQ(F8E4M3ToF32(0x78), 256.0f);  // S.1111.000 is a number, not infinity
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(0x07), std::ldexp(7.0f, -9));
  EXPECT_EQ(F8E4M3ToF32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(Bits(F8E4M3ToF32(0x80)), 0x80000000u);
  EXPECT_EQ(Bits(F8E4M3ToF32(0x7F)), 0x7FC00000u);
  EXPECT_EQ(Bits(F8E4M3ToF32(0xFF)), 0xFFC00000u);
}

std::string Half(float f) {
  const uint16_t h = F32ToF16(f);
  return std::string(reinterpret_cast<const char*>(&h), 2);
}

TEST(DequantizeTest, Q8_0IsScaleTimesSignedByte) {
  std::string block = Half(0.5f);
  for (int i = 0; i < 32; ++i) block.push_back(static_cast<char>(i * 8 - 128));
  std::vector<float> out(32);
  DequantizeRow(DType::kQ8_0, block.data(), out.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.5f * static_cast<float>(i * 8 - 128)) << i;
}

TEST(DequantizeTest, Q4_0LowNibblesAreTheFirstSixteen) {
  std::string block = Half(2.0f);
  // Byte j = (high nibble j % 16) | (low nibble 15 - j).
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<char>((j << 4) | (15 - j)));
  std::vector<float> out(32);
  DequantizeRow(DType::kQ4_0, block.data(), out.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * static_cast<float>(15 - j - 8)) << j;
    EXPECT_EQ(out[j + 16], 2.0f * static_cast<float>(j - 8)) << j;
  }
}

TEST(DequantizeTest, Q4_1AddsTheMinimumAfterScaling) {
  std::string block = Half(0.25f) + Half(-1.0f);
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<char>((j << 4) | (15 - j)));
  // Two blocks in one row; the second scaled differently.
  std::string second = Half(3.0f) + Half(0.5f) + std::string(16, '\x21');
  const std::string row = block + second;
  std::vector<float> out(64);
  DequantizeRow(DType::kQ4_1, row.data(), out.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * static_cast<float>(15 - j) - 1.0f) << j;
    EXPECT_EQ(out[j + 16], 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(out[32 + j], 3.0f * 1.0f + 0.5f) << j;
    EXPECT_EQ(out[48 + j], 3.0f * 2.0f + 0.5f) << j;
  }
}

TEST(DequantizeTest, PlainTypesDecodeUnalignedSources) {
  // An odd offset into the buffer: decoders must not assume alignment.
  std::string buf(1, '\0');
  for (float v : {1.5f, -2.0f, 65504.0f}) buf += Half(v);
  std::vector<float> out(3);
  DequantizeRow(DType::kF16, buf.data() + 1, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.5f, -2.0f, 65504.0f}));

  std::string f32(1, '\0');
  for (float v : {3.25f, -0.0f}) f32.append(reinterpret_cast<const char*>(&v), 4);
  DequantizeRow(DType::kF32, f32.data() + 1, out.data(), 2);
  EXPECT_EQ(out[0], 3.25f);
  EXPECT_EQ(Bits(out[1]), 0x80000000u);

  const uint8_t f8[] = {0x38, 0xB8, 0x7E};
  DequantizeRow(DType::kF8E4M3, f8, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -1.0f, 448.0f}));

  const uint16_t bf16[] = {0x3F80, 0x4000, 0xBF00};
  DequantizeRow(DType::kBF16, bf16, out.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 2.0f, -0.5f}));
}

}  // namespace
}  // namespace tpserve
