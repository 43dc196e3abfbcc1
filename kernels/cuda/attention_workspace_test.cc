// The attention workspace bound: which kernels a shape gets, a worked example, and (where the
// CUDA toolkit is, attention_workspace_flashinfer_test.cc) FlashInfer's own scheduler never
// asking for more.
#include "kernels/cuda/attention_workspace.h"

#include "gtest/gtest.h"
#include "kernels/cuda/attention_plan.h"

namespace tpserve::cuda {
namespace {

AttentionLimits Llama405bRank() {  // 128 heads / 8 KV heads over 8 ranks, on an H100
  AttentionLimits l;
  l.num_qo_heads = 16;
  l.num_kv_heads = 1;
  l.head_dim = 128;
  l.kv_dtype = DType::kBF16;
  l.max_tokens_per_step = 2048;
  l.max_decode_rows = 256;
  l.max_context = 8192;
  l.num_sms = 132;
  return l;
}

TEST(AttentionWorkspace, FlashInferServesWhatIsInstantiated) {
  for (DType kv : {DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    EXPECT_EQ(AttentionKernelsFor(kv, 64, 90), AttentionKernels::kFlashInfer);
    EXPECT_EQ(AttentionKernelsFor(kv, 128, 90), AttentionKernels::kFlashInfer);
    EXPECT_EQ(AttentionKernelsFor(kv, 80, 90), AttentionKernels::kSimt);
    EXPECT_EQ(AttentionKernelsFor(kv, 256, 90), AttentionKernels::kSimt);
    EXPECT_EQ(AttentionKernelsFor(kv, 128, 100), AttentionKernels::kSimt);  // no sm_100 SASS
  }
  EXPECT_EQ(AttentionKernelsFor(DType::kF32, 128, 90), AttentionKernels::kSimt);
}

TEST(AttentionWorkspace, WorkedExampleFor405bAtTp8) {
  // Split batch 2 * 132 / 1 = 264 CTAs of up to 128 packed rows: 264 * 128 / 16 = 2112 partial
  // rows. A recorded decode batch of 256 rows of 16 packed heads pads to max(264, 256 + 255) =
  // 511 CTAs of 16 (511 partial rows) or max(264, 64 + 255) = 319 CTAs of 64 (1276 rows). Each
  // row: 16 heads x (128 floats + 1 lse), plus alignment.
  const AttentionWorkspace w = AttentionWorkspaceFor(Llama405bRank());
  EXPECT_EQ(w.kernels, AttentionKernels::kFlashInfer);
  EXPECT_EQ(w.float_bytes, (16 * 2112 * 128 * 4 + 15) + (16 * 2112 * 4 + 15));
  EXPECT_EQ(w.convert_bytes, 0);
  // FA3's lists dominate the ints: 16 heads x (2048 / 128 + 2048) works x 7 arrays.
  EXPECT_EQ(w.int_bytes, 7 * (4 * 16 * (16 + 2048) + 15) + (4 * 133 + 15));
  EXPECT_EQ(w.DeviceBytes(), w.float_bytes + 2 * w.int_bytes);
  EXPECT_LT(w.DeviceBytes(), 32ll << 20);  // not the 1 GiB [heads x tokens x context] scores
}

TEST(AttentionWorkspace, F16KvAddsTheConvertedQueryAndOutput) {
  AttentionLimits l = Llama405bRank();
  l.kv_dtype = DType::kF16;
  EXPECT_EQ(AttentionWorkspaceFor(l).convert_bytes, 2 * 2048 * 16 * 128 * 2);
}

TEST(AttentionWorkspace, SimtShapesReserveTheirSplitScratch) {
  AttentionLimits l = Llama405bRank();
  l.kv_dtype = DType::kF32;
  const AttentionWorkspace w = AttentionWorkspaceFor(l);
  EXPECT_EQ(w.kernels, AttentionKernels::kSimt);
  DeviceKvPool pool;
  pool.num_kv_heads = 1;
  pool.head_dim = 128;
  pool.block_size = 16;
  EXPECT_EQ(w.float_bytes, MaxAttentionScratchBytes(16, pool, 256, 8192, 132));
  l.max_context = 5000;  // a recorded step plans for the 8192 bucket
  EXPECT_EQ(AttentionWorkspaceFor(l).float_bytes, w.float_bytes);
  EXPECT_GT(w.float_bytes, 0);
  EXPECT_EQ(w.int_bytes, 0);
}

TEST(AttentionWorkspace, GrowsWithTheLimits) {
  const AttentionWorkspace base = AttentionWorkspaceFor(Llama405bRank());
  AttentionLimits more_rows = Llama405bRank();
  more_rows.max_decode_rows = 1024;  // recorded batches of 1024: 1279 CTAs of 64, 5116 rows
  EXPECT_GT(AttentionWorkspaceFor(more_rows).float_bytes, base.float_bytes);
  AttentionLimits more_tokens = Llama405bRank();
  more_tokens.max_tokens_per_step = 8192;
  EXPECT_GT(AttentionWorkspaceFor(more_tokens).int_bytes, base.int_bytes);
}

}  // namespace
}  // namespace tpserve::cuda
