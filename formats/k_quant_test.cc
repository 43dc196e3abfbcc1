// The K-quant layouts decoded from hand-built blocks, each value worked out from the layout
// description (k_quant.h). Bit-exactness against the gguf package is gguf_golden_test's job.
#include "formats/k_quant.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "formats/dtype.h"

namespace tpserve {
namespace {

void StoreHalf(uint8_t* p, float f) {
  const uint16_t h = F32ToF16(f);
  std::memcpy(p, &h, 2);
}

TEST(KQuantTest, BlockGeometry) {
  EXPECT_EQ(BlockElems(DType::kQ4_K), 256);
  EXPECT_EQ(BlockBytes(DType::kQ4_K), 144);
  EXPECT_EQ(BlockElems(DType::kQ5_K), 256);
  EXPECT_EQ(BlockBytes(DType::kQ5_K), 176);
  EXPECT_EQ(BlockElems(DType::kQ6_K), 256);
  EXPECT_EQ(BlockBytes(DType::kQ6_K), 210);
  EXPECT_EQ(kQ4_KQsOffset + 128, kQ4_KBlockBytes);
  EXPECT_EQ(kQ5_KQsOffset + 128, kQ5_KBlockBytes);
  EXPECT_EQ(kQ6_KDOffset + 2, kQ6_KBlockBytes);
  EXPECT_EQ(DTypeName(DType::kQ4_K), "Q4_K");
  EXPECT_EQ(DTypeName(DType::kQ5_K), "Q5_K");
  EXPECT_EQ(DTypeName(DType::kQ6_K), "Q6_K");
  EXPECT_EQ(RowBytes(DType::kQ4_K, 4096), 16 * 144);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 576), std::nullopt);  // 32-aligned, not 256-aligned
}

TEST(KQuantTest, ScaleMinPackingPlacesEachBit) {
  // Sub-block 5's scale 0b110101 splits: bits 4..5 (0b11) go to bits 6..7 of byte 1, bits 0..3
  // (0b0101) to the low nibble of byte 9. Its min 0b100110: bits 6..7 of byte 5 and the high
  // nibble of byte 9.
  uint8_t scales[8] = {1, 2, 3, 4, 0, 0x35, 0, 0};
  uint8_t mins[8] = {5, 6, 7, 8, 0, 0x26, 0, 0};
  uint8_t packed[12];
  PackKScaleMins(scales, mins, packed);
  const uint8_t want[12] = {1, 2 | 0xC0, 3, 4, 5, 6 | 0x80, 7, 8, 0, 0x65, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(packed[i], want[i]) << i;
  uint8_t got_scales[8], got_mins[8];
  UnpackKScaleMins(want, got_scales, got_mins);
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(got_scales[j], scales[j]) << j;
    EXPECT_EQ(got_mins[j], mins[j]) << j;
  }
}

TEST(KQuantTest, ScaleMinPackingRoundTripsEveryByte) {
  // Every 12-byte pattern is a valid packing: unpack then pack must give the bytes back.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 1000; ++trial) {
    uint8_t packed[12], again[12], scales[8], mins[8];
    for (uint8_t& b : packed) b = static_cast<uint8_t>(rng());
    UnpackKScaleMins(packed, scales, mins);
    for (int j = 0; j < 8; ++j) {
      ASSERT_LE(scales[j], 63);
      ASSERT_LE(mins[j], 63);
    }
    PackKScaleMins(scales, mins, again);
    ASSERT_EQ(std::memcmp(packed, again, 12), 0) << trial;
  }
}

// Scales j + 1 and mins j for sub-block j; d = 0.5, dmin = 0.25; element i of sub-block j is
// (i + j) % 16 (Q4_K) or (i + j) % 32 (Q5_K).
std::vector<uint8_t> ScaleMinBlock(DType t) {
  const bool five = t == DType::kQ5_K;
  std::vector<uint8_t> block(BlockBytes(t), 0);
  StoreHalf(block.data(), 0.5f);
  StoreHalf(block.data() + 2, 0.25f);
  uint8_t scales[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>(j + 1);
    mins[j] = static_cast<uint8_t>(j);
  }
  PackKScaleMins(scales, mins, block.data() + 4);
  uint8_t* qs = block.data() + (five ? kQ5_KQsOffset : kQ4_KQsOffset);
  for (int j = 0; j < 8; ++j) {
    for (int i = 0; i < 32; ++i) {
      const int q = (i + j) % (five ? 32 : 16);
      qs[(j / 2) * 32 + i] |= static_cast<uint8_t>((q & 0x0F) << (j % 2 == 0 ? 0 : 4));
      if (five) block[kQ5_KQhOffset + i] |= static_cast<uint8_t>((q >> 4) << j);
    }
  }
  return block;
}

TEST(KQuantTest, Q4_KAndQ5_KScaleThenSubtractTheMin) {
  for (DType t : {DType::kQ4_K, DType::kQ5_K}) {
    const std::vector<uint8_t> block = ScaleMinBlock(t);
    std::vector<float> out(256);
    DequantizeRow(t, block.data(), out.data(), 256);
    for (int j = 0; j < 8; ++j) {
      for (int i = 0; i < 32; ++i) {
        const int q = (i + j) % (t == DType::kQ5_K ? 32 : 16);
        // Every term is exact in f32, so the expected value is too.
        const float want = 0.5f * static_cast<float>(j + 1) * static_cast<float>(q) - 0.25f * j;
        ASSERT_EQ(out[32 * j + i], want) << DTypeName(t) << " sub-block " << j << " elem " << i;
      }
    }
  }
}

TEST(KQuantTest, Q6_KElementOrderAndSignedScales) {
  // Element e gets q = e % 64 and sub-block s = e / 16 the scale s - 8 (negative ones too).
  std::vector<uint8_t> block(210, 0);
  StoreHalf(block.data() + kQ6_KDOffset, 0.125f);
  for (int s = 0; s < 16; ++s) block[kQ6_KScalesOffset + s] = static_cast<uint8_t>(s - 8);
  for (int e = 0; e < 256; ++e) {
    const int q = e % 64;
    const int h = e / 128, k = (e % 128) / 32, i = e % 32;
    block[64 * h + i + 32 * (k & 1)] |= static_cast<uint8_t>((q & 0x0F) << (k < 2 ? 0 : 4));
    block[kQ6_KQhOffset + 32 * h + i] |= static_cast<uint8_t>((q >> 4) << (2 * k));
  }
  std::vector<float> out(512);
  std::vector<uint8_t> row = block;
  row.insert(row.end(), block.begin(), block.end());  // two super-blocks in one row
  DequantizeRow(DType::kQ6_K, row.data(), out.data(), 512);
  for (int e = 0; e < 512; ++e) {
    const int s = (e % 256) / 16;
    const float want = 0.125f * static_cast<float>(s - 8) * static_cast<float>(e % 64 - 32);
    ASSERT_EQ(out[e], want) << e;
  }
}

}  // namespace
}  // namespace tpserve
