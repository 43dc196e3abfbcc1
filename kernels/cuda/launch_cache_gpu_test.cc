// On a GPU (skips elsewhere): a second launch of the same shapes, on the same buffers, builds no
// CUTLASS kernel parameters (no initialize, can_implement or get_workspace_size) and asks the
// device nothing (no cudaDeviceGetAttribute, cudaFuncSetAttribute or occupancy query), and
// gives the first launch's bits: the mixed-input GEMM (RunMixedGemm, split-K and not) and a
// step of FlashInfer attention through the CUDA backend. launch_cache_test checks the caching
// logic on the host; this checks that the real launches go through it.
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/launch_cache.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/cuda/mixed_gemm/prepare.h"
#include "kernels/cuda/mixed_gemm/test_device_buffer.h"
#include "kernels/cuda/mixed_gemm/test_weights.h"
#include "kernels/quantize.h"

namespace tpserve::cuda {
namespace {

#define SKIP_WITHOUT_DEVICE()                                                  \
  do {                                                                         \
    const absl::StatusOr<int> devices = CudaDeviceCount();                     \
    if (!devices.ok() || *devices == 0) GTEST_SKIP() << "no CUDA device";      \
  } while (0)

using Dev = TestDeviceBuffer;

std::vector<uint16_t> RandomBf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = F32ToBF16(dist(rng));
  return v;
}

struct QueryAndBuildCounts {
  DeviceQueryCounts queries;
  LaunchCacheCounts builds;
};

QueryAndBuildCounts Now() { return {ProcessDeviceQueries().counts(), ProcessLaunchCacheCounts()}; }

void ExpectNothingNew(const QueryAndBuildCounts& before, const QueryAndBuildCounts& after) {
  EXPECT_EQ(after.builds.builds, before.builds.builds) << "CUTLASS set-up built again";
  EXPECT_EQ(after.queries.device_queries, before.queries.device_queries);
  EXPECT_EQ(after.queries.attribute_sets, before.queries.attribute_sets);
  EXPECT_EQ(after.queries.occupancy_queries, before.queries.occupancy_queries);
}

TEST(LaunchCacheGpu, ASecondMixedGemmOfTheSameCallBuildsAndAsksNothing) {
  SKIP_WITHOUT_DEVICE();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const int64_t n = 256, k = 1024;
  const HostMatrix host = MakeInt4Weight(Int4Style::kAwq, n, k, 128, 21, 0.01);
  const PreparedInt4 p = PrepareInt4(host.matrix);
  const Dev codes(p.codes.data(), p.codes.size());
  const Dev scales(p.scales.data(), p.scales.size() * 4);
  const Dev offsets(p.offsets.data(), p.offsets.size() * 4);
  MixedGemmWeight w = p.View();
  w.codes = codes.get();
  w.scales = static_cast<const float*>(scales.get());
  w.offsets = static_cast<const float*>(offsets.get());
  for (int64_t m : {1, 16, 64, 512}) {  // decode and large tiles; split-K where planned
    SCOPED_TRACE(m);
    const MixedGemmPlan plan = PlanMixedGemm(TensorFormat::Int4(128), m, n, k, sms);
    const int64_t ws = MixedGemmWorkspaceBytes(plan, m, n, k, 1, false, sms);
    const std::vector<uint16_t> x = RandomBf16(m * k, 7 + static_cast<uint32_t>(m));
    const Dev dx(x.data(), x.size() * 2), y(m * n * 2), workspace(ws);
    const MixedGemmCall call{dx.get(), k, m, 1, y.get(), false, workspace.get(), ws, sms};
    ASSERT_EQ(RunMixedGemm(w, call, plan, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint8_t> first = y.Read<uint8_t>(m * n * 2);
    const QueryAndBuildCounts before = Now();
    ASSERT_EQ(cudaMemset(y.get(), 0xff, m * n * 2), cudaSuccess);
    ASSERT_EQ(MixedGemmWorkspaceBytes(plan, m, n, k, 1, false, sms), ws);
    ASSERT_EQ(RunMixedGemm(w, call, plan, nullptr), 0);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectNothingNew(before, Now());
    EXPECT_GT(Now().builds.hits, before.builds.hits);
    EXPECT_EQ(y.Read<uint8_t>(m * n * 2), first) << "splits " << plan.splits;
  }
}

// Two steps of FlashInfer attention (a decode row and a prompt chunk) through the CUDA backend:
// the second step's plan and launches ask the device nothing and set no kernel attribute.
TEST(LaunchCacheGpu, ASecondAttentionStepAsksTheDeviceNothing) {
  SKIP_WITHOUT_DEVICE();
  absl::StatusOr<std::unique_ptr<Backend>> made = CreateCudaBackend(0, {});
  ASSERT_TRUE(made.ok()) << made.status();
  Backend& be = **made;
  constexpr int64_t kHeads = 8, kKvHeads = 2, kBlock = 16, hd = 128, blocks = 40;
  const std::vector<uint16_t> pool_k = RandomBf16(blocks * kBlock * kKvHeads * hd, 1);
  const std::vector<uint16_t> pool_v = RandomBf16(pool_k.size(), 2);
  absl::StatusOr<DeviceBuffer> dk = Upload(be, pool_k.data(), pool_k.size() * 2, "k pool");
  absl::StatusOr<DeviceBuffer> dv = Upload(be, pool_v.data(), pool_v.size() * 2, "v pool");
  ASSERT_TRUE(dk.ok() && dv.ok());
  const KvPoolView pool{dk->data(), dv->data(), DType::kBF16, 1.0f, 1.0f, blocks, kBlock,
                        kKvHeads, hd};
  std::vector<int32_t> table0(20), table1(20);
  for (int i = 0; i < 20; ++i) {
    table0[i] = i;
    table1[i] = 20 + i;
  }
  const int64_t rows = 1 + 24;
  const std::vector<uint16_t> q = RandomBf16(rows * kHeads * hd, 3);
  absl::StatusOr<DeviceBuffer> dq = Upload(be, q.data(), q.size() * 2, "q");
  absl::StatusOr<DeviceBuffer> out = be.Allocate(q.size() * 2, "out");
  ASSERT_TRUE(dq.ok() && out.ok());
  const AttentionSequence seqs[2] = {{0, 1, 299, table0}, {1, 24, 40, table1}};
  const auto step = [&] {
    be.BeginStep(StepInputs{{}, {}, seqs, {}});
    for (int layer = 0; layer < 4; ++layer) {
      be.PagedAttention(dq->data(), kHeads, {0.1f, 0, 0.0f}, pool, out->data());
    }
    ASSERT_TRUE(be.Synchronize().ok());
  };
  step();
  const std::vector<uint8_t> first = [&] {
    std::vector<uint8_t> v(q.size() * 2);
    EXPECT_TRUE(be.CopyToHost(v.data(), out->data(), v.size()).ok());
    return v;
  }();
  const QueryAndBuildCounts before = Now();
  step();
  ExpectNothingNew(before, Now());
  std::vector<uint8_t> second(q.size() * 2);
  ASSERT_TRUE(be.CopyToHost(second.data(), out->data(), second.size()).ok());
  EXPECT_EQ(second, first);
}

}  // namespace
}  // namespace tpserve::cuda
