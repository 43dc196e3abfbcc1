// Under AddressSanitizer, Avx2CpuKernels() checks each call's ranges before the (uninstrumented)
// AVX2 kernel runs (kernels_bounds.cc): a short, freed or misplaced buffer aborts naming the kernel
// and the argument. Without ASan there is nothing to check and the tests skip.
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tpserve {
namespace {

class KernelBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Avx2KernelBoundsChecked()) {
      GTEST_SKIP() << "the bounds are checked only in an AddressSanitizer build (--config=asan)";
    }
    if (!CpuSupportsIsa(CpuIsa::kAvx2)) GTEST_SKIP() << "AVX2 not supported on this CPU";
  }
  const CpuKernels& k_ = Avx2CpuKernels();
};

TEST_F(KernelBoundsTest, ExactBuffersPass) {
  std::vector<uint8_t> w(2 * 20, 0);  // two Q4_1 blocks
  std::vector<Q8Block> x(2, Q8Block{});
  const Q8Block* rows[] = {x.data()};
  float out = -1.0f;
  k_.dot_q4_1(w.data(), rows, 1, 2, &out);
  EXPECT_EQ(out, 0.0f);
}

TEST_F(KernelBoundsTest, AWeightRowOneByteShortAbortsNamingTheKernelAndArgument) {
  std::vector<uint8_t> w(2 * 20 - 1, 0);
  std::vector<Q8Block> x(2, Q8Block{});
  const Q8Block* rows[] = {x.data()};
  float out;
  EXPECT_DEATH(k_.dot_q4_1(w.data(), rows, 1, 2, &out),
               "CPU kernel dot_q4_1: argument w spans 40 bytes from 0x[0-9a-f]+, but byte 39 "
               "of them is not addressable.*0 bytes (to the right of|after) 39-byte region");
}

TEST_F(KernelBoundsTest, ARowGroupOneByteShortAbortsNamingTheKernelAndArgument) {
  // Two rows 48 bytes apart, each two Q4_1 blocks: the second ends at byte 88.
  std::vector<uint8_t> w(48 + 2 * 20 - 1, 0);
  std::vector<Q8Block> x(2, Q8Block{});
  const Q8Block* rows[] = {x.data()};
  std::vector<float> out(kWeightRowGroup);
  EXPECT_DEATH(k_.dot_q4_1_rows(w.data(), 48, 20, 2, rows, 1, 2, out.data()),
               "CPU kernel dot_q4_1_rows: argument w spans 88 bytes from 0x[0-9a-f]+, but byte 87 "
               "of them is not addressable.*0 bytes (to the right of|after) 87-byte region");
  // Interleaved (cpu_matmul.h): block b of row i at (b * 8 + i) * 20, so row 1's second block
  // ends at byte 20 + 160 + 20 = 200.
  std::vector<uint8_t> interleaved(199, 0);
  EXPECT_DEATH(k_.dot_q4_1_rows(interleaved.data(), 20, 160, 2, rows, 1, 2, out.data()),
               "CPU kernel dot_q4_1_rows: argument w spans 200 bytes from 0x[0-9a-f]+, but byte "
               "199 of them is not addressable");
}

TEST_F(KernelBoundsTest, AFreedActivationRowAborts) {
  std::vector<uint8_t> w(18, 0);  // one Q4_0 block
  auto* x = new Q8Block[1]{};
  delete[] x;
  const Q8Block* rows[] = {x};
  float out;
  EXPECT_DEATH(k_.dot_q4_0(w.data(), rows, 1, 1, &out),
               "CPU kernel dot_q4_0: argument x spans 44 bytes.*freed by thread");
}

TEST_F(KernelBoundsTest, ACacheRowPastItsBlockAborts) {
  // Three rows of 8 at stride 16 need 2 * 16 + 8 = 40 floats; the block holds 39.
  std::vector<float> cache(39, 0.0f), q(8, 1.0f), scores(3);
  const float* heads[] = {q.data()};
  EXPECT_DEATH(k_.attn_scores(heads, 1, cache.data(), 16, 3, 8, 1.0f, scores.data(), 3),
               "CPU kernel attn_scores: argument k spans 32 bytes");
}

TEST_F(KernelBoundsTest, AnOutputTooShortForItsHeadsAborts) {
  std::vector<float> v(4 * 8, 0.0f), p(4, 0.25f), out0(8), out1(7);
  const float* probs[] = {p.data(), p.data()};
  float* outs[] = {out0.data(), out1.data()};
  EXPECT_DEATH(k_.attn_accumulate(probs, 2, v.data(), 8, 4, 8, outs),
               "CPU kernel attn_accumulate: argument out spans 32 bytes");
}

}  // namespace
}  // namespace tpserve
