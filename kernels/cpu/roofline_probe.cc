#include "kernels/cpu/roofline_probe.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace tpserve {
namespace {

using Clock = std::chrono::steady_clock;

// Runs body(t) on `threads` threads at once and returns the wall seconds.
template <class Body>
double Timed(int threads, Body body) {
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { body(t); });
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The sum of n floats with four vector accumulators: a streaming read that the adds keep up
// with (a scalar loop of four float chains added one float per ~cycle, and so measured the
// adds, about 16 GB/s a core, rather than the memory).
__attribute__((target("avx2"))) float SumFloats(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float sum = out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
  for (; i < n; ++i) sum += p[i];
  return sum;
}

// Twelve independent chains hide the FMA latency (4-5 cycles, two ports).
__attribute__((target("avx2,fma"))) float FmaChains(int64_t iterations, float seed) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n) {
    // Unrolled, so the chains are registers: a loop over the array kept it on the stack, and
    // every FMA waited for the store of the one before (the probe read half the real rate).
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  return out[0];
}

}  // namespace

double DramReadGBs(int threads) {
  threads = std::max(1, threads);
  const int64_t floats = int64_t{128} << 20;  // 512 MiB
  std::vector<float> data(floats, 1.0f);
  std::vector<double> sums(threads);
  const bool avx2 = __builtin_cpu_supports("avx2");
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    best = std::min(best, Timed(threads, [&](int t) {
                      const int64_t begin = floats * t / threads, end = floats * (t + 1) / threads;
                      const float* p = data.data() + begin;
                      if (avx2) {
                        sums[t] = SumFloats(p, end - begin);
                      } else {
                        sums[t] = std::accumulate(p, p + (end - begin), 0.0f);
                      }
                    }));
  }
  volatile double sink = sums[0];  // the sums are used: the reads are not optimised away
  (void)sink;
  return static_cast<double>(floats) * sizeof(float) / best * 1e-9;
}

double FmaPeakGflops(int threads) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0.0;
  threads = std::max(1, threads);
  const int64_t iterations = int64_t{40} << 20;
  std::vector<float> out(threads);
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    best = std::min(best, Timed(threads, [&](int t) {
                      out[t] = FmaChains(iterations, static_cast<float>(t + run));
                    }));
  }
  volatile float sink = out[0];
  (void)sink;
  return static_cast<double>(threads) * iterations * 12 * 8 * 2 / best * 1e-9;
}

}  // namespace tpserve
