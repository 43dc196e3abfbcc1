// SIMD kernels against the scalar reference, one kernel at a time. (The op-level parity suite
// with shapes and threads is cpu_backend_test.cc.)
#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

using parity_test::Random;

using QuantDotFn = void (*)(const uint8_t*, const Q8Block* const*, int, int64_t, float*);

// The per-row dots of the 32-value blocks.
QuantDotFn PerRowDot(const CpuKernels& ks, DType t) {
  switch (t) {
    case DType::kQ8_0: return ks.dot_q8_0;
    case DType::kQ4_0: return ks.dot_q4_0;
    case DType::kQ4_1: return ks.dot_q4_1;
    case DType::kQ5_0: return ks.dot_q5_0;
    default: return ks.dot_q5_1;
  }
}

class CpuKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CpuSupportsIsa(CpuIsa::kAvx2)) GTEST_SKIP() << "AVX2 not supported on this CPU";
  }
  const CpuKernels& ref_ = ScalarCpuKernels();
  const CpuKernels& simd_ = CpuKernelsFor(CpuIsa::kAvx2);
};

TEST_F(CpuKernelsTest, QuantizeQ8MatchesReferenceBitForBit) {
  const std::vector<float> x = Random(1536, 7, 3.0f);
  std::vector<Q8Block> a(48), b(48);
  ref_.quantize_q8(x.data(), 1536, a.data());
  simd_.quantize_q8(x.data(), 1536, b.data());
  for (int i = 0; i < 48; ++i) {
    EXPECT_EQ(a[i].d, b[i].d) << i;
    EXPECT_EQ(a[i].s, b[i].s) << i;
    EXPECT_EQ(a[i].sum, b[i].sum) << i;
    EXPECT_EQ(std::memcmp(a[i].q, b[i].q, 32), 0) << i;
    int sum = 0;
    for (int8_t q : a[i].q) sum += q;
    EXPECT_EQ(a[i].sum, sum) << i;
  }
  // The scale is fp16-representable and the codes reach +-127 at the block maximum.
  EXPECT_EQ(F16ToF32(F32ToF16(a[0].d)), a[0].d);
}

TEST_F(CpuKernelsTest, QuantizedDotsMatchReferenceForEveryRowCount) {
  const int64_t k = 576, nb = k / 32;
  std::vector<std::vector<Q8Block>> xq(kMaxDotRows, std::vector<Q8Block>(nb));
  const Q8Block* rows[kMaxDotRows];
  for (int j = 0; j < kMaxDotRows; ++j) {
    ref_.quantize_q8(Random(k, 100 + j).data(), k, xq[j].data());
    rows[j] = xq[j].data();
  }
  const std::vector<float> w = Random(k, 5, 0.1f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
    std::vector<uint8_t> wq(RowBytes(t, k).value());
    QuantizeRow(t, w.data(), wq.data(), k);
    const auto dot = PerRowDot(simd_, t);
    for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
      float want[kMaxDotRows], got[kMaxDotRows];
      PerRowDot(ref_, t)(wq.data(), rows, num_x, nb, want);
      dot(wq.data(), rows, num_x, nb, got);
      for (int j = 0; j < num_x; ++j) {
        EXPECT_NEAR(got[j], want[j], 1e-5f * (1.0f + std::fabs(want[j])))
            << DTypeName(t) << " num_x=" << num_x << " row " << j;
      }
    }
  }
}

using RowGroupDotFn = void (*)(const uint8_t*, int64_t, int64_t, int, const Q8Block* const*, int,
                               int64_t, float*);

RowGroupDotFn RowGroupDot(const CpuKernels& ks, DType t) {
  switch (t) {
    case DType::kQ4_0: return ks.dot_q4_0_rows;
    case DType::kQ4_1: return ks.dot_q4_1_rows;
    case DType::kQ5_0: return ks.dot_q5_0_rows;
    case DType::kQ5_1: return ks.dot_q5_1_rows;
    default: return ks.dot_q8_0_rows;
  }
}

// The row-group dots (CpuKernels::dot_q4_0_rows ... dot_q5_1_rows): 16 weight rows, 8
// activation rows.
class RowGroupDotTest : public ::testing::TestWithParam<DType> {
 protected:
  static constexpr int64_t kRows = 16;  // row 7 in each of 8 lanes reaches row 14

  // Weight rows of nb blocks, row_bytes apart (wider than a row: a strided view); activations
  // quantized by the reference.
  void Make(int64_t nb, int64_t pad) {
    nb_ = nb;
    row_bytes_ = RowBytes(GetParam(), nb * 32).value() + pad;
    w_.assign(kRows * row_bytes_, 0xAB);
    for (int64_t r = 0; r < kRows; ++r) {
      QuantizeRow(GetParam(), Random(nb * 32, 300 + r, 0.1f).data(), w_.data() + r * row_bytes_,
                  nb * 32);
    }
    xq_.assign(kMaxDotRows, std::vector<Q8Block>(nb));
    for (int j = 0; j < kMaxDotRows; ++j) {
      ScalarCpuKernels().quantize_q8(Random(nb * 32, 400 + j, 1.0f + j).data(), nb * 32,
                                     xq_[j].data());
      x_[j] = xq_[j].data();
    }
  }
  // The entry over weight rows [r0, r0 + num_w) and activation rows [j0, j0 + num_x):
  // result[t][i] for row r0 + i, activation j0 + t.
  std::vector<std::vector<float>> Dot(const CpuKernels& ks, int64_t r0, int num_w, int j0,
                                      int num_x) const {
    std::vector<float> out(num_x * kWeightRowGroup);
    const auto dot = RowGroupDot(ks, GetParam());
    dot(w_.data() + r0 * row_bytes_, row_bytes_, BlockBytes(GetParam()), num_w, x_ + j0, num_x,
        nb_, out.data());
    std::vector<std::vector<float>> result(num_x);
    for (int t = 0; t < num_x; ++t) {
      result[t].assign(out.begin() + t * kWeightRowGroup,
                       out.begin() + t * kWeightRowGroup + num_w);
    }
    return result;
  }

  int64_t nb_ = 0, row_bytes_ = 0;
  std::vector<uint8_t> w_;
  std::vector<std::vector<Q8Block>> xq_;
  const Q8Block* x_[kMaxDotRows] = {};
};

// The reference itself: within f32 rounding of the dot of the dequantized weights with the
// quantized activations (d * q) in double; Q4_1's / Q5_1's offsets use the fp16-rounded s, as
// llama.cpp's Q8_1 does, so that term is compared with s too.
TEST_P(RowGroupDotTest, ReferenceIsTheDotOfTheDequantizedRows) {
  Make(18, 0);
  const DType t = GetParam();
  const bool with_min = t == DType::kQ4_1 || t == DType::kQ5_1;
  const bool five_bit = t == DType::kQ5_0 || t == DType::kQ5_1;
  const int64_t qh_at = with_min ? 4 : 2;         // Q5's 32 fifth bits
  const int64_t qs = qh_at + (five_bit ? 4 : 0);  // where the nibbles start
  const int offset = t == DType::kQ4_0 ? 8 : t == DType::kQ5_0 ? 16 : 0;
  const auto got = Dot(ScalarCpuKernels(), 0, kWeightRowGroup, 0, kMaxDotRows);
  for (int j = 0; j < kMaxDotRows; ++j) {
    for (int r = 0; r < kWeightRowGroup; ++r) {
      const uint8_t* row = w_.data() + r * row_bytes_;
      double want = 0.0, magnitude = 0.0;
      for (int64_t b = 0; b < nb_; ++b) {
        const uint8_t* block = row + b * BlockBytes(t);
        uint16_t d16, m16;
        uint32_t qh;
        std::memcpy(&d16, block, 2);
        std::memcpy(&m16, block + 2, 2);
        std::memcpy(&qh, block + qh_at, 4);
        const double d = F16ToF32(d16), dx = xq_[j][b].d;
        for (int i = 0; i < 32; ++i) {
          int level = i < 16 ? block[qs + i] & 0x0F : block[qs + i - 16] >> 4;
          if (five_bit) level |= static_cast<int>((qh >> i) & 1u) << 4;
          if (t == DType::kQ8_0) level = static_cast<int8_t>(block[2 + i]);  // signed, no offset
          const double term = d * (level - offset) * dx * xq_[j][b].q[i];
          want += term;
          magnitude += std::fabs(term);
        }
        if (with_min) {
          const double m = F16ToF32(m16);
          want += m * xq_[j][b].s;
          magnitude += std::fabs(m * xq_[j][b].s);
        }
      }
      EXPECT_NEAR(got[j][r], want, 1e-6 * magnitude) << "row " << r << " x " << j;
    }
  }
}

// Every table gives the reference's floats exactly, for every row count, activation count,
// block count (1 and odd ones) and a strided row layout.
TEST_P(RowGroupDotTest, EveryTableGivesTheReferenceFloats) {
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    const CpuKernels& ks = CpuKernelsFor(isa);
    for (auto [nb, pad] : {std::pair<int64_t, int64_t>{1, 0}, {7, 0}, {18, 12}, {48, 0}}) {
      Make(nb, pad);
      for (int num_w = 1; num_w <= kWeightRowGroup; ++num_w) {
        for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
          EXPECT_EQ(Dot(ks, 1, num_w, 0, num_x), Dot(ScalarCpuKernels(), 1, num_w, 0, num_x))
              << CpuIsaName(isa) << " nb=" << nb << " num_w=" << num_w << " num_x=" << num_x;
        }
      }
    }
  }
}

// The interleaved form (block b of row i of a group at (b * 8 + i) * block bytes: cpu_matmul.h)
// gives every table the floats of the same rows one after another.
TEST_P(RowGroupDotTest, InterleavedRowsGiveTheFloatsOfRowsOneAfterAnother) {
  const int64_t bb = BlockBytes(GetParam());
  for (int64_t nb : {1, 18}) {
    Make(nb, 8);
    std::vector<uint8_t> interleaved(kRows * nb * bb);
    for (int64_t r = 0; r < kRows; ++r) {
      const int64_t group = r / kWeightRowGroup * kWeightRowGroup * nb * bb;
      for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(interleaved.data() + group + (b * kWeightRowGroup + r % kWeightRowGroup) * bb,
                    w_.data() + r * row_bytes_ + b * bb, bb);
      }
    }
    for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
      if (!CpuSupportsIsa(isa)) continue;
      const CpuKernels& ks = CpuKernelsFor(isa);
      for (int64_t g = 0; g < kRows / kWeightRowGroup; ++g) {
        for (int num_w = 1; num_w <= kWeightRowGroup; ++num_w) {
          for (int num_x : {1, 5, 8}) {
            std::vector<float> out(num_x * kWeightRowGroup);
            RowGroupDot(ks, GetParam())(interleaved.data() + g * kWeightRowGroup * nb * bb, bb,
                                        kWeightRowGroup * bb, num_w, x_, num_x, nb, out.data());
            const auto want = Dot(ks, g * kWeightRowGroup, num_w, 0, num_x);
            for (int t = 0; t < num_x; ++t) {
              for (int i = 0; i < num_w; ++i) {
                EXPECT_EQ(out[t * kWeightRowGroup + i], want[t][i])
                    << CpuIsaName(isa) << " nb=" << nb << " group " << g << " num_w=" << num_w
                    << " row " << i << " x " << t;
              }
            }
          }
        }
      }
    }
  }
}

// Batch invariance: weight row 7 against activation row 5 is the same float in a call of its
// own, in each lane of a group, and among any number of activation rows in any slot.
TEST_P(RowGroupDotTest, ARowGivesTheSameFloatInEveryLaneAndAmongAnyRows) {
  Make(18, 4);
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    const CpuKernels& ks = CpuKernelsFor(isa);
    const float alone = Dot(ks, 7, 1, 5, 1)[0][0];
    for (int lane = 0; lane < kWeightRowGroup; ++lane) {
      for (int slot = 0; slot <= 5; ++slot) {
        const auto got = Dot(ks, 7 - lane, kWeightRowGroup, 5 - slot, 8 - (5 - slot));
        EXPECT_EQ(got[slot][lane], alone) << CpuIsaName(isa) << " lane " << lane << " slot "
                                          << slot;
      }
    }
  }
}

// Q8_0's extreme levels, -128 and 127, against full-scale activations: AVX2's |w| * sign(q)
// form and VNNI's (w + 128) * q - 128 * sum(q) neither saturate nor wrap (the reference's sums
// are exact ints).
TEST(RowGroupDotQ8_0Test, ExtremeLevelsGiveTheReferenceFloats) {
  constexpr int64_t kBlocks = 3;
  std::vector<uint8_t> w(kWeightRowGroup * kBlocks * 34);
  for (int r = 0; r < kWeightRowGroup; ++r) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      uint8_t* block = w.data() + (r * kBlocks + b) * 34;
      block[0] = 0x00;
      block[1] = 0x3C;  // f16 1.0
      for (int i = 0; i < 32; ++i) {
        block[2 + i] = static_cast<uint8_t>(((i + r + b) % 3 == 0) ? 0x80 : 0x7F);  // -128, 127
      }
    }
  }
  std::vector<std::vector<Q8Block>> xq(kMaxDotRows, std::vector<Q8Block>(kBlocks));
  const Q8Block* x[kMaxDotRows];
  for (int j = 0; j < kMaxDotRows; ++j) {
    for (Q8Block& b : xq[j]) {
      b.d = 1.0f;
      b.sum = 0;
      for (int i = 0; i < 32; ++i) {
        b.q[i] = static_cast<int8_t>((i + j) % 2 == 0 ? 127 : -127);
        b.sum += b.q[i];
      }
      b.s = static_cast<float>(b.sum);
    }
    x[j] = xq[j].data();
  }
  std::vector<float> want(kMaxDotRows * kWeightRowGroup);
  ScalarCpuKernels().dot_q8_0_rows(w.data(), kBlocks * 34, 34, kWeightRowGroup, x, kMaxDotRows,
                                   kBlocks, want.data());
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    std::vector<float> got(want.size());
    CpuKernelsFor(isa).dot_q8_0_rows(w.data(), kBlocks * 34, 34, kWeightRowGroup, x,
                                     kMaxDotRows, kBlocks, got.data());
    EXPECT_EQ(got, want) << CpuIsaName(isa);
  }
  // Row 0 against x 0, by hand: each block's 32 products of +-127 and 127 or -128.
  int64_t exact = 0;
  for (int64_t b = 0; b < kBlocks; ++b) {
    for (int i = 0; i < 32; ++i) {
      exact += (((i + b) % 3 == 0) ? -128 : 127) * (i % 2 == 0 ? 127 : -127);
    }
  }
  EXPECT_EQ(want[0], static_cast<float>(exact));
}

INSTANTIATE_TEST_SUITE_P(Formats, RowGroupDotTest,
                         ::testing::Values(DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                           DType::kQ5_1, DType::kQ8_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

QuantDotFn KQuantDot(const CpuKernels& ks, DType t) {
  return t == DType::kQ4_K ? ks.dot_q4_K : t == DType::kQ5_K ? ks.dot_q5_K : ks.dot_q6_K;
}

constexpr DType kKQuantTypes[] = {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// A K-quant weight row of `super_blocks` super-blocks: either encoded from Gaussian values, or
// random bytes with finite fp16 scale fields, which reach every level, 6-bit scale/min pattern,
// negative d/dmin and negative Q6_K scale.
std::vector<uint8_t> KQuantRow(DType t, int64_t super_blocks, uint32_t seed, bool random_bytes) {
  const int64_t n = 256 * super_blocks;
  std::vector<uint8_t> row(RowBytes(t, n).value());
  if (!random_bytes) {
    QuantizeRow(t, Random(n, seed, 0.1f).data(), row.data(), n);
    return row;
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> scale(0.0f, 0.01f);
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  const int64_t block_bytes = BlockBytes(t);
  for (int64_t b = 0; b < super_blocks; ++b) {
    uint8_t* block = row.data() + b * block_bytes;
    for (int offset : t == DType::kQ6_K ? std::vector<int>{208} : std::vector<int>{0, 2}) {
      const uint16_t h = F32ToF16(scale(rng));
      std::memcpy(block + offset, &h, 2);
    }
  }
  return row;
}

struct QuantizedActivations {
  std::vector<std::vector<float>> x;         // [kMaxDotRows][k]
  std::vector<std::vector<Q8Block>> blocks;  // [kMaxDotRows][k / 32]
  const Q8Block* rows[kMaxDotRows];
};

QuantizedActivations Activations(const CpuKernels& ks, int64_t k, uint32_t seed) {
  QuantizedActivations a;
  for (int j = 0; j < kMaxDotRows; ++j) {
    a.x.push_back(Random(k, seed + j, 1.0f + j));
    a.blocks.emplace_back(k / 32);
    ks.quantize_q8(a.x[j].data(), k, a.blocks[j].data());
    a.rows[j] = a.blocks[j].data();
  }
  return a;
}

// Batch invariance of the per-row dots (Q8_0, Q4_0/1, Q5_0/1, f32/f16/bf16): a row's dot is the
// same float whatever the number of rows in the call (the rows of one step arrive in groups of up
// to kMaxDotRows, depending on the other requests), in every row slot; odd block counts (the tail of the two-accumulator loops).
// (The row groups: RowGroupDotTest.)
TEST_F(CpuKernelsTest, EveryDotGivesARowTheSameFloatAloneOrAmongOthers) {
  for (int64_t k : {544, 576}) {
    const int64_t nb = k / 32;
    std::vector<std::vector<float>> xf;
    std::vector<std::vector<Q8Block>> xq(kMaxDotRows, std::vector<Q8Block>(nb));
    const Q8Block* qrows[kMaxDotRows];
    const float* frows[kMaxDotRows];
    for (int j = 0; j < kMaxDotRows; ++j) {
      xf.push_back(Random(k + 19, 200 + j));  // + 19: two whole vectors past the strides, then 3
      simd_.quantize_q8(xf[j].data(), k, xq[j].data());
      qrows[j] = xq[j].data();
      frows[j] = xf[j].data();
    }
    const std::vector<float> w = Random(k + 19, 9, 0.1f);
    for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
      std::vector<uint8_t> wq(RowBytes(t, k).value());
      QuantizeRow(t, w.data(), wq.data(), k);
      const auto dot = PerRowDot(simd_, t);
      for (int num_x = 2; num_x <= kMaxDotRows; ++num_x) {
        float many[kMaxDotRows];
        dot(wq.data(), qrows, num_x, nb, many);
        for (int j = 0; j < num_x; ++j) {
          float alone;
          dot(wq.data(), &qrows[j], 1, nb, &alone);
          EXPECT_EQ(many[j], alone)
              << DTypeName(t) << " k=" << k << " num_x=" << num_x << " " << j;
        }
      }
    }
    // The float dots over k + 19 elements: the strides of 32, two vectors on chain 0, a scalar
    // tail of 3; the 16-bit weights as f16 and as bf16.
    const int64_t n = k + 19;
    std::vector<uint16_t> wh(n), wb(n);
    for (int64_t i = 0; i < n; ++i) {
      wh[i] = F32ToF16(w[i]);
      wb[i] = static_cast<uint16_t>(std::bit_cast<uint32_t>(w[i]) >> 16);  // truncated: any bf16
    }
    for (int num_x = 2; num_x <= kMaxDotRows; ++num_x) {
      float many_f32[kMaxDotRows], many_f16[kMaxDotRows], many_bf16[kMaxDotRows];
      simd_.dot_f32(w.data(), frows, num_x, n, many_f32);
      simd_.dot_f16(wh.data(), frows, num_x, n, many_f16);
      simd_.dot_bf16(wb.data(), frows, num_x, n, many_bf16);
      for (int j = 0; j < num_x; ++j) {
        float alone;
        simd_.dot_f32(w.data(), &frows[j], 1, n, &alone);
        EXPECT_EQ(many_f32[j], alone) << "f32 k=" << k << " num_x=" << num_x << " " << j;
        simd_.dot_f16(wh.data(), &frows[j], 1, n, &alone);
        EXPECT_EQ(many_f16[j], alone) << "f16 k=" << k << " num_x=" << num_x << " " << j;
        simd_.dot_bf16(wb.data(), &frows[j], 1, n, &alone);
        EXPECT_EQ(many_bf16[j], alone) << "bf16 k=" << k << " num_x=" << num_x << " " << j;
      }
    }
  }
}

TEST_F(CpuKernelsTest, KQuantDotsMatchReferenceOnOddSizes) {
  for (DType t : kKQuantTypes) {
    for (int64_t nb = 1; nb <= 3; ++nb) {
      const QuantizedActivations a = Activations(ref_, 256 * nb, 40 + nb);
      for (bool random_bytes : {false, true}) {
        const std::vector<uint8_t> w = KQuantRow(t, nb, 50 + nb, random_bytes);
        std::vector<float> wd(256 * nb);
        DequantizeRow(t, w.data(), wd.data(), 256 * nb);
        for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
          float want[kMaxDotRows], got[kMaxDotRows];
          KQuantDot(ref_, t)(w.data(), a.rows, num_x, nb, want);
          KQuantDot(simd_, t)(w.data(), a.rows, num_x, nb, got);
          for (int j = 0; j < num_x; ++j) {
            double magnitude = 0;
            for (int64_t i = 0; i < 256 * nb; ++i) {
              magnitude += std::fabs(double{wd[i]} * a.blocks[j][i / 32].d * a.blocks[j][i / 32].q[i % 32]);
            }
            EXPECT_LE(std::fabs(got[j] - want[j]), 1e-6 * magnitude)
                << DTypeName(t) << " blocks=" << nb << " random=" << random_bytes
                << " num_x=" << num_x << " row " << j << ": " << got[j] << " vs " << want[j];
          }
        }
      }
    }
  }
}

// Against the f32 dot of the dequantized weights with the unquantized activations, every
// kernel table may only add the activation rounding: |x - d * q| <= max|x| * (1/254 + 2^-11)
// per block of 32 (half a step, plus the fp16 rounding of d times |q| <= 127), weighted by
// sum |w| over the block; plus f32 summation error. Against the same dot with the activations
// as quantized (d * q), only f32 rounding remains: the integer sums, min terms included
// (exact sum(q) times d, not the fp16-rounded s), are exact.
TEST(CpuKernelsKQuantTest, DotsStayWithinTheActivationRoundingOfTheF32Dot) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    const CpuKernels& ks = CpuKernelsFor(isa);
    for (DType t : kKQuantTypes) {
      for (int64_t nb = 1; nb <= 3; ++nb) {
        const int64_t k = 256 * nb;
        const QuantizedActivations a = Activations(ks, k, 60 + nb);
        for (bool random_bytes : {false, true}) {
          const std::vector<uint8_t> w = KQuantRow(t, nb, 70 + nb, random_bytes);
          std::vector<float> wd(k);
          DequantizeRow(t, w.data(), wd.data(), k);
          float got[kMaxDotRows];
          KQuantDot(ks, t)(w.data(), a.rows, kMaxDotRows, nb, got);
          for (int j = 0; j < kMaxDotRows; ++j) {
            double exact = 0, bound = 0, magnitude = 0, exact_q = 0, magnitude_q = 0;
            for (int64_t b = 0; b < k / 32; ++b) {
              double amax = 0, w_abs = 0;
              for (int i = 0; i < 32; ++i) {
                const double wi = wd[32 * b + i], xi = a.x[j][32 * b + i];
                const double xq = double{a.blocks[j][b].d} * a.blocks[j][b].q[i];
                exact += wi * xi;
                magnitude += std::fabs(wi * xi);
                exact_q += wi * xq;
                magnitude_q += std::fabs(wi * xq);
                amax = std::max(amax, std::fabs(xi));
                w_abs += std::fabs(wi);
              }
              bound += amax * (1.0 / 254 + std::ldexp(1.0, -11)) * w_abs;
            }
            EXPECT_LE(std::fabs(got[j] - exact), 1.001 * bound + 1e-5 * magnitude)
                << CpuIsaName(isa) << " " << DTypeName(t) << " blocks=" << nb
                << " random=" << random_bytes << " row " << j;
            EXPECT_LE(std::fabs(got[j] - exact_q), 1e-6 * magnitude_q)
                << CpuIsaName(isa) << " " << DTypeName(t) << " blocks=" << nb
                << " random=" << random_bytes << " row " << j << " (quantized activations)";
          }
        }
      }
    }
  }
}

TEST_F(CpuKernelsTest, F32DotAndConversionsMatch) {
  for (int64_t n : {1, 7, 8, 33, 64, 1000}) {
    const std::vector<float> w = Random(n, 11);
    std::vector<std::vector<float>> xs;
    const float* rows[kMaxDotRows];
    for (int j = 0; j < kMaxDotRows; ++j) xs.push_back(Random(n, 20 + j));
    for (int j = 0; j < kMaxDotRows; ++j) rows[j] = xs[j].data();
    for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
      float want[kMaxDotRows], got[kMaxDotRows];
      ref_.dot_f32(w.data(), rows, num_x, n, want);
      simd_.dot_f32(w.data(), rows, num_x, n, got);
      for (int j = 0; j < num_x; ++j) EXPECT_NEAR(got[j], want[j], 1e-5f * std::sqrt(n)) << n;
    }
    std::vector<uint16_t> h(n), bf(n);
    QuantizeRow(DType::kF16, w.data(), h.data(), n);
    QuantizeRow(DType::kBF16, w.data(), bf.data(), n);
    std::vector<float> a(n), b(n);
    ref_.f16_to_f32(h.data(), a.data(), n);
    simd_.f16_to_f32(h.data(), b.data(), n);
    EXPECT_EQ(a, b) << n;
    ref_.bf16_to_f32(bf.data(), a.data(), n);
    simd_.bf16_to_f32(bf.data(), b.data(), n);
    EXPECT_EQ(a, b) << n;
  }
}

// f32_to_f16 (the f16 KV cache's writes) is F32ToF16 bit for bit in both tables: rounding ties
// to even, half subnormals, overflow to infinity at 65520, signed zeros, infinities and NaN
// payloads (which vcvtps2ph would quiet), in whole vectors and in the tail.
TEST_F(CpuKernelsTest, NarrowingToF16IsF32ToF16BitForBit) {
  const auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<float> x = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.99f, 65520.0f, -70000.0f,
                          5.9604645e-8f, 2.9802322e-8f, 2.98023259e-8f, 1e-10f, 6.1035156e-5f,
                          bits(0x3F801000u), bits(0x3F803000u), bits(0x3F800FFFu),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), bits(0x7FC00000u),
                          bits(0x7F800001u), bits(0xFFA02000u), bits(0x7FBFE000u)};
  const std::vector<float> noise = Random(61, 5);
  for (size_t i = 0; i < noise.size(); ++i) {
    x.push_back(noise[i] * std::ldexp(1.0f, static_cast<int>(i % 30) - 20));
  }
  for (const int64_t n : {int64_t{8}, static_cast<int64_t>(x.size())}) {
    std::vector<uint16_t> want(n), ref(n), simd(n);
    for (int64_t i = 0; i < n; ++i) want[i] = F32ToF16(x[i]);
    ref_.f32_to_f16(x.data(), ref.data(), n);
    simd_.f32_to_f16(x.data(), simd.data(), n);
    EXPECT_EQ(ref, want) << n;
    EXPECT_EQ(simd, want) << n;
  }
}

// dot_f16 / dot_bf16 give the very floats of widening the row and calling dot_f32, in every
// table, for every row count and odd lengths (the scalar tails).
TEST(CpuKernelsHalfDotTest, HalfDotsGiveTheSameFloatsAsWideningFirst) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    const CpuKernels& ks = CpuKernelsFor(isa);
    for (int64_t n : {1, 7, 8, 33, 64, 100, 1000}) {
      std::vector<std::vector<float>> xs;
      const float* rows[kMaxDotRows];
      for (int j = 0; j < kMaxDotRows; ++j) xs.push_back(Random(n, 60 + j));
      for (int j = 0; j < kMaxDotRows; ++j) rows[j] = xs[j].data();
      const std::vector<float> w = Random(n, 70);
      for (DType t : {DType::kF16, DType::kBF16}) {
        std::vector<uint16_t> half(n);
        QuantizeRow(t, w.data(), half.data(), n);
        std::vector<float> widened(n);
        (t == DType::kF16 ? ks.f16_to_f32 : ks.bf16_to_f32)(half.data(), widened.data(), n);
        for (int num_x = 1; num_x <= kMaxDotRows; ++num_x) {
          float want[kMaxDotRows], got[kMaxDotRows];
          ks.dot_f32(widened.data(), rows, num_x, n, want);
          (t == DType::kF16 ? ks.dot_f16 : ks.dot_bf16)(half.data(), rows, num_x, n, got);
          for (int j = 0; j < num_x; ++j) {
            EXPECT_EQ(got[j], want[j]) << CpuIsaName(isa) << " " << DTypeName(t) << " n=" << n
                                       << " num_x=" << num_x << " row " << j;
          }
        }
      }
    }
  }
}

// Attention straight over f16 cache rows gives the very floats of widening the rows to f32
// first (what CpuAttention did before), in every table: odd head dims exercise the scalar
// tails, a stride wider than head_dim the pool layout, 1..4 query heads every dot shape, and
// 1..6 heads of a group accumulated in one call as one at a time.
TEST(CpuKernelsF16AttentionTest, F16RowsGiveTheSameFloatsAsWideningFirst) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (!CpuSupportsIsa(isa)) continue;
    const CpuKernels& ks = CpuKernelsFor(isa);
    for (int64_t head_dim : {8, 12, 64, 72, 128}) {
      const int64_t count = 17, stride = 3 * head_dim + 5;
      std::vector<uint16_t> rows(count * stride);
      const std::vector<float> values = Random(count * stride, 80 + head_dim);
      QuantizeRow(DType::kF16, values.data(), rows.data(), count * stride);
      std::vector<float> widened(count * head_dim);  // contiguous, as CpuAttention's scratch
      for (int64_t t = 0; t < count; ++t) {
        ks.f16_to_f32(rows.data() + t * stride, widened.data() + t * head_dim, head_dim);
      }
      std::vector<std::vector<float>> q;
      const float* q_rows[kMaxDotRows];
      for (int h = 0; h < kMaxDotRows; ++h) q.push_back(Random(head_dim, 90 + h));
      for (int h = 0; h < kMaxDotRows; ++h) q_rows[h] = q[h].data();
      for (int num_q = 1; num_q <= kMaxDotRows; ++num_q) {
        std::vector<float> want(kMaxDotRows * count), got(kMaxDotRows * count);
        ks.attn_scores(q_rows, num_q, widened.data(), head_dim, count, head_dim, 0.125f,
                       want.data(), count);
        ks.attn_scores_f16(q_rows, num_q, rows.data(), stride, count, head_dim, 0.125f,
                           got.data(), count);
        EXPECT_EQ(got, want) << CpuIsaName(isa) << " head_dim=" << head_dim
                             << " num_q=" << num_q;
      }
      // 1..6 heads at once: the group call gives each head the floats of a call for it alone.
      for (int heads = 1; heads <= 6; ++heads) {
        std::vector<std::vector<float>> p, want, got;
        std::vector<const float*> p_rows;
        std::vector<float*> want_rows, got_rows;
        for (int h = 0; h < heads; ++h) {
          p.push_back(Random(count, 99 + h));
          want.push_back(Random(head_dim, 98 + h));
          got.push_back(want.back());
        }
        for (int h = 0; h < heads; ++h) {
          p_rows.push_back(p[h].data());
          want_rows.push_back(want[h].data());
          got_rows.push_back(got[h].data());
        }
        for (int h = 0; h < heads; ++h) {  // one head at a time, over widened rows
          ks.attn_accumulate(&p_rows[h], 1, widened.data(), head_dim, count, head_dim,
                             &want_rows[h]);
        }
        ks.attn_accumulate_f16(p_rows.data(), heads, rows.data(), stride, count, head_dim,
                               got_rows.data());
        EXPECT_EQ(got, want) << CpuIsaName(isa) << " head_dim=" << head_dim << " heads=" << heads;
        std::vector<std::vector<float>> f32_group = want;  // reset to the starting values
        for (int h = 0; h < heads; ++h) f32_group[h] = Random(head_dim, 98 + h);
        std::vector<float*> f32_rows;
        for (auto& row : f32_group) f32_rows.push_back(row.data());
        ks.attn_accumulate(p_rows.data(), heads, widened.data(), head_dim, count, head_dim,
                           f32_rows.data());
        EXPECT_EQ(f32_group, want) << CpuIsaName(isa) << " f32 head_dim=" << head_dim
                                   << " heads=" << heads;
      }
    }
  }
}

TEST_F(CpuKernelsTest, ElementwiseKernelsMatch) {
  const int64_t n = 1539;  // not a multiple of 8: exercises the tails
  const std::vector<float> a = Random(n, 31, 4.0f), b = Random(n, 32), w = Random(n, 33);
  std::vector<float> want(n), got(n);
  ref_.rms_norm(a.data(), w.data(), n, 1e-5f, want.data());
  simd_.rms_norm(a.data(), w.data(), n, 1e-5f, got.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i])));
  ref_.silu_mul(a.data(), b.data(), n, want.data());
  simd_.silu_mul(a.data(), b.data(), n, got.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 2e-6f * (1 + std::fabs(want[i])));
  ref_.add(a.data(), b.data(), n, want.data());
  simd_.add(a.data(), b.data(), n, got.data());
  EXPECT_EQ(got, want);
  want = b;
  got = b;
  ref_.axpy(0.37f, a.data(), n, want.data());
  simd_.axpy(0.37f, a.data(), n, got.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i])));
  ref_.scale(-1.5f, n, want.data());
  simd_.scale(-1.5f, n, got.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-6f * (1 + std::fabs(want[i])));
  // Scores as attention sees them: one maximum, the rest below it, some far below (underflow).
  std::vector<float> s = Random(n, 34, 30.0f);
  float max = s[0];
  for (float v : s) max = std::max(max, v);
  want = s;
  got = s;
  const float sum_want = ref_.exp_sub_sum(want.data(), n, max);
  const float sum_got = simd_.exp_sub_sum(got.data(), n, max);
  EXPECT_NEAR(sum_got, sum_want, 1e-5f * sum_want);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6f * want[i] + 1e-37f) << i;
    EXPECT_TRUE(std::isfinite(got[i])) << i;
  }
}

}  // namespace
}  // namespace tpserve
