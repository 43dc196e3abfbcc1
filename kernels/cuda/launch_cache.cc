#include "kernels/cuda/launch_cache.h"

#include <atomic>

namespace tpserve::cuda {
namespace {

std::atomic<int64_t> g_builds{0}, g_hits{0}, g_dropped{0};

}  // namespace

namespace internal {

void TallyLaunch(bool built, int64_t dropped) {
  (built ? g_builds : g_hits).fetch_add(1, std::memory_order_relaxed);
  if (dropped > 0) g_dropped.fetch_add(dropped, std::memory_order_relaxed);
}

}  // namespace internal

LaunchCacheCounts ProcessLaunchCacheCounts() {
  return {g_builds.load(std::memory_order_relaxed), g_hits.load(std::memory_order_relaxed),
          g_dropped.load(std::memory_order_relaxed)};
}

DeviceQueryCache& ProcessDeviceQueries() {
  static DeviceQueryCache* const cache = new DeviceQueryCache;  // never destroyed: used at exit
  return *cache;
}

}  // namespace tpserve::cuda
