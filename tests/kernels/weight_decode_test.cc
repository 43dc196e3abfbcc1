// The CUDA kernels' element math (kernels/cuda/weight_decode.h) run on the host against the CPU reference:
// every conversion over its whole input range (or a dense sweep), and WeightAt over random
// matrices of every weight format the CUDA backend takes (including every e4m3 / f16 / bf16
// bit pattern and column chunks) and over the quantized checkpoints of tests/golden/quant as
// the loader reads them (AWQ, GPTQ with and without act-order, fp8 per channel and 128x128),
// whole and cut in tensor-parallel halves: bit for bit, except that a NaN only has to be a NaN.
#include "kernels/cuda/weight_decode.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/quant_scheme.h"
#include "checkpoint/stored_matrix.h"
#include "formats/dtype.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "kernels/cuda/device_weight.h"
#include "kernels/quantize.h"
#include "kernels/quantize_weights.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {
namespace {

// Same bits, or both NaN (weight_decode.h: NaN payloads follow the CUDA intrinsics).
bool SameFloat(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return F32Bits(a) == F32Bits(b);
}

TEST(WeightDecodeTest, F16ToF32MatchesTheCpuForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = F16BitsToF32(static_cast<uint16_t>(h));
    ASSERT_TRUE(SameFloat(got, F16ToF32(static_cast<uint16_t>(h)))) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(F32Bits(F16BitsToF32(0x7E01)), 0x7FFFFFFFu);  // any NaN -> the canonical one
  EXPECT_EQ(F32Bits(F16BitsToF32(0x0001)), 0x33800000u);  // smallest subnormal, 2^-24
}

TEST(WeightDecodeTest, Fp8ToF32MatchesTheCpuForEveryCode) {
  for (uint32_t code = 0; code < 256; ++code) {
    const float got = Fp8ToF32(static_cast<uint8_t>(code));
    ASSERT_TRUE(SameFloat(got, F8E4M3ToF32(static_cast<uint8_t>(code)))) << "code " << code;
  }
  EXPECT_EQ(Fp8ToF32(0x7E), 448.0f);
  EXPECT_EQ(Fp8ToF32(0x01), std::ldexp(1.0f, -9));
  EXPECT_TRUE(std::isnan(Fp8ToF32(0xFF)));
}

TEST(WeightDecodeTest, Bf16RoundTripMatchesTheCpu) {
  for (uint32_t b = 0; b < 65536; ++b) {
    ASSERT_TRUE(
        SameFloat(Bf16BitsToF32(static_cast<uint16_t>(b)), BF16ToF32(static_cast<uint16_t>(b))));
  }
  // Every 257th f32 bit pattern (a prime stride: all exponents, mantissas and both signs),
  // then the ties and the edges by hand.
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 257) {
    const float f = BitsF32(static_cast<uint32_t>(bits));
    if (std::isnan(f)) {
      ASSERT_EQ(F32ToBf16Bits(f), 0x7FFF);
      continue;
    }
    ASSERT_EQ(F32ToBf16Bits(f), F32ToBF16(f)) << "f32 0x" << std::hex << bits;
  }
  EXPECT_EQ(F32ToBf16Bits(BitsF32(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(F32ToBf16Bits(BitsF32(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(F32ToBf16Bits(BitsF32(0x7F7FFFFFu)), 0x7F80);  // max float rounds to infinity
}

TEST(WeightDecodeTest, F32ToFp8MatchesTheCpu) {
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 257) {
    const float f = BitsF32(static_cast<uint32_t>(bits));
    ASSERT_EQ(F32ToFp8(f), F32ToF8E4M3(f)) << "f32 0x" << std::hex << bits << " = " << f;
  }
  // Every e4m3 value and the midpoints between neighbours (ties to even), both signs.
  for (int code = 0; code < 126; ++code) {
    for (float sign : {1.0f, -1.0f}) {
      const float v = sign * Fp8ToF32(static_cast<uint8_t>(code));
      const float mid =
          sign * (Fp8ToF32(static_cast<uint8_t>(code)) + Fp8ToF32(static_cast<uint8_t>(code + 1))) /
          2;
      ASSERT_EQ(F32ToFp8(v), F32ToF8E4M3(v)) << v;
      ASSERT_EQ(F32ToFp8(mid), F32ToF8E4M3(mid)) << mid;
    }
  }
  EXPECT_EQ(F32ToFp8(464.0f), 0x7E);  // past 448 saturates (480 would be NaN's code)
  EXPECT_EQ(F32ToFp8(-INFINITY), 0xFE);
  EXPECT_EQ(F32ToFp8(NAN), 0x7F);
}

// The activation quantizers' scale rule (quant_kernels.h, per row and per 1x128 group).
TEST(WeightDecodeTest, Fp8ActivationScaleFollowsAmaxOver448WithItsBound) {
  EXPECT_EQ(Fp8ActivationScale(0.0f, 0.0f), 1.0f);  // an all-zero group
  EXPECT_EQ(Fp8ActivationScale(448.0f, 0.0f), 1.0f);
  EXPECT_EQ(Fp8ActivationScale(896.0f, 0.0f), 2.0f);
  EXPECT_EQ(Fp8ActivationScale(3000.0f, 1200.0f), 1200.0f / 448.0f);  // clamped to the bound
  EXPECT_EQ(Fp8ActivationScale(100.0f, 1200.0f), 100.0f / 448.0f);    // below it: unchanged
  // The group's largest value lands on e4m3's largest code.
  EXPECT_EQ(F32ToFp8(-5.0f / Fp8ActivationScale(5.0f, 0.0f)), 0xFE);
}

// Every element of `w` decoded by WeightAt against DequantizeWeightRow; returns the number of
// elements compared.
int64_t ExpectSameDecode(const WeightMatrix& w, const std::string& what) {
  const DeviceWeight d = ToDeviceWeight(w);
  std::vector<float> row(w.cols);
  int64_t mismatches = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeWeightRow(w, r, row.data());
    for (int64_t c = 0; c < w.cols; ++c) {
      const float got = WeightAt(d, r, c);
      if (!SameFloat(got, row[c]) && ++mismatches <= 5) {
        ADD_FAILURE() << what << " (" << r << ", " << c << "): WeightAt " << got << " (0x"
                      << std::hex << F32Bits(got) << "), DequantizeWeightRow " << row[c] << " (0x"
                      << F32Bits(row[c]) << std::dec << ")";
      }
    }
  }
  return w.rows * w.cols;
}

void FillRandomBytes(std::vector<uint8_t>& bytes, std::mt19937& rng) {
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
}

// Random f16 values of ordinary size (scales, zero points), as bits.
void FillRandomHalves(std::vector<uint8_t>& bytes, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    uint16_t h = F32ToF16(dist(rng));
    std::memcpy(&bytes[i], &h, 2);
  }
}

struct FormatCase {
  TensorFormat format;
  bool raw_codes;  // overwrite the values with random bytes: every bit pattern, NaNs too
  bool act_order = false;
};

TEST(WeightDecodeTest, RandomMatricesOfEveryFormatMatchTheCpu) {
  const FormatCase cases[] = {
      {TensorFormat::Of(FormatKind::kF32), true},
      {TensorFormat::Of(FormatKind::kF16), true},
      {TensorFormat::Of(FormatKind::kBF16), true},
      {TensorFormat::Of(FormatKind::kF8E4M3), true},
      {TensorFormat::Of(FormatKind::kFp8PerChannel), true},
      {TensorFormat::Of(FormatKind::kFp8PerChannel), false},
      {TensorFormat::Of(FormatKind::kFp8Block128), true},
      {TensorFormat::Of(FormatKind::kFp8Block128), false},
      {TensorFormat::Int4(32), true},
      {TensorFormat::Int4(128), false},
      {TensorFormat::Int4(128, /*act_order=*/true), true, /*act_order=*/true},
  };
  std::mt19937 rng(20260417);
  int64_t compared = 0;
  for (const FormatCase& fc : cases) {
    // 200 x 384: two 128-row tiles (the second partial); for fp8-block also a partial
    // 128-column tile when cut to 320 columns below.
    const int64_t rows = 200, cols = 384;
    std::normal_distribution<float> normal(0.0f, 0.3f);
    std::vector<float> src(rows * cols);
    for (float& v : src) v = normal(rng);
    HostMatrix host = QuantizeWeights(fc.format, src.data(), rows, cols);
    if (fc.raw_codes) FillRandomBytes(host.values, rng);
    if (fc.format.kind == FormatKind::kInt4Group && fc.raw_codes) {
      FillRandomHalves(host.scales, rng, -0.05f, 0.05f);
      FillRandomHalves(host.zeros, rng, 0.0f, 15.0f);
    }
    if (fc.act_order) {  // stored column order: the permutation is the caller's (gather of x)
      host.perm.resize(cols);
      std::iota(host.perm.begin(), host.perm.end(), 0);
      std::shuffle(host.perm.begin(), host.perm.end(), rng);
      host.matrix.input_perm = host.perm.data();
    }
    const std::string name = TensorFormatName(fc.format) + (fc.raw_codes ? " raw" : "");
    compared += ExpectSameDecode(host.matrix, name);
    // Column chunks (what MatMulChunked and the row-parallel layers multiply).
    const int64_t kc = 128;
    for (int64_t c = 0; c < cols / kc; ++c) {
      compared += ExpectSameDecode(ColumnChunk(host.matrix, c, kc), name + " chunk");
    }
    if (fc.format.kind == FormatKind::kFp8Block128) {  // a partial last tile of columns
      WeightMatrix narrow = host.matrix;
      narrow.cols = 320;
      compared += ExpectSameDecode(narrow, name + " 320 columns");
    }
  }
  EXPECT_GT(compared, 11 * 200 * 384);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The quantized checkpoints as the loader reads them (checkpoint/stored_matrix.h): AWQ's and
// GPTQ's packings repacked into the engine's int4 layout, act-order as input_perm, fp8 scales.
TEST(WeightDecodeTest, LoadedQuantizedCheckpointsMatchTheCpu) {
  int64_t matrices = 0, permuted = 0;
  for (const char* fixture :
       {"awq_g32", "awq_g64", "gptq_g32_sym", "gptq_g64_asym", "gptq_g32_asym_descact",
        "fp8_fbgemm", "fp8_ct_channel", "fp8_ct_block"}) {
    SCOPED_TRACE(fixture);
    const std::string dir = std::string("tests/golden/quant/") + fixture;
    absl::StatusOr<QuantScheme> scheme = ParseQuantizationConfig(ReadText(dir + "/config.json"));
    ASSERT_TRUE(scheme.ok()) << scheme.status();
    auto source = SafetensorsFile::Open(dir + "/model.safetensors");
    auto expect = SafetensorsFile::Open(dir + "/expect.safetensors");
    ASSERT_TRUE(source.ok() && expect.ok());
    for (const std::string& name : (*expect)->TensorNames()) {
      const TensorView want = *(*expect)->Find(name);
      TensorUse used;
      absl::StatusOr<StoredMatrix> stored = StoredMatrix::Open(
          **source, *scheme, name.substr(0, name.size() - 7), want.shape[0], want.shape[1], &used);
      ASSERT_TRUE(stored.ok()) << name << ": " << stored.status();
      ASSERT_TRUE(CudaMatMulSupports(stored->format())) << TensorFormatName(stored->format());
      const int64_t rows = stored->rows(), cols = stored->cols();
      // Whole, and the halves of TP 2 (refused ones, which cut a tile or group, skipped).
      for (const TensorSlice& s :
           {TensorSlice{0, rows, 0, cols}, TensorSlice{rows / 2, rows / 2, 0, cols},
            TensorSlice{0, rows, cols / 2, cols / 2}}) {
        absl::StatusOr<HostMatrix> m = stored->Read(s);
        if (!m.ok()) continue;
        permuted += m->matrix.input_perm != nullptr;
        ExpectSameDecode(m->matrix, name);
        ++matrices;
      }
    }
  }
  EXPECT_GE(matrices, 7 * 7 + 3);  // every fixture's linears (fbgemm quantizes 3), whole
  EXPECT_GT(permuted, 0);          // the act-order fixture was read with its permutation
}

}  // namespace
}  // namespace tpserve::cuda
