#include "kernels/cpu/onednn_bf16_matmul.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "formats/dtype.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

// A bf16 matrix [rows, cols] with `pad` extra values at the end of each row (row_bytes past the
// row), random normal values rounded to bf16.
struct Bf16Matrix {
  std::vector<uint16_t> values;
  WeightMatrix w;
};

Bf16Matrix MakeMatrix(int64_t rows, int64_t cols, int64_t pad, uint32_t seed) {
  Bf16Matrix m;
  for (float v : parity_test::Random(rows * (cols + pad), seed, 0.05f)) {
    m.values.push_back(F32ToBF16(v));
  }
  m.w.format = TensorFormat::Of(FormatKind::kBF16);
  m.w.data = m.values.data();
  m.w.rows = rows;
  m.w.cols = cols;
  m.w.row_bytes = (cols + pad) * 2;
  return m;
}

std::vector<float> Activations(int64_t m, int64_t cols, uint32_t seed) {
  return parity_test::Random(m * cols, seed);
}

class OneDnnBf16MatMulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnBf16MatMul::Supported()) {
      GTEST_SKIP() << "oneDNN finds no AVX-512 BF16 on this CPU: the bf16 matmul is not used";
    }
  }
  ThreadPool pool_{2};
};

// Each output against the exact sum of the same products in double: bf16(x) * w, both exact
// in f32, so only oneDNN's f32 summation separates them: at most k roundings of the running
// sum, each within half an ulp of the largest partial sum, bounded by sum |x w|. With one to
// three slices (uneven ones included): each slice's rows land in their own outputs.
TEST_F(OneDnnBf16MatMulTest, GivesTheBf16ProductsSummedInF32) {
  for (const auto& [rows, cols, pad, slices] :
       {std::tuple<int64_t, int64_t, int64_t, int>{77, 96, 0, 2},
        {576, 1536, 0, 2},
        {130, 62, 3, 3},
        {100, 64, 0, 1},
        {1, 32, 0, 2}}) {
    const Bf16Matrix w = MakeMatrix(rows, cols, pad, 7);
    absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> packed = OneDnnBf16MatMul::Pack(w.w, slices);
    ASSERT_TRUE(packed.ok()) << packed.status();
    EXPECT_GE((*packed)->packed_bytes(), rows * cols * 2);
    EXPECT_EQ((*packed)->implementation(), "brg:avx512_core_bf16");
    const int64_t m = 5;
    const std::vector<float> x = Activations(m, cols, 11);
    std::vector<float> y(m * rows, std::nanf(""));
    ASSERT_TRUE((*packed)->Run(x.data(), m, y.data(), &pool_).ok());
    for (int64_t t = 0; t < m; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0.0, magnitude = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const double p = static_cast<double>(BF16ToF32(F32ToBF16(x[t * cols + c]))) *
                           BF16ToF32(w.values[r * (cols + pad) + c]);
          exact += p;
          magnitude += std::fabs(p);
        }
        const double bound = cols * magnitude * std::ldexp(1.0, -24);
        ASSERT_NEAR(y[t * rows + r], exact, bound)
            << rows << "x" << cols << " row " << t << " output " << r;
      }
    }
  }
}

// Batch invariance, which the engine promises: a row's floats alone and among any number of
// other rows are the same bits, for every m up to a prefill chunk's size.
// Measured over k = 576 .. 4096 and m up to a 512-token prefill chunk.
TEST_F(OneDnnBf16MatMulTest, ARowGetsTheSameFloatsAloneOrAmongOthers) {
  for (int64_t cols : {576, 1536, 4096}) {
    const int64_t rows = 200;
    const Bf16Matrix w = MakeMatrix(rows, cols, 0, 3);
    absl::StatusOr<std::unique_ptr<OneDnnBf16MatMul>> packed = OneDnnBf16MatMul::Pack(w.w, 2);
    ASSERT_TRUE(packed.ok()) << packed.status();
    // Rows alone run in our loop, rows together in oneDNN: the two must agree.
    EXPECT_TRUE((*packed)->own_row_kernel()) << "k = " << cols;
    const int64_t max_m = 512;
    const std::vector<float> x = Activations(max_m, cols, 5);
    std::vector<float> alone(max_m * rows);
    for (int64_t t = 0; t < max_m; ++t) {
      ASSERT_TRUE((*packed)->Run(&x[t * cols], 1, &alone[t * rows], &pool_).ok());
    }
    for (int64_t m : {2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 33, 64, 70, 128, 300, 512}) {
      std::vector<float> together(m * rows);
      ASSERT_TRUE((*packed)->Run(x.data(), m, together.data(), &pool_).ok());
      int64_t differing = 0;  // outputs whose bits differ from the row's alone
      for (int64_t i = 0; i < m * rows; ++i) {
        differing += std::bit_cast<uint32_t>(together[i]) != std::bit_cast<uint32_t>(alone[i]);
      }
      EXPECT_EQ(differing, 0) << "k = " << cols << ", m = " << m;
    }
  }
}

// The slices are only the pool's split of the work: one slice or four give every output the
// same bits (as each thread count does), on SmolLM2's shapes and uneven ones.
TEST_F(OneDnnBf16MatMulTest, TheSliceCountDoesNotChangeAnOutput) {
  for (int64_t rows : {150, 576, 1536}) {
    for (int64_t cols : {256, 576, 1536}) {
      const int64_t m = 6;
      const Bf16Matrix w = MakeMatrix(rows, cols, 0, 9);
      const std::vector<float> x = Activations(m, cols, 13);
      auto one = OneDnnBf16MatMul::Pack(w.w, 1);
      auto four = OneDnnBf16MatMul::Pack(w.w, 4);
      ASSERT_TRUE(one.ok() && four.ok());
      std::vector<float> y1(m * rows), y4(m * rows);
      ASSERT_TRUE((*one)->Run(x.data(), m, y1.data(), &pool_).ok());
      ASSERT_TRUE((*four)->Run(x.data(), m, y4.data(), &pool_).ok());
      EXPECT_EQ(std::memcmp(y1.data(), y4.data(), y1.size() * sizeof(float)), 0)
          << rows << " x " << cols;
    }
  }
}

TEST(OneDnnBf16MatMulPackTest, RefusesWhatItCannotMultiply) {
  Bf16Matrix w = MakeMatrix(4, 32, 0, 1);
  WeightMatrix f16 = w.w;
  f16.format = TensorFormat::Of(FormatKind::kF16);
  EXPECT_EQ(OneDnnBf16MatMul::Pack(f16, 1).status().message(),
            "oneDNN bf16 matmul: the weights are not bf16");
  WeightMatrix short_rows = w.w;
  short_rows.row_bytes = 62;
  EXPECT_EQ(OneDnnBf16MatMul::Pack(short_rows, 1).status().message(),
            "oneDNN bf16 matmul: row_bytes 62 does not hold 32 bf16 values");
  EXPECT_EQ(OneDnnBf16MatMul::Pack(w.w, 0).status().message(),
            "oneDNN bf16 matmul: num_slices 0, needs at least 1");
  WeightMatrix empty = w.w;
  empty.rows = 0;
  EXPECT_EQ(OneDnnBf16MatMul::Pack(empty, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tpserve
