// The 128x128 block-scale layout CudaMatMul hands cuBLASLt (gemm_request.h's
// CublasBlock128Layout, the repack Block128ScaleRepack describes, cuda_matmul_fp8.cc), read
// back on the host against the CPU's decode of the same fp8-block weight
// (DequantizeWeightRow, kernels/weight_matrix.cc): element (r, c) of the matrix dequantized
// through that layout must equal the reference. It checks the layout (which scale each element
// meets), not cuBLASLt's arithmetic (cuda_parity_test does that on a GPU).
//
// On today's code the layout was right and inlined in cuda_matmul_fp8.cc (no function to test;
// this pins it). The test can fail: with Index transposed ((c / 128) * ld + r / 128), the
// off-diagonal tiles trade scales (2 and 4), and EXPECT_EQ(Dequantized(0, 128), ...) and the
// mismatch count fail, as they do if the repack copied bands at the wrong pitch.
#include "kernels/cuda/gemm_request.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/weight_decode.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {
namespace {

// An fp8-block weight [rows, cols] as a checkpoint holds it: codes, and tile scales in bands of
// ceil(cols / 128) floats (scale_stride), band-major.
struct Fp8BlockWeight {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  WeightMatrix matrix;
};

Fp8BlockWeight MakeWeight(int64_t rows, int64_t cols, const std::vector<float>& tile_scales) {
  Fp8BlockWeight w;
  w.codes.resize(rows * cols);
  uint32_t state = 12345;
  for (uint8_t& code : w.codes) {
    state = state * 1664525u + 1013904223u;
    code = static_cast<uint8_t>(state >> 24);
    if ((code & 0x7F) == 0x7F) code ^= 1;  // not NaN
  }
  w.scales = tile_scales;
  w.matrix.format = TensorFormat::Of(FormatKind::kFp8Block128);
  w.matrix.data = w.codes.data();
  w.matrix.rows = rows;
  w.matrix.cols = cols;
  w.matrix.row_bytes = cols;
  w.matrix.scales = w.scales.data();
  w.matrix.scale_stride = (cols + 127) / 128;
  return w;
}

// The scales as cuBLASLt gets them: the matrix's bands copied into the layout as
// cudaMemcpy2DAsync does with Block128ScaleRepack's arguments; NaN where nothing is copied.
std::vector<float> HandedToCublas(const WeightMatrix& w, const Block128ScaleLayout& layout) {
  std::vector<float> out(layout.floats(), std::nanf(""));
  const ScaleRepack copy = Block128ScaleRepack(layout, w.scale_stride);
  const auto* src = static_cast<const uint8_t*>(w.scales);
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  for (int64_t row = 0; row < copy.height; ++row) {
    std::memcpy(dst + row * copy.dst_pitch_bytes, src + row * copy.src_pitch_bytes,
                copy.width_bytes);
  }
  return out;
}

// Element (r, c) of `w` dequantized through the layout: code times the scale cuBLASLt reads.
float Dequantized(const WeightMatrix& w, const Block128ScaleLayout& layout,
                  const std::vector<float>& handed, int64_t r, int64_t c) {
  const uint8_t code = static_cast<const uint8_t*>(w.data)[r * w.row_bytes + c];
  return Fp8ToF32(code) * handed[layout.Index(r, c)];
}

// Elements where the layout's reading differs from the CPU reference.
int64_t Mismatches(const WeightMatrix& w) {
  const Block128ScaleLayout layout = CublasBlock128Layout(w.rows, w.cols);
  const std::vector<float> handed = HandedToCublas(w, layout);
  std::vector<float> row(w.cols);
  int64_t bad = 0;
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeWeightRow(w, r, row.data());
    for (int64_t c = 0; c < w.cols; ++c) {
      if (Dequantized(w, layout, handed, r, c) != row[c]) ++bad;
    }
  }
  return bad;
}

TEST(GemmRequestTest, Block128LayoutOfA256x256Weight) {
  const Block128ScaleLayout layout = CublasBlock128Layout(256, 256);
  EXPECT_EQ(layout.n_tiles, 2);
  EXPECT_EQ(layout.k_tiles, 2);
  EXPECT_EQ(layout.ld, 4);  // bands padded to 16 bytes
  EXPECT_EQ(layout.Index(0, 128), 1);
  EXPECT_EQ(layout.Index(128, 0), 4);
  EXPECT_EQ(layout.Index(255, 255), 5);
}

TEST(GemmRequestTest, Block128ScalesReadAsTheCpuDecodesThem) {
  // 2x2 tiles with distinct scales, the off-diagonal ones too (2 and 4): a transposed layout
  // gives (0, 128) the scale of (128, 0). Powers of two: every product is exact.
  const Fp8BlockWeight w = MakeWeight(256, 256, {0.5f, 2.0f, 4.0f, 8.0f});
  const Block128ScaleLayout layout = CublasBlock128Layout(256, 256);
  const std::vector<float> handed = HandedToCublas(w.matrix, layout);
  std::vector<float> row(256);
  for (int64_t r : {0, 127, 128, 255}) {
    DequantizeWeightRow(w.matrix, r, row.data());
    for (int64_t c : {0, 127, 128, 255}) {
      EXPECT_EQ(Dequantized(w.matrix, layout, handed, r, c), row[c])
          << "(" << r << ", " << c << ")";
    }
  }
  const float code_0_128 = Fp8ToF32(w.codes[128]);
  ASSERT_NE(code_0_128, 0.0f);
  EXPECT_EQ(Dequantized(w.matrix, layout, handed, 0, 128), code_0_128 * 2.0f);
  EXPECT_EQ(Mismatches(w.matrix), 0);
}

TEST(GemmRequestTest, Block128ScalesOfAColumnChunkReadItsOwnTiles) {
  // A chunk of a [256, 512] weight (scale bands of 4, the chunk's a window 2 tiles in):
  // the repack must take the chunk's tiles, not the matrix's first ones.
  const Fp8BlockWeight w =
      MakeWeight(256, 512, {0.5f, 2.0f, 4.0f, 8.0f, 16.0f, 32.0f, 64.0f, 128.0f});
  const WeightMatrix chunk = ColumnChunk(w.matrix, 1, 256);
  ASSERT_EQ(chunk.scale_stride, 4);
  EXPECT_EQ(Mismatches(chunk), 0);
  EXPECT_EQ(Mismatches(w.matrix), 0);
}

TEST(GemmRequestTest, Fp8ScaledGemmArgsNameTheScaleModes) {
  const GemmArgs block = Fp8ScaledGemmArgs(true, 17, 4096, 7168, 7168, false);
  EXPECT_EQ(block.w_scale, GemmScale::kBlock128);
  EXPECT_EQ(block.x_scale, GemmScale::kVec128);
  EXPECT_EQ(block.out, GemmType::kBF16);
  EXPECT_EQ(block.ldw, 7168);
  EXPECT_EQ(block.ldx, 7168);
  EXPECT_EQ(block.ldy, 4096);
  const GemmArgs rows = Fp8ScaledGemmArgs(false, 17, 4096, 7168, 7168, true);
  EXPECT_EQ(rows.w_scale, GemmScale::kOuterVec);
  EXPECT_EQ(rows.x_scale, GemmScale::kOuterVec);
  EXPECT_EQ(rows.out, GemmType::kF32);
  // f16 weights write f32 (narrowed after); bf16 writes bf16 unless y is f32.
  EXPECT_EQ(MatMulGemmArgs(GemmType::kF16, 4, 8, 16, 16, false).out, GemmType::kF32);
  EXPECT_EQ(MatMulGemmArgs(GemmType::kBF16, 4, 8, 16, 16, false).out, GemmType::kBF16);
  EXPECT_EQ(MatMulGemmArgs(GemmType::kBF16, 4, 8, 16, 16, true).out, GemmType::kF32);
}

}  // namespace
}  // namespace tpserve::cuda
