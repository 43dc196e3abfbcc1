// The mixed GEMM on a GPU: against the host emulation of its own arithmetic (emulate.h; only
// the f32 summation order may differ: kF32OrderBound) and the CPU reference (parity bound),
// bf16 y == bf16(f32 y), chunked == chunk by chunk bit for bit, decode rows independent of the
// batch size, and the device preparation == the host one. Skips without a device.
#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "formats/dtype.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/mixed_gemm/emulate.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"
#include "kernels/cuda/mixed_gemm/prepare.h"
#include "kernels/cuda/mixed_gemm/prepare_kernels.h"
#include "kernels/cuda/mixed_gemm/test_device_buffer.h"
#include "kernels/cuda/mixed_gemm/test_weights.h"
#include "kernels/quantize.h"
#include "kernels/testing/parity_bounds.h"

namespace tpserve::cuda {
namespace {

using Dev = TestDeviceBuffer;

class MixedGemmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::StatusOr<int> devices = CudaDeviceCount();
    if (!devices.ok() || *devices == 0) GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  }

  // y [num_chunks, m, w.n] as doubles (bf16 or f32 y read back).
  std::vector<double> Run(const TensorFormat& format, const MixedGemmWeight& w, const Dev& x,
                          int64_t m, int64_t num_chunks, bool y_f32) {
    const MixedGemmPlan plan = PlanMixedGemm(format, m, w.n, w.k, sm_count_);
    const int64_t ws = MixedGemmWorkspaceBytes(plan, m, w.n, w.k, num_chunks, y_f32, sm_count_);
    Dev workspace(ws);
    const int64_t count = num_chunks * m * w.n;
    Dev y(count * (y_f32 ? 4 : 2));
    MixedGemmCall call{x.get(), num_chunks * w.k, m,  num_chunks, y.get(),
                       y_f32,   workspace.get(),  ws, sm_count_};
    EXPECT_EQ(RunMixedGemm(w, call, plan, nullptr), 0);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<double> out(count);
    if (y_f32) {
      const std::vector<float> v = y.Read<float>(count);
      for (int64_t i = 0; i < count; ++i) out[i] = v[i];
    } else {
      const std::vector<uint16_t> v = y.Read<uint16_t>(count);
      for (int64_t i = 0; i < count; ++i) out[i] = BF16ToF32(v[i]);
    }
    return out;
  }

  int sm_count_ = 0;
};

std::vector<uint16_t> ToBf16Bits(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = F32ToBF16(x[i]);
  return b;
}

// The uploaded prepared int4 weight (device pointers) and its host twin.
struct DeviceInt4 {
  explicit DeviceInt4(const PreparedInt4& p)
      : host(p),
        codes(p.codes.data(), p.codes.size()),
        scales(p.scales.data(), p.scales.size() * 4),
        offsets(p.offsets.data(), p.offsets.size() * 4) {}
  MixedGemmWeight View() const {
    MixedGemmWeight w = host.View();
    w.codes = codes.get();
    w.scales = static_cast<const float*>(scales.get());
    w.offsets = static_cast<const float*>(offsets.get());
    return w;
  }
  const PreparedInt4& host;
  Dev codes, scales, offsets;
};

TEST_F(MixedGemmGpu, Int4MatchesItsEmulationAndTheReference) {
  const int64_t n = 256, k = 1024;
  const TensorFormat format = TensorFormat::Int4(128);
  const HostMatrix host = MakeInt4Weight(Int4Style::kAwq, n, k, 128, 21, 0.01);
  const PreparedInt4 p = PrepareInt4(host.matrix);
  const DeviceInt4 dev(p);
  for (int64_t m : {1, 7, 16, 17, 64}) {
    const std::vector<float> x = RandomBf16Activations(m * k, 22 + m);
    const std::vector<uint16_t> xb = ToBf16Bits(x);
    const Dev dx(xb.data(), xb.size() * 2);
    const MixedGemmWeight hv = p.View();
    const std::vector<double> emulated = EmulatedProduct(
        [&hv](int64_t r, int64_t c) { return MmaOperand(hv, r, c); }, n, k, x.data(), m);
    const std::vector<double> ref = ReferenceProduct(host.matrix, x.data(), m);
    const std::vector<double> y32 = Run(format, dev.View(), dx, m, 1, true);
    const std::vector<double> y16 = Run(format, dev.View(), dx, m, 1, false);
    EXPECT_LE(NormalizedError(y32, emulated), parity::kF32OrderBound) << "m " << m;
    EXPECT_LE(NormalizedError(y16, ref), parity::kBf16TwiceBound) << "m " << m;
    EXPECT_EQ(y16, RoundToBf16(y32)) << "bf16 y is not bf16(f32 y), m " << m;
  }
}

TEST_F(MixedGemmGpu, ChunkedIsChunkByChunkBitForBit) {
  const int64_t n = 128, chunks = 4, kc = 256, k = chunks * kc;
  const TensorFormat format = TensorFormat::Int4(128);
  const HostMatrix host = MakeInt4Weight(Int4Style::kGptqV1Asym, n, k, 128, 23, 0.01);
  const PreparedInt4 p = PrepareInt4(host.matrix);
  const DeviceInt4 dev(p);
  for (int64_t m : {1, 33}) {
    const std::vector<float> x = RandomBf16Activations(m * k, 24);
    const std::vector<uint16_t> xb = ToBf16Bits(x);
    const Dev dx(xb.data(), xb.size() * 2);
    const std::vector<double> all = Run(format, dev.View(), dx, m, chunks, true);
    for (int64_t c = 0; c < chunks; ++c) {
      std::vector<uint16_t> xc(m * kc);
      for (int64_t t = 0; t < m; ++t) {
        std::memcpy(&xc[t * kc], &xb[t * k + c * kc], kc * 2);
      }
      const Dev dxc(xc.data(), xc.size() * 2);
      const std::vector<double> alone =
          Run(format, MixedGemmColumnChunk(dev.View(), c, kc), dxc, m, 1, true);
      EXPECT_TRUE(std::equal(alone.begin(), alone.end(), all.begin() + c * m * n))
          << "chunk " << c << " m " << m;
    }
  }
}

TEST_F(MixedGemmGpu, DecodeRowsDoNotDependOnTheBatchSize) {
  const int64_t n = 512, k = 2048;
  const TensorFormat format = TensorFormat::Int4(128);
  const HostMatrix host = MakeInt4Weight(Int4Style::kAwq, n, k, 128, 25, 0.0);
  const PreparedInt4 p = PrepareInt4(host.matrix);
  const DeviceInt4 dev(p);
  const std::vector<uint16_t> xb = ToBf16Bits(RandomBf16Activations(16 * k, 26));
  const Dev d16(xb.data(), xb.size() * 2);
  const std::vector<double> y16 = Run(format, dev.View(), d16, 16, 1, true);
  const Dev d1(xb.data(), k * 2);
  const std::vector<double> y1 = Run(format, dev.View(), d1, 1, 1, true);
  EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y16.begin()));
}

TEST_F(MixedGemmGpu, DevicePreparationIsTheHostOne) {
  const int64_t n = 64, k = 512, group = 64;
  const HostMatrix host = MakeInt4Weight(Int4Style::kFractional, n, k, group, 27, 0.01);
  const WeightMatrix& w = host.matrix;
  const PreparedInt4 p = PrepareInt4(w);
  const Dev codes(host.values.data(), host.values.size());
  const Dev scales(host.scales.data(), host.scales.size());
  const Dev zeros(host.zeros.data(), host.zeros.size());
  const Dev out_codes(n * k / 2), out_scales(p.scales.size() * 4),
      out_offsets(p.offsets.size() * 4);
  const Int4Source src{codes.get(), w.row_bytes, scales.get(), zeros.get(), w.scale_stride,
                       n,           k,           group};
  ASSERT_EQ(LaunchPrepareInt4(src, out_codes.get(), static_cast<float*>(out_scales.get()),
                              static_cast<float*>(out_offsets.get()), nullptr),
            0);
  EXPECT_EQ(out_codes.Read<uint8_t>(n * k / 2), p.codes);
  EXPECT_EQ(out_scales.Read<float>(p.scales.size()), p.scales);
  EXPECT_EQ(out_offsets.Read<float>(p.offsets.size()), p.offsets);
}

TEST_F(MixedGemmGpu, Fp8MatchesItsEmulationAndTheReference) {
  const int64_t n = 256, k = 1024;
  for (FormatKind kind :
       {FormatKind::kF8E4M3, FormatKind::kFp8PerChannel, FormatKind::kFp8Block128}) {
    const TensorFormat format = TensorFormat::Of(kind);
    const HostMatrix host = MakeFp8Weight(kind, n, k, 28);
    const std::vector<float> scales = PrepareFp8Scales(host.matrix);
    const Dev codes(host.values.data(), host.values.size());
    const Dev dscales(scales.data(), scales.size() * 4);
    MixedGemmWeight w = Fp8MixedGemmWeight(host.matrix, static_cast<const float*>(dscales.get()));
    w.codes = codes.get();
    const MixedGemmWeight hv = Fp8MixedGemmWeight(host.matrix, scales.data());
    for (int64_t m : {1, 16}) {
      const std::vector<float> x = RandomBf16Activations(m * k, 29 + m);
      const std::vector<uint16_t> xb = ToBf16Bits(x);
      const Dev dx(xb.data(), xb.size() * 2);
      const std::vector<double> emulated = EmulatedProduct(
          [&hv](int64_t r, int64_t c) { return MmaOperand(hv, r, c); }, n, k, x.data(), m);
      const std::vector<double> y32 = Run(format, w, dx, m, 1, true);
      const std::vector<double> y16 = Run(format, w, dx, m, 1, false);
      EXPECT_LE(NormalizedError(y32, emulated), parity::kF32OrderBound)
          << TensorFormatName(format) << " m " << m;
      EXPECT_LE(NormalizedError(y16, ReferenceProduct(host.matrix, x.data(), m)),
                parity::kBf16TwiceBound);
    }
  }
}

}  // namespace
}  // namespace tpserve::cuda
