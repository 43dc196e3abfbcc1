#include "kernels/cpu/roofline_probe.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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

// Twelve independent chains hide the FMA latency (4-5 cycles, two ports).
__attribute__((target("avx2,fma"))) float FmaChains(int64_t iterations, float seed) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t n = 0; n < iterations; ++n) {
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
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    best = std::min(best, Timed(threads, [&](int t) {
                      const int64_t begin = floats * t / threads, end = floats * (t + 1) / threads;
                      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                      for (int64_t i = begin; i + 3 < end; i += 4) {
                        s0 += data[i];
                        s1 += data[i + 1];
                        s2 += data[i + 2];
                        s3 += data[i + 3];
                      }
                      sums[t] = s0 + s1 + s2 + s3;
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
