// The once-per-shape launch set-up (launch_cache.h), driven on the host with fake set-up
// functions that count their calls: a second step of the same shapes builds no kernel
// parameters and queries nothing; a new shape, pointer or device does. On the old code every
// launch ran CUTLASS's initialize and FlashInfer's per-launch queries: the "second step" counts
// below were equal to the first's.
#include "kernels/cuda/launch_cache.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/mixed_gemm/kernel_args.h"

namespace tpserve::cuda {
namespace {

using mixed_gemm::KernelArgs;
using mixed_gemm::MixedGemmLaunchKey;

// A stand-in for CUTLASS's parameters: what "initialize" built, and from which launch.
struct FakeParams {
  int n = 0, m = 0;
  const void* codes = nullptr;
};

// One step's mixed GEMMs: `layers` layers of seven weights each, m rows, one x and y buffer.
std::vector<KernelArgs> Step(int layers, int m, const std::vector<char>& weights) {
  static char x, y, workspace;
  std::vector<KernelArgs> launches;
  for (int l = 0; l < layers; ++l) {
    for (int w = 0; w < 7; ++w) {
      KernelArgs a;
      a.codes = &weights[l * 7 + w];
      a.n = 4096;
      a.k = 4096;
      a.m = m;
      a.group_size = 128;
      a.x = &x;
      a.y = &y;
      a.workspace = &workspace;
      a.sm_count = 132;
      a.stream = reinterpret_cast<void*>(static_cast<uintptr_t>(l % 2 + 1));  // not in the key
      launches.push_back(a);
    }
  }
  return launches;
}

TEST(LaunchCacheTest, ASecondStepOfTheSameShapesInitializesNothing) {
  const LaunchCacheCounts process_before = ProcessLaunchCacheCounts();
  LaunchCache<FakeParams> cache;
  int initializes = 0;
  const std::vector<char> weights(4 * 7);
  const auto run = [&](const std::vector<KernelArgs>& step) {
    for (const KernelArgs& a : step) {
      FakeParams p;
      ASSERT_EQ(cache.Get(
                    MixedGemmLaunchKey(a),
                    [&](FakeParams* out) {
                      ++initializes;
                      *out = {a.n, a.m, a.codes};
                      return 0;
                    },
                    &p),
                0);
      EXPECT_EQ(p.codes, a.codes);  // the launch's own parameters, never another's
      EXPECT_EQ(p.m, a.m);
    }
  };
  run(Step(4, 8, weights));
  EXPECT_EQ(initializes, 28);  // once per (layer, weight)
  run(Step(4, 8, weights));
  EXPECT_EQ(initializes, 28);  // the second step: nothing new
  EXPECT_EQ(cache.counts().hits, 28);
  run(Step(4, 16, weights));  // another batch size: its own parameters
  EXPECT_EQ(initializes, 56);
  EXPECT_EQ(cache.size(), 56u);
  // The process's counts (what a GPU check reads across every instantiation) saw the same.
  EXPECT_EQ(ProcessLaunchCacheCounts().builds - process_before.builds, 56);
  EXPECT_EQ(ProcessLaunchCacheCounts().hits - process_before.hits, 28);
}

TEST(LaunchCacheTest, ARefusedSetUpIsNotKeptAndAFullCacheStartsOver) {
  LaunchCache<int> cache(/*capacity=*/2);
  LaunchKey a{}, b{}, c{};
  a[0] = 1;
  b[0] = 2;
  c[0] = 3;
  int makes = 0;
  int value = 0;
  const auto refuse = [&](int*) {
    ++makes;
    return 1;  // e.g. cudaErrorInvalidValue: can_implement said no
  };
  const auto make = [&](int* out) {
    ++makes;
    *out = makes;
    return 0;
  };
  EXPECT_EQ(cache.Get(a, refuse, &value), 1);
  EXPECT_EQ(cache.Get(a, make, &value), 0);  // tried again, not answered from a failure
  EXPECT_EQ(makes, 2);
  EXPECT_EQ(cache.Get(b, make, &value), 0);
  EXPECT_EQ(cache.Get(c, make, &value), 0);  // past the capacity: a and b dropped
  EXPECT_EQ(cache.counts().dropped, 2);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.Get(c, make, &value), 0);
  EXPECT_EQ(value, 4);
  EXPECT_EQ(makes, 4);
}

TEST(LaunchCacheTest, TheKeyHoldsEveryArgumentButTheStream) {
  static char other;
  static float other_scale;
  const KernelArgs a;
  KernelArgs b = a;
  b.stream = &other;
  EXPECT_EQ(MixedGemmLaunchKey(a), MixedGemmLaunchKey(b));
  const std::vector<void (*)(KernelArgs&)> changes = {
      [](KernelArgs& k) { k.codes = &other; },        [](KernelArgs& k) { k.code_row_bytes = 3; },
      [](KernelArgs& k) { k.code_batch = 3; },        [](KernelArgs& k) { k.scales = &other_scale; },
      [](KernelArgs& k) { k.offsets = &other_scale; }, [](KernelArgs& k) { k.group_size = 64; },
      [](KernelArgs& k) { k.x = &other; },            [](KernelArgs& k) { k.x_row_elems = 3; },
      [](KernelArgs& k) { k.y = &other; },            [](KernelArgs& k) { k.y_f32 = true; },
      [](KernelArgs& k) { k.n = 2; },                 [](KernelArgs& k) { k.m = 2; },
      [](KernelArgs& k) { k.k = 2; },                 [](KernelArgs& k) { k.batches = 2; },
      [](KernelArgs& k) { k.splits = 2; },            [](KernelArgs& k) { k.sm_count = 66; },
      [](KernelArgs& k) { k.workspace = &other; }};
  for (size_t i = 0; i < changes.size(); ++i) {
    KernelArgs c = a;
    changes[i](c);
    EXPECT_NE(MixedGemmLaunchKey(a), MixedGemmLaunchKey(c)) << "change " << i;
  }
}

// FlashInfer's launch code asks for the SM count and shared memory per launch, sets each
// kernel's dynamic shared memory limit per launch, and its scheduler asks for occupancy per
// plan; through the cache a second step with the same kernels asks nothing.
TEST(DeviceQueryCacheTest, ASecondStepQueriesAndSetsNothing) {
  DeviceQueryCache cache;
  int queries = 0, sets = 0, occupancy = 0;
  const int kernels[3] = {};
  const auto step = [&](int device) {
    for (int layer = 0; layer < 32; ++layer) {
      for (const int& kernel : kernels) {
        int sms = 0, blocks = 0;
        ASSERT_EQ(cache.DeviceAttribute(device, /*attr=*/16, &sms,
                                        [&](int* v) {
                                          ++queries;
                                          *v = 132;
                                          return 0;
                                        }),
                  0);
        EXPECT_EQ(sms, 132);
        ASSERT_EQ(cache.FuncAttribute(device, &kernel, /*attr=*/8, 100000, [&] {
          ++sets;
          return 0;
        }), 0);
        ASSERT_EQ(cache.Occupancy(device, &kernel, 128, 100000, &blocks,
                                  [&](int* v) {
                                    ++occupancy;
                                    *v = 2;
                                    return 0;
                                  }),
                  0);
        EXPECT_EQ(blocks, 2);
      }
    }
  };
  step(0);
  EXPECT_EQ(queries, 1);
  EXPECT_EQ(sets, 3);
  EXPECT_EQ(occupancy, 3);
  step(0);  // the second step: all answered from memory
  EXPECT_EQ(queries, 1);
  EXPECT_EQ(sets, 3);
  EXPECT_EQ(occupancy, 3);
  EXPECT_EQ(cache.counts().device_queries, 1);
  EXPECT_EQ(cache.counts().attribute_sets, 3);
  step(1);  // another device (ranks as threads of one process) asks for itself
  EXPECT_EQ(queries, 2);
  EXPECT_EQ(sets, 6);
}

TEST(DeviceQueryCacheTest, AChangedAttributeIsSetAndForgetsTheKernelsOccupancy) {
  DeviceQueryCache cache;
  const int kernel = 0;
  int sets = 0, occupancy = 0, blocks = 0;
  const auto set = [&] {
    ++sets;
    return 0;
  };
  const auto query = [&](int* v) {
    *v = ++occupancy;
    return 0;
  };
  cache.FuncAttribute(0, &kernel, 8, 50000, set);
  cache.Occupancy(0, &kernel, 128, 50000, &blocks, query);
  cache.FuncAttribute(0, &kernel, 8, 50000, set);  // same value: nothing
  EXPECT_EQ(sets, 1);
  cache.FuncAttribute(0, &kernel, 8, 90000, set);  // raised: set, occupancy asked again
  EXPECT_EQ(sets, 2);
  cache.Occupancy(0, &kernel, 128, 50000, &blocks, query);
  EXPECT_EQ(occupancy, 2);
  EXPECT_EQ(blocks, 2);
  // A failed query is returned and asked again next time.
  int value = 0;
  EXPECT_EQ(cache.DeviceAttribute(0, 1, &value, [](int*) { return 101; }), 101);
  EXPECT_EQ(cache.DeviceAttribute(0, 1, &value,
                                  [](int* v) {
                                    *v = 7;
                                    return 0;
                                  }),
            0);
  EXPECT_EQ(value, 7);
}

}  // namespace
}  // namespace tpserve::cuda
