// Launch set-up done once per shape rather than at every launch: what CUTLASS's adapters build
// from their arguments (initialize: can_implement, the kernel parameters with their TMA
// descriptors, the kernel's shared-memory attribute), kept per exact argument set
// (LaunchCache), and what FlashInfer's and CUTLASS's launch code asks the runtime about the
// device and its kernels (cudaDeviceGetAttribute, cudaFuncSetAttribute,
// cudaOccupancyMaxActiveBlocksPerMultiprocessor), answered from memory after the first time
// (DeviceQueryCache; cached_cuda_queries.h routes those calls here). So a second step of the
// same shapes builds nothing and queries nothing: the counts say so.
//
//   static LaunchCache<Gemm::Params> cache;
//   Gemm::Params params;
//   int err = cache.Get(key, [&](Gemm::Params* p) { ...; return 0; }, &params);
//
// Plain C++ (no CUDA include), so the caching is tested on the host with fake set-up
// functions (launch_cache_test); the .cu files instantiate it with their CUTLASS types.
// Threading: every member is thread-safe (one mutex per cache; `make`/`query`/`set` run under
// it, so each key's set-up runs once even when ranks share a process).
#ifndef TPSERVE_KERNELS_CUDA_LAUNCH_CACHE_H_
#define TPSERVE_KERNELS_CUDA_LAUNCH_CACHE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>

namespace tpserve::cuda {

// A launch's identity: every argument its set-up depends on, as integers (pointers included:
// CUTLASS's parameters hold the addresses of their operands). Unused entries stay 0.
using LaunchKey = std::array<int64_t, 20>;

inline int64_t KeyWord(const void* p) { return static_cast<int64_t>(reinterpret_cast<uintptr_t>(p)); }

struct LaunchCacheCounts {
  int64_t builds = 0;  // values made (a key seen for the first time, or again after a drop)
  int64_t hits = 0;    // launches served from a kept value
  int64_t dropped = 0; // values dropped because the cache was full
};

// Every LaunchCache of this process together (the CUTLASS instantiations' kernel parameters
// and workspace sizes): what a GPU check compares between two steps of the same shapes.
LaunchCacheCounts ProcessLaunchCacheCounts();

namespace internal {
void TallyLaunch(bool built, int64_t dropped);  // LaunchCache's feed of the process counts
}  // namespace internal

// Values made once per key and kept. Past `capacity` keys every kept value is dropped (and
// made again as launches ask): a bound on host memory for engines whose step shapes keep
// changing, never a wrong answer.
template <typename Value>
class LaunchCache {
 public:
  explicit LaunchCache(size_t capacity = 16384) : capacity_(capacity) {}

  // *out = the value kept for `key`, or the one make(Value*) makes (returning 0; any other
  // return, an error code, is passed back and nothing is kept, so a later call tries again).
  template <typename Make>
  int Get(const LaunchKey& key, Make&& make, Value* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = values_.find(key);
    if (it != values_.end()) {
      ++counts_.hits;
      internal::TallyLaunch(/*built=*/false, 0);
      *out = it->second;
      return 0;
    }
    Value made{};
    if (const int err = make(&made); err != 0) return err;
    int64_t dropped = 0;
    if (values_.size() >= capacity_) {
      dropped = static_cast<int64_t>(values_.size());
      counts_.dropped += dropped;
      values_.clear();
    }
    values_.emplace(key, made);
    ++counts_.builds;
    internal::TallyLaunch(/*built=*/true, dropped);
    *out = made;
    return 0;
  }

  LaunchCacheCounts counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return values_.size();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::map<LaunchKey, Value> values_;
  LaunchCacheCounts counts_;
};

struct DeviceQueryCounts {
  int64_t device_queries = 0;     // cudaDeviceGetAttribute calls made
  int64_t attribute_sets = 0;     // cudaFuncSetAttribute calls made
  int64_t occupancy_queries = 0;  // cudaOccupancyMaxActiveBlocksPerMultiprocessor calls made
  int64_t hits = 0;               // calls answered from memory
};

// Answers what never changes for a process: a device's attributes, and a kernel's occupancy
// for a block size and dynamic shared memory; sets a kernel's attribute only when it was
// never set to that value on that device. Errors are returned and not kept.
class DeviceQueryCache {
 public:
  // *value = attribute `attr` of `device`, from query(int*) (0: success) the first time.
  template <typename Query>
  int DeviceAttribute(int device, int attr, int* value, Query&& query) {
    std::lock_guard<std::mutex> lock(mu_);
    return Cached(attributes_, std::make_tuple(device, attr), counts_.device_queries, value,
                  query);
  }

  // Kernel `func`'s attribute `attr` on `device` set to `value` by set() (0: success), unless
  // it already was. A change forgets the kernel's occupancy answers (they depend on it).
  template <typename Set>
  int FuncAttribute(int device, const void* func, int attr, int value, Set&& set) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto key = std::make_tuple(device, func, attr);
    if (auto it = func_attributes_.find(key); it != func_attributes_.end() && it->second == value) {
      ++counts_.hits;
      return 0;
    }
    ++counts_.attribute_sets;
    if (const int err = set(); err != 0) return err;
    func_attributes_[key] = value;
    for (auto it = occupancy_.begin(); it != occupancy_.end();) {
      const bool same = std::get<0>(it->first) == device && std::get<1>(it->first) == func;
      it = same ? occupancy_.erase(it) : std::next(it);
    }
    return 0;
  }

  // *blocks = how many blocks of `block_size` threads and `smem` dynamic shared memory bytes
  // of `func` fit on one SM of `device`, from query(int*) (0: success) the first time.
  template <typename Query>
  int Occupancy(int device, const void* func, int block_size, int64_t smem, int* blocks,
                Query&& query) {
    std::lock_guard<std::mutex> lock(mu_);
    return Cached(occupancy_, std::make_tuple(device, func, block_size, smem),
                  counts_.occupancy_queries, blocks, query);
  }

  DeviceQueryCounts counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }

 private:
  // *value = cache[key], or query(value)'s answer (0: success) kept there, counted in `misses`.
  // REQUIRES: mu_ held.
  template <typename Map, typename Key, typename Query>
  int Cached(Map& cache, const Key& key, int64_t& misses, int* value, Query& query) {
    if (auto it = cache.find(key); it != cache.end()) {
      ++counts_.hits;
      *value = it->second;
      return 0;
    }
    ++misses;
    if (const int err = query(value); err != 0) return err;
    cache.emplace(key, *value);
    return 0;
  }

  mutable std::mutex mu_;
  std::map<std::tuple<int, int>, int> attributes_;
  std::map<std::tuple<int, const void*, int>, int> func_attributes_;
  std::map<std::tuple<int, const void*, int, int64_t>, int> occupancy_;
  DeviceQueryCounts counts_;
};

// The process's one DeviceQueryCache: what cached_cuda_queries.h's calls go through.
DeviceQueryCache& ProcessDeviceQueries();

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_LAUNCH_CACHE_H_
