// FlashInfer's own FA2 scheduler, run on the host as it plans on an H100 (plan_check.h: the
// device it queries is faked, fake_device.h; the KV element size is the case's KV dtype's):
// over random batches within the limits it never asks for more workspace than
// AttentionWorkspaceFor reserves; and the two things the device and the KV dtype decide, the
// query tile and with it the split partials, are the ones the H100 gets.
//
// On the old plan check (no fake device, kv_dtype_bytes hard-coded to 2) three tests here fail
// (checked by putting both back):
// - H100PlansDecodeIn16RowTilesWhereADevicelessHostSaid64: the host without a GPU answered
//   compute capability 0, so FA2DetermineCtaTileQ took its pre-Ampere branch and planned
//   packed decode rows in 64-row tiles (cta_tile_q 64, 67 CTAs, 17.7 MB of partials for the
//   batch there) where an H100 uses 16-row tiles (79 CTAs, 5.2 MB);
// - KvDtypeDoesNotChangeAnH100Plan, at its decode tile (<= 16), for the same reason;
// - TheKvDtypeReachesFlashInfersTileChoice: an e4m3 cache was planned as 2-byte KV, so its
//   16-row tile's shared memory was counted twice over (64-row tile where e4m3 fits 16).
// KvDtypeDoesNotChangeAnH100Plan also shows why the 2 bytes never changed a plan we make: on an
// H100 the 16-row tile fits for either KV size at our head dims, so an e4m3 plan is the bf16 one.
#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/flashinfer/plan_check.h"

namespace tpserve::cuda {
namespace {

struct Shape {
  int32_t heads, kv_heads, head_dim;
};

fi::Fa2PlanCase CaseFor(const AttentionLimits& l, std::vector<int32_t> qo,
                        std::vector<int32_t> kv, bool graph) {
  fi::Fa2PlanCase c;
  c.qo_lens = std::move(qo);
  c.kv_lens = std::move(kv);
  c.num_qo_heads = static_cast<int32_t>(l.num_qo_heads);
  c.num_kv_heads = static_cast<int32_t>(l.num_kv_heads);
  c.head_dim = static_cast<int32_t>(l.head_dim);
  c.page_size = static_cast<int32_t>(l.page_size);
  c.kv_dtype = l.kv_dtype;
  c.max_batch_size_if_split = static_cast<int32_t>(2 * l.num_sms / l.num_kv_heads);
  c.cuda_graph = graph;
  return c;
}

AttentionLimits Limits(const Shape& shape, DType kv_dtype) {
  AttentionLimits l;
  l.num_qo_heads = shape.heads;
  l.num_kv_heads = shape.kv_heads;
  l.head_dim = shape.head_dim;
  l.kv_dtype = kv_dtype;
  l.max_tokens_per_step = 512;
  l.max_decode_rows = 64;
  l.max_context = 4096;
  l.num_sms = fi::kFakeH100.multiprocessors;
  return l;
}

// FlashInfer's tmp_v (head_dim f32 per head and partial row) and tmp_s (one f32 per head and
// partial row), each 16-byte aligned.
int64_t PartialBytes(int64_t heads, int64_t partial_rows, int64_t head_dim) {
  return heads * partial_rows * head_dim * 4 + heads * partial_rows * 4;
}

TEST(AttentionWorkspaceFlashInfer, SchedulerStaysWithinTheBound) {
  std::mt19937 rng(7);
  int split_batches = 0;
  for (DType kv_dtype : {DType::kBF16, DType::kF8E4M3, DType::kF16}) {
    for (const Shape& shape : {Shape{16, 1, 128}, Shape{32, 8, 128}, Shape{9, 3, 64}}) {
      const AttentionLimits l = Limits(shape, kv_dtype);
      const AttentionWorkspace bound = AttentionWorkspaceFor(l);
      for (int trial = 0; trial < 300; ++trial) {
        // A recorded decode batch, or a step of decodes and prompt chunks within the limits.
        const bool graph = trial % 3 == 0;
        std::vector<int32_t> qo, kv;
        int32_t rows = 0;
        const int32_t requests = 1 + static_cast<int32_t>(rng() % l.max_decode_rows);
        for (int32_t r = 0; r < requests && rows < l.max_tokens_per_step; ++r) {
          const int32_t q = graph ? 1
                                  : std::min<int32_t>(l.max_tokens_per_step - rows,
                                                      1 + rng() % (r == 0 ? 512 : 8));
          const int32_t k = q + static_cast<int32_t>(rng() % (l.max_context - q + 1));
          qo.push_back(q);
          kv.push_back(k);
          rows += q;
        }
        const fi::Fa2PlanBytes got = fi::FlashInferFa2PlanBytes(CaseFor(l, qo, kv, graph));
        split_batches += got.split_kv;
        ASSERT_LE(got.float_bytes, bound.float_bytes) << "trial " << trial;
        ASSERT_LE(got.int_bytes, bound.int_bytes) << "trial " << trial;
      }
    }
  }
  EXPECT_GT(split_batches, 150);  // the bound was tested where it matters: split keys
}

// A recorded decode batch of 64 rows, 32 query heads over 8 KV heads (4 packed rows each):
// FlashInfer sizes the graph's tiles for packed length 4. On an H100 (compute capability 9.0,
// and the 16-row tile's 36,864 bytes of shared memory well within 227 KiB) that is a 16-row
// tile; a device-less host reads compute capability 0 and gets 64.
TEST(AttentionWorkspaceFlashInfer, H100PlansDecodeIn16RowTilesWhereADevicelessHostSaid64) {
  const AttentionLimits l = Limits(Shape{32, 8, 128}, DType::kBF16);
  const fi::Fa2PlanCase decode = CaseFor(l, std::vector<int32_t>(64, 1),
                                         std::vector<int32_t>(64, 4096), /*graph=*/true);
  const fi::Fa2PlanBytes h100 = fi::FlashInferFa2PlanBytes(decode, fi::kFakeH100);
  EXPECT_EQ(h100.cta_tile_q, 16);
  // Query tiles: ceil(64 * 4 / 16) + 64 - 1 = 79 (over the split budget of 2 * 132 / 8 = 33);
  // partial rows ceil(79 * 16 / 4) = 316.
  EXPECT_TRUE(h100.split_kv);
  EXPECT_EQ(h100.padded_batch_size, 79);
  EXPECT_EQ(h100.float_bytes, PartialBytes(32, 316, 128));  // 5,217,792

  fi::FakeDevice no_device = fi::kFakeH100;
  no_device.compute_capability_major = 0;
  no_device.compute_capability_minor = 0;
  const fi::Fa2PlanBytes host = fi::FlashInferFa2PlanBytes(decode, no_device);
  EXPECT_EQ(host.cta_tile_q, 64);
  // ceil(256 / 64) + 63 = 67 tiles, ceil(67 * 64 / 4) = 1,072 partial rows.
  EXPECT_EQ(host.padded_batch_size, 67);
  EXPECT_EQ(host.float_bytes, PartialBytes(32, 1072, 128));  // 17,700,864

  // Our workspace covers the H100's plan (and, conservatively, the 64-row one too).
  const AttentionWorkspace bound = AttentionWorkspaceFor(l);
  EXPECT_LE(h100.float_bytes, bound.float_bytes);
  EXPECT_LE(h100.int_bytes, bound.int_bytes);
  EXPECT_LE(host.float_bytes, bound.float_bytes);
}

// FlashInfer picks the 16-row tile only where one 16-row step of K and V fits the opt-in shared
// memory per block: 16 * 128 * 2 bytes of q plus (128 + 128) * 16 * 4 * kv bytes, 36,864 for
// bf16 and 20,480 for e4m3 at head_dim 128. On a device with 30,000 bytes (none we serve; it
// shows that the case's KV size reaches FlashInfer) e4m3 gets the 16-row tile and bf16 64.
TEST(AttentionWorkspaceFlashInfer, TheKvDtypeReachesFlashInfersTileChoice) {
  fi::FakeDevice small = fi::kFakeH100;
  small.max_shared_memory_per_block_optin = 30000;
  const std::vector<int32_t> qo(8, 1), kv(8, 2000);
  const fi::Fa2PlanBytes bf16 = fi::FlashInferFa2PlanBytes(
      CaseFor(Limits(Shape{32, 8, 128}, DType::kBF16), qo, kv, /*graph=*/true), small);
  const fi::Fa2PlanBytes fp8 = fi::FlashInferFa2PlanBytes(
      CaseFor(Limits(Shape{32, 8, 128}, DType::kF8E4M3), qo, kv, /*graph=*/true), small);
  EXPECT_EQ(bf16.cta_tile_q, 64);
  EXPECT_EQ(fp8.cta_tile_q, 16);
  EXPECT_NE(fp8.float_bytes, bf16.float_bytes);
  EXPECT_EQ(fi::KvElementBytes(DType::kF8E4M3), 1);
  EXPECT_EQ(fi::KvElementBytes(DType::kBF16), 2);
  EXPECT_EQ(fi::KvElementBytes(DType::kF16), 2);
}

// On an H100 the KV dtype never changes FlashInfer's FA2 plan for the head dims we serve: its
// only use in planning is the shared-memory test above, which both sizes pass (at most 36,864
// of 232,448 bytes). So an e4m3 step is planned exactly as a bf16 one: same tiles, splits and
// bytes, for every packed length at or below 16 (the only ones the test applies to) and for
// random mixed steps.
TEST(AttentionWorkspaceFlashInfer, KvDtypeDoesNotChangeAnH100Plan) {
  std::mt19937 rng(5);
  for (const Shape& shape : {Shape{16, 16, 128}, Shape{32, 8, 128}, Shape{8, 8, 64},
                             Shape{32, 2, 64}}) {
    const AttentionLimits bf16 = Limits(shape, DType::kBF16);
    const AttentionLimits fp8 = Limits(shape, DType::kF8E4M3);
    for (int trial = 0; trial < 100; ++trial) {
      const bool graph = trial % 2 == 0;
      std::vector<int32_t> qo, kv;
      const int32_t requests = 1 + static_cast<int32_t>(rng() % 64);
      for (int32_t r = 0; r < requests; ++r) {
        qo.push_back(trial < 50 ? 1 : 1 + static_cast<int32_t>(rng() % 40));
        kv.push_back(qo.back() + static_cast<int32_t>(rng() % 8000));
      }
      const fi::Fa2PlanBytes a = fi::FlashInferFa2PlanBytes(CaseFor(bf16, qo, kv, graph));
      const fi::Fa2PlanBytes b = fi::FlashInferFa2PlanBytes(CaseFor(fp8, qo, kv, graph));
      ASSERT_EQ(a.cta_tile_q, b.cta_tile_q) << "trial " << trial;
      if (trial < 50) {
        ASSERT_LE(a.cta_tile_q, 16) << "decode: the 16-row tile fits both";
      }
      ASSERT_EQ(a.padded_batch_size, b.padded_batch_size);
      ASSERT_EQ(a.kv_chunk_tokens, b.kv_chunk_tokens);
      ASSERT_EQ(a.chunks, b.chunks);
      ASSERT_EQ(a.float_bytes, b.float_bytes);
      ASSERT_EQ(a.int_bytes, b.int_bytes);
    }
  }
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
      AttentionLimits l = Limits(Shape{model.heads / tp, model.kv_heads / tp, model.head_dim},
                                 DType::kBF16);
      l.max_tokens_per_step = 256;
      l.max_context = kContext;
      l.deterministic = true;
      const AttentionWorkspace bound = AttentionWorkspaceFor(l);
      for (int32_t batch = 1; batch <= 64; batch += 9) {
        // The row under test (3,000 keys) among `batch - 1` other rows of random lengths.
        std::vector<int32_t> qo(batch, 1), kv(batch);
        for (int32_t& k : kv) k = 1 + static_cast<int32_t>(rng() % kContext);
        const int32_t at = static_cast<int32_t>(rng() % batch);
        kv[at] = 3000;
        fi::Fa2PlanCase c = CaseFor(l, qo, kv, /*graph=*/false);
        c.fixed_split_pages = split_pages;
        const fi::Fa2PlanBytes got = fi::FlashInferFa2PlanBytes(c);
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
