// FlashInfer's own FA2 scheduler (run on the host, no GPU) over random batches within the
// limits never asks for more workspace than AttentionWorkspaceFor reserves.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/flashinfer/plan_check.h"

namespace tpserve::cuda {
namespace {

struct Shape {
  int32_t heads, kv_heads, head_dim;
};

TEST(AttentionWorkspaceFlashInfer, SchedulerStaysWithinTheBound) {
  std::mt19937 rng(7);
  int split_batches = 0;
  for (const Shape& shape : {Shape{16, 1, 128}, Shape{32, 8, 128}, Shape{9, 3, 64}}) {
    AttentionLimits l;
    l.num_qo_heads = shape.heads;
    l.num_kv_heads = shape.kv_heads;
    l.head_dim = shape.head_dim;
    l.max_step_tokens = 512;
    l.max_decode_rows = 64;
    l.max_context = 4096;
    l.num_sms = 132;
    const AttentionWorkspace bound = AttentionWorkspaceFor(l);
    const int32_t split_batch = 2 * l.num_sms / shape.kv_heads;
    for (int trial = 0; trial < 300; ++trial) {
      // A recorded decode batch, or a step of decodes and prompt chunks within the limits.
      const bool graph = trial % 3 == 0;
      std::vector<int32_t> qo, kv;
      int32_t rows = 0;
      const int32_t requests = 1 + static_cast<int32_t>(rng() % l.max_decode_rows);
      for (int32_t r = 0; r < requests && rows < l.max_step_tokens; ++r) {
        const int32_t q =
            graph ? 1 : std::min<int32_t>(l.max_step_tokens - rows, 1 + rng() % (r == 0 ? 512 : 8));
        const int32_t k = q + static_cast<int32_t>(rng() % (l.max_context - q + 1));
        qo.push_back(q);
        kv.push_back(k);
        rows += q;
      }
      const fi::Fa2PlanBytes got = fi::FlashInferFa2PlanBytes(
          qo, kv, shape.heads, shape.kv_heads, shape.head_dim, 16, split_batch, graph);
      split_batches += got.split_kv;
      ASSERT_LE(got.float_bytes, bound.float_bytes) << "trial " << trial;
      ASSERT_LE(got.int_bytes, bound.int_bytes) << "trial " << trial;
    }
  }
  EXPECT_GT(split_batches, 50);  // the bound was tested where it matters: split keys
}

// The deterministic plan (--deterministic_tp): one request per query row with a fixed key
// chunk. FlashInfer's scheduler must give a row the same query tile, the same chunk size and the
// same number of chunks whatever else is in the batch and at every tensor-parallel degree (heads
// per rank change, the group size does not), and stay within the workspace.
TEST(AttentionWorkspaceFlashInfer, DeterministicPlanDependsOnTheRowAlone) {
  std::mt19937 rng(11);
  constexpr int32_t kPage = 16, kContext = 32768;
  const int64_t chunk = DeterministicChunkTokens(kContext, kPage);
  ASSERT_EQ(chunk % kPage, 0);
  const int32_t split_pages = static_cast<int32_t>(chunk / kPage);
  for (const Shape& model : {Shape{128, 8, 128}, Shape{32, 8, 128}, Shape{9, 3, 64}}) {
    int64_t tile = -1;
    for (int tp : {1, 2, 4, 8}) {
      if (model.kv_heads % tp != 0) continue;
      AttentionLimits l;
      l.num_qo_heads = model.heads / tp;
      l.num_kv_heads = model.kv_heads / tp;
      l.head_dim = model.head_dim;
      l.max_step_tokens = 256;
      l.max_decode_rows = 64;
      l.max_context = kContext;
      l.num_sms = 132;
      l.deterministic = true;
      const AttentionWorkspace bound = AttentionWorkspaceFor(l);
      for (int32_t batch = 1; batch <= 64; batch += 9) {
        // The row under test (3,000 keys) among `batch - 1` other rows of random lengths.
        std::vector<int32_t> qo(batch, 1), kv(batch);
        for (int32_t& k : kv) k = 1 + static_cast<int32_t>(rng() % kContext);
        const int32_t at = static_cast<int32_t>(rng() % batch);
        kv[at] = 3000;
        const fi::Fa2PlanBytes got = fi::FlashInferFa2PlanBytes(
            qo, kv, l.num_qo_heads, l.num_kv_heads, model.head_dim, kPage,
            2 * l.num_sms / l.num_kv_heads, /*cuda_graph=*/false, split_pages);
        if (tile < 0) tile = got.cta_tile_q;
        EXPECT_EQ(got.cta_tile_q, tile) << "tp " << tp << " batch " << batch;
        EXPECT_EQ(got.kv_chunk_tokens, chunk);
        EXPECT_EQ(got.chunks[at], (3000 + chunk - 1) / chunk);
        ASSERT_LE(got.float_bytes, bound.float_bytes) << "tp " << tp << " batch " << batch;
        ASSERT_LE(got.int_bytes, bound.int_bytes) << "tp " << tp << " batch " << batch;
      }
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda
