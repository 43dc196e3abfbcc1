// FlashInfer's MLAPlan (host code) over random batches on a faked device
// (fake_device.h: compute capability 9.0 with 132, 114 or 78 SMs), against
// mla_plan.h: the workspace MlaWorkspaceFor sizes is enough (MLAPlan throws
// when it is not), the work items stay within MlaWorkBound, the cluster is
// MlaClusterSize, and every query tile's key pieces cover, from key 0 on, every
// key its rows see, in the request's own pages.
#include <algorithm>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cuda/attention_workspace.h"
#include "kernels/cuda/flashinfer/mla_plan_check.h"
#include "kernels/cuda/mla_plan.h"
#include "gtest/gtest.h"

namespace tpserve::cuda {
namespace {

struct Batch {
  std::vector<int32_t> qo_indptr = {0}, kv_indptr = {0}, kv_len;
};

// n requests: decodes (one row), prompt chunks (several rows after a cached
// prefix) and padding-like rows of one key, each with a table of whole pages.
Batch RandomBatch(std::mt19937 &rng, int32_t n, int32_t page, int32_t max_rows) {
  Batch b;
  for (int32_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(rng() % 3);
    const int32_t rows = kind == 1 ? 1 + static_cast<int32_t>(rng() % max_rows) : 1;
    const int32_t cached = kind == 2 ? 0 : static_cast<int32_t>(rng() % 5000);
    const int32_t keys = cached + rows;
    b.qo_indptr.push_back(b.qo_indptr.back() + rows);
    b.kv_len.push_back(keys);
    b.kv_indptr.push_back(b.kv_indptr.back() + (keys + page - 1) / page);
  }
  return b;
}

TEST(MlaPlanFlashInfer, WorkspaceAndWorkBoundsHoldAndTilesSeeEveryKey) {
  std::mt19937 rng(11);
  constexpr int32_t kPage = 16;
  for (int trial = 0; trial < 200; ++trial) {
    // H100 SXM, H100 PCIe, and a device of fewer SMs.
    fi::FakeDevice device = fi::kFakeH100;
    device.multiprocessors = std::vector<int>{132, 114, 78}[trial % 3];
    const int sms = device.multiprocessors;
    const int32_t heads = std::vector<int32_t>{1, 16, 32, 128}[rng() % 4];
    const int32_t n = 1 + static_cast<int32_t>(rng() % 64);
    const Batch b = RandomBatch(rng, n, kPage, 300);
    const MlaWorkspaceBytes ws = MlaWorkspaceFor(sms);
    const fi::MlaPlanWorks w = fi::FlashInferMlaPlan(b.qo_indptr, b.kv_indptr, b.kv_len, heads,
                                                     ws.float_bytes, ws.int_bytes, device);
    ASSERT_EQ(w.status, 0) << w.error;
    EXPECT_LE(w.staged_int_bytes, ws.int_bytes);
    const int64_t cluster = MlaClusterSize(b.qo_indptr.data(), n, heads);
    EXPECT_EQ(w.num_blks_x, cluster);
    EXPECT_EQ(w.num_blks_y, sms / cluster);
    const int64_t works = static_cast<int64_t>(w.q_indptr.size());
    EXPECT_LE(works, MlaWorkBound(b.qo_indptr.data(), n, heads, sms));
    // Each (request, query tile)'s key pieces, by first key.
    std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>> pieces;
    for (int64_t j = 0; j < works; ++j) {
      const auto it = std::find(b.qo_indptr.begin(), b.qo_indptr.end() - 1, w.q_indptr[j]);
      ASSERT_NE(it, b.qo_indptr.end() - 1);
      const int32_t r = static_cast<int32_t>(it - b.qo_indptr.begin());
      EXPECT_EQ(w.kv_indptr[j], b.kv_indptr[r]);  // the request's own pages
      EXPECT_EQ(w.q_len[j], b.qo_indptr[r + 1] - b.qo_indptr[r]);
      EXPECT_EQ(w.kv_len[j], b.kv_len[r]);
      pieces[{r, w.q_start[j]}].push_back({w.kv_start[j], w.kv_end[j]});
    }
    const int32_t tile = static_cast<int32_t>(cluster * kMlaCtaTileQ);
    for (int32_t r = 0; r < n; ++r) {
      const int32_t qo_len = b.qo_indptr[r + 1] - b.qo_indptr[r];
      for (int32_t q_start = 0; q_start < qo_len * heads; q_start += tile) {
        auto &p = pieces[{r, q_start}];
        ASSERT_FALSE(p.empty()) << "request " << r << " tile " << q_start;
        std::sort(p.begin(), p.end());
        int32_t next = 0;
        for (const auto &[start, end] : p) {
          EXPECT_EQ(start, next);
          next = end;
        }
        // The tile's last row (packed rows are row * heads + head) sees keys up
        // to kv_len - qo_len + row.
        const int32_t last_row = std::min(qo_len, (q_start + tile - 1) / heads + 1) - 1;
        EXPECT_GE(next, b.kv_len[r] - qo_len + last_row + 1) << "request " << r;
        EXPECT_LE(next, b.kv_len[r]);
      }
    }
  }
}

TEST(MlaPlanFlashInfer, AttentionWorkspaceIsMlasForALatentPool) {
  Backend::AttentionReservation r;
  r.num_heads = 16;
  r.num_kv_heads = 1;
  r.head_dim = 576;
  r.kv_dtype = DType::kBF16;
  r.block_size_tokens = 16;
  r.max_tokens_per_step = 8192;
  r.max_sequences = 256;
  r.max_context = 163840;
  const AttentionWorkspace w =
      AttentionWorkspaceFor(AttentionLimitsFor(r, 132, 90, /*deterministic=*/false));
  EXPECT_EQ(w.kernels, AttentionKernels::kMla);
  const MlaWorkspaceBytes mla = MlaWorkspaceFor(132);
  EXPECT_EQ(w.DeviceBytes(),
            mla.float_bytes + mla.int_bytes);  // one work-list region
  EXPECT_EQ(w.PinnedHostBytes(), mla.int_bytes);
  // An f16 latent cache, or another GPU: nothing serves it (the backend refuses
  // at load).
  EXPECT_EQ(AttentionKernelsFor(DType::kF16, 576, 90), AttentionKernels::kSimt);
  EXPECT_EQ(AttentionKernelsFor(DType::kBF16, 576, 100), AttentionKernels::kSimt);
  EXPECT_EQ(AttentionKernelsFor(DType::kF8E4M3, 576, 90), AttentionKernels::kMla);
}

}  // namespace
}  // namespace tpserve::cuda
