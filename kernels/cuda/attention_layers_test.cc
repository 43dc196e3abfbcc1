// On a GPU: one step whose layers differ in sliding window and logit soft-cap (Qwen2's
// max_window_layers, Gemma's local and global layers): a plain layer first (its plan may split
// keys and route the prompt through FA3), then windowed and capped layers, then plain again,
// all in the same step, each compared with a host reference in f64. The later layers make the
// backend plan the step again (flashinfer/scoring.h); a wrong window_left, a split plan run
// with a window or a dropped cap are O(1) errors. Head dims 128 (FlashInfer) and 256 (our
// SIMT kernels). Without a device it skips.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"

namespace tpserve {
namespace {

constexpr int64_t kHeads = 8, kKvHeads = 2, kBlock = 16;

uint16_t ToBf16(float v) {  // round to nearest even (inputs are finite)
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
}

float FromBf16(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

std::vector<uint16_t> RandomBf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = ToBf16(normal(rng));
  return v;
}

// backend.h's attention in f64 for one row at `position` of a sequence whose keys are slots
// 0..position of `k` / `v` ([slot][kv head][head_dim], blocks laid out in order).
void Reference(const std::vector<uint16_t>& q_row, const std::vector<uint16_t>& k,
               const std::vector<uint16_t>& v, int64_t hd, int64_t position,
               const Backend::AttentionParams& p, std::vector<double>* out) {
  const int64_t first =
      p.sliding_window > 0 ? std::max<int64_t>(0, position - p.sliding_window + 1) : 0;
  for (int64_t h = 0; h < kHeads; ++h) {
    const int64_t g = h / (kHeads / kKvHeads);
    std::vector<double> s(position + 1 - first);
    double mx = -INFINITY;
    for (int64_t t = first; t <= position; ++t) {
      double dot = 0.0;
      for (int64_t d = 0; d < hd; ++d) {
        dot += FromBf16(q_row[h * hd + d]) * FromBf16(k[(t * kKvHeads + g) * hd + d]);
      }
      double x = p.scale * dot;
      if (p.logit_softcap > 0) x = p.logit_softcap * std::tanh(x / p.logit_softcap);
      s[t - first] = x;
      mx = std::max(mx, x);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t d = 0; d < hd; ++d) {
      double acc = 0.0;
      for (int64_t t = first; t <= position; ++t) {
        acc += s[t - first] * FromBf16(v[(t * kKvHeads + g) * hd + d]);
      }
      (*out)[h * hd + d] = acc / sum;
    }
  }
}

void RunLayers(int64_t hd) {
  absl::StatusOr<std::unique_ptr<Backend>> made = CreateCudaBackend(0, {});
  ASSERT_TRUE(made.ok()) << made.status();
  Backend& be = **made;
  // Sequence 0: a decode row at position 2999 (long enough to split keys); sequence 1: a
  // 70-row prompt chunk at positions 30..99 (FA3 with bf16 KV and head_dim 128).
  const int64_t contexts[2] = {3000, 100};
  const int64_t blocks0 = contexts[0] / kBlock + 1, blocks1 = contexts[1] / kBlock + 1;
  const int64_t slot_elems = kKvHeads * hd;
  std::vector<uint16_t> k[2], v[2], pool_k((blocks0 + blocks1) * kBlock * slot_elems, 0),
      pool_v(pool_k.size(), 0);
  std::vector<int32_t> tables[2];
  for (int s = 0; s < 2; ++s) {
    k[s] = RandomBf16(contexts[s] * slot_elems, 10 + s);
    v[s] = RandomBf16(contexts[s] * slot_elems, 20 + s);
    const int64_t base_block = s == 0 ? 0 : blocks0;
    for (int64_t b = 0; b < (s == 0 ? blocks0 : blocks1); ++b) {
      tables[s].push_back(static_cast<int32_t>(base_block + b));
    }
    std::memcpy(&pool_k[base_block * kBlock * slot_elems], k[s].data(), k[s].size() * 2);
    std::memcpy(&pool_v[base_block * kBlock * slot_elems], v[s].data(), v[s].size() * 2);
  }
  absl::StatusOr<DeviceBuffer> dk = Upload(be, pool_k.data(), pool_k.size() * 2, "k pool");
  absl::StatusOr<DeviceBuffer> dv = Upload(be, pool_v.data(), pool_v.size() * 2, "v pool");
  ASSERT_TRUE(dk.ok() && dv.ok());
  const KvPoolView pool{dk->data(), dv->data(), DType::kBF16, 1.0f, 1.0f, blocks0 + blocks1,
                        kBlock, kKvHeads, hd};
  const int64_t rows = 1 + 70;
  const std::vector<uint16_t> q = RandomBf16(rows * kHeads * hd, 30);
  absl::StatusOr<DeviceBuffer> dq = Upload(be, q.data(), q.size() * 2, "q");
  ASSERT_TRUE(dq.ok());
  const AttentionSequence seqs[2] = {{0, 1, 2999, tables[0]}, {1, 70, 30, tables[1]}};
  be.BeginStep(StepInputs{{}, {}, seqs, {}});

  const Backend::AttentionParams layers[] = {
      {0.5f, 0, 0.0f}, {0.5f, 37, 0.0f}, {0.5f, 0, 20.0f}, {0.5f, 300, 20.0f}, {0.5f, 0, 0.0f}};
  std::vector<DeviceBuffer> outs;
  for (const Backend::AttentionParams& p : layers) {
    absl::StatusOr<DeviceBuffer> out = be.Allocate(q.size() * 2, "out");
    ASSERT_TRUE(out.ok());
    be.PagedAttention(dq->data(), kHeads, p, pool, out->data());
    outs.push_back(*std::move(out));
  }
  ASSERT_TRUE(be.Synchronize().ok()) << be.Synchronize();
  for (size_t l = 0; l < outs.size(); ++l) {
    std::vector<uint16_t> got(q.size());
    ASSERT_TRUE(be.CopyToHost(got.data(), outs[l].data(), got.size() * 2).ok());
    double num = 0.0, den = 0.0;
    std::vector<double> want(kHeads * hd);
    for (int64_t r = 0; r < rows; ++r) {
      const int s = r == 0 ? 0 : 1;
      const int64_t position = r == 0 ? 2999 : 30 + (r - 1);
      const std::vector<uint16_t> q_row(q.begin() + r * kHeads * hd,
                                        q.begin() + (r + 1) * kHeads * hd);
      Reference(q_row, k[s], v[s], hd, position, layers[l], &want);
      for (int64_t i = 0; i < kHeads * hd; ++i) {
        const double e = FromBf16(got[r * kHeads * hd + i]) - want[i];
        num += e * e;
        den += want[i] * want[i];
      }
    }
    // bf16 output rounding is ~1e-5 of this; a wrong key set or a dropped cap is ~1.
    EXPECT_LT(num / den, 1e-3) << "head_dim " << hd << ", layer " << l << ": window "
                               << layers[l].sliding_window << ", cap "
                               << layers[l].logit_softcap;
  }
}

TEST(AttentionLayers, WindowsAndCapsChangingWithinAStepMatchTheReference) {
  const absl::StatusOr<int> devices = CudaDeviceCount();
  if (!devices.ok() || *devices == 0) {
    GTEST_SKIP() << "no CUDA device: "
                 << (devices.ok() ? "cudaGetDeviceCount found 0" : devices.status().message());
  }
  RunLayers(128);  // FlashInfer (FA2 + FA3) on compute capability 9.0
  RunLayers(256);  // our SIMT kernels
}

}  // namespace
}  // namespace tpserve
