// Test helpers shared by the CPU backend parity suites: guarded output buffers, Gaussian data
// and the normalized error test-backend-ops uses.
//
//   Guarded y(m * n);  be.MatMul(x, m, w, y.data(), DType::kF32);
//   ASSERT_TRUE(y.GuardsIntact());  EXPECT_LT(Nmse(y.values(), want), 1e-10);
//
// Test-only; not thread-safe.
#ifndef TPSERVE_KERNELS_CPU_PARITY_TEST_UTIL_H_
#define TPSERVE_KERNELS_CPU_PARITY_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tpserve::parity_test {

inline constexpr uint32_t kGuardBits = 0x7FC0DEAD;  // a NaN no kernel produces
inline constexpr int kGuardWords = 16;

// A float buffer with guard words on both sides to catch out-of-bounds writes.
class Guarded {
 public:
  explicit Guarded(int64_t n, float fill = 0.0f) : n_(n), buf_(n + 2 * kGuardWords) {
    float guard;
    std::memcpy(&guard, &kGuardBits, 4);
    std::fill(buf_.begin(), buf_.end(), guard);
    std::fill(data(), data() + n, fill);
  }
  float* data() { return buf_.data() + kGuardWords; }
  std::vector<float> values() const {
    return std::vector<float>(buf_.begin() + kGuardWords, buf_.begin() + kGuardWords + n_);
  }
  bool GuardsIntact() const {
    for (int i = 0; i < kGuardWords; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &buf_[i], 4);
      std::memcpy(&b, &buf_[kGuardWords + n_ + i], 4);
      if (a != kGuardBits || b != kGuardBits) return false;
    }
    return true;
  }

 private:
  int64_t n_;
  std::vector<float> buf_;
};

inline std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// y = x W^T in f64 for x [m, k] and dequantized W [n, k], and its error scale: the sum of
// squared products, which rounding of the inputs and reordering of the f32 sums grow with
// (unlike sum(y^2): one dot product can cancel to ~0). With `perm`, stored column c multiplies
// input column perm[c] (GPTQ act-order).
struct ProductF64 {
  std::vector<double> y;
  double magnitude = 0.0;
};
inline ProductF64 MatMulF64(const std::vector<float>& x, const std::vector<float>& w, int64_t m,
                            int64_t n, int64_t k, const int32_t* perm = nullptr) {
  ProductF64 out{std::vector<double>(m * n, 0.0)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t c = 0; c < k; ++c) {
        const double p = double{x[i * k + (perm ? perm[c] : c)]} * w[j * k + c];
        out.y[i * n + j] += p;
        out.magnitude += p * p;
      }
    }
  }
  return out;
}

// sum((got - want)^2) / magnitude: the error of a matmul output against `want`, on the scale
// of the products that made it (see ProductF64).
inline double ErrorVsProducts(const std::vector<float>& got, const std::vector<double>& want,
                              double magnitude) {
  double err = 0;
  for (size_t i = 0; i < got.size(); ++i) err += (got[i] - want[i]) * (got[i] - want[i]);
  return err / magnitude;
}
inline double ErrorVsProducts(const std::vector<float>& got, const std::vector<float>& want,
                              double magnitude) {
  return ErrorVsProducts(got, std::vector<double>(want.begin(), want.end()), magnitude);
}

// sum((a - b)^2) / sum(b^2): the normalized error test-backend-ops uses.
inline double Nmse(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? num : num / den;
}
inline double Nmse(const std::vector<float>& a, const std::vector<float>& b) {
  return Nmse(a, std::vector<double>(b.begin(), b.end()));
}

inline bool AllFinite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace tpserve::parity_test

#endif  // TPSERVE_KERNELS_CPU_PARITY_TEST_UTIL_H_
