// libFuzzer target: every AVX2 CPU kernel (kernels/cpu/cpu_kernels.h; both tables where the CPU
// has AVX-512 VNNI), instrumented, on buffers exactly as long as the table's contract says, in
// shapes the input picks. The ASan pass compiles
// the AVX2 kernels without ASan (too slow for the real-model tests: .bazelrc) and checks only the
// ranges a call hands them (kernels/cpu/kernels_bounds.cc); this target is where a load or store a
// kernel makes outside those ranges (a tail loop one vector too far, a stride miscounted) is
// caught, and UBSan watches the same loops. Each call's result is checked against the scalar
// reference's where the two promise the same floats (cpu_kernels_test.cc holds the full numeric
// checks).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "formats/dtype.h"
#include "kernels/cpu/cpu_kernels.h"

namespace {

using tpserve::CpuKernels;
using tpserve::DType;
using tpserve::Q8Block;

// Finite floats in [-8, 8): what activations and cache rows hold; random bit patterns would make
// NaNs and infinities that the kernels need not round the same way.
std::vector<float> Floats(FuzzedDataProvider& in, int64_t n) {
  std::vector<float> v(n);
  for (float& f : v) f = static_cast<float>(in.ConsumeIntegral<int16_t>()) / 4096.0f;
  return v;
}

template <typename T>
std::vector<T> Raw(FuzzedDataProvider& in, int64_t n) {
  std::vector<T> v(n);
  for (T& x : v) x = in.ConsumeIntegral<T>();
  return v;
}

// f16 / bf16 codes of finite values in [-8, 8).
std::vector<uint16_t> Halves(FuzzedDataProvider& in, int64_t n, bool bf16) {
  const std::vector<float> f = Floats(in, n);
  std::vector<uint16_t> v(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &f[i], 4);
    if (bf16) {
      v[i] = static_cast<uint16_t>(bits >> 16);
    } else {
      // |f| < 8 with a 12-bit mantissa: exact in f16. Sign, exponent rebiased, mantissa.
      const uint32_t sign = (bits >> 16) & 0x8000u;
      const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
      const uint32_t mant = (bits >> 13) & 0x3ffu;
      v[i] = f[i] == 0.0f || exp <= 0 ? static_cast<uint16_t>(sign)
                                      : static_cast<uint16_t>(sign | (exp << 10) | mant);
    }
  }
  return v;
}

// num_x activation rows of `blocks` Q8 blocks each, quantized by the scalar reference.
struct Q8Rows {
  std::vector<std::vector<Q8Block>> rows;
  std::vector<const Q8Block*> ptrs;
};
Q8Rows Activations(FuzzedDataProvider& in, const CpuKernels& ref, int num_x, int64_t blocks) {
  Q8Rows a;
  a.rows.resize(num_x);
  for (int j = 0; j < num_x; ++j) {
    const std::vector<float> x = Floats(in, blocks * 32);
    a.rows[j].resize(blocks);
    ref.quantize_q8(x.data(), blocks * 32, a.rows[j].data());
    a.ptrs.push_back(a.rows[j].data());
  }
  return a;
}

struct F32Rows {
  std::vector<std::vector<float>> rows;
  std::vector<const float*> ptrs;
};
F32Rows FloatRows(FuzzedDataProvider& in, int num, int64_t n) {
  F32Rows a;
  for (int j = 0; j < num; ++j) a.rows.push_back(Floats(in, n));
  for (const auto& r : a.rows) a.ptrs.push_back(r.data());
  return a;
}

void Expect(bool same, const char* kernel, int64_t n) {
  if (same) return;
  std::fprintf(stderr, "cpu_kernels_fuzzer: %s at n=%lld differs from the scalar reference\n",
               kernel, static_cast<long long>(n));
  std::abort();
}

// Equal, or both NaN.
bool Same(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The per-row quantized dots: AVX2 and scalar sum in different orders, so only memory and UB are
// checked.
void GgmlDot(FuzzedDataProvider& in, const CpuKernels& simd, const CpuKernels& ref, DType t,
             void (*CpuKernels::*entry)(const uint8_t*, const Q8Block* const*, int, int64_t,
                                        float*)) {
  const bool k_quant = tpserve::BlockElems(t) == 256;
  const int num_x = in.ConsumeIntegralInRange(1, tpserve::kMaxDotRows);
  const int64_t blocks = in.ConsumeIntegralInRange<int64_t>(0, k_quant ? 3 : 9);
  const std::vector<uint8_t> w = Raw<uint8_t>(in, blocks * tpserve::BlockBytes(t));
  const Q8Rows x = Activations(in, ref, num_x, blocks * (k_quant ? 8 : 1));
  std::vector<float> out(num_x);
  (simd.*entry)(w.data(), x.ptrs.data(), num_x, blocks, out.data());
}

// Row groups (Q4_0/1, Q5_0/1, Q8_0) at any row and block strides (rows one after another, the
// interleaved form, overlapping ones): bit for bit with the reference (cpu_kernels.h).
void RowGroupDot(FuzzedDataProvider& in, const CpuKernels& simd, const CpuKernels& ref, int num_x,
                 DType t) {
  const int64_t block_bytes = tpserve::BlockBytes(t);
  const int num_w = in.ConsumeIntegralInRange(1, tpserve::kWeightRowGroup);
  const int64_t blocks = in.ConsumeIntegralInRange<int64_t>(0, 9);
  const int64_t row_stride = in.ConsumeIntegralInRange<int64_t>(0, 9 * block_bytes + 24);
  const int64_t block_stride = in.ConsumeIntegralInRange<int64_t>(0, 8 * block_bytes + 24);
  // Room for one block at least: the kernel forms each row's pointer even with no blocks.
  const std::vector<uint8_t> w = Raw<uint8_t>(
      in, (num_w - 1) * row_stride + std::max<int64_t>(0, blocks - 1) * block_stride + block_bytes);
  const Q8Rows x = Activations(in, ref, num_x, blocks);
  std::vector<float> got(num_x * tpserve::kWeightRowGroup), want(got.size());
  const auto entry = t == DType::kQ4_0   ? &CpuKernels::dot_q4_0_rows
                     : t == DType::kQ4_1 ? &CpuKernels::dot_q4_1_rows
                     : t == DType::kQ5_0 ? &CpuKernels::dot_q5_0_rows
                     : t == DType::kQ5_1 ? &CpuKernels::dot_q5_1_rows
                                         : &CpuKernels::dot_q8_0_rows;
  (simd.*entry)(w.data(), row_stride, block_stride, num_w, x.ptrs.data(), num_x, blocks,
                got.data());
  (ref.*entry)(w.data(), row_stride, block_stride, num_w, x.ptrs.data(), num_x, blocks,
               want.data());
  for (int j = 0; j < num_x; ++j) {
    for (int i = 0; i < num_w; ++i) {
      const int64_t at = j * tpserve::kWeightRowGroup + i;
      Expect(Same(got[at], want[at]), "a row-group dot", blocks);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!tpserve::CpuSupportsIsa(tpserve::CpuIsa::kAvx2)) return 0;
  FuzzedDataProvider in(data, size);
  // Either AVX2 table where the CPU has AVX-512 VNNI: they differ in the row-group dots.
  const bool vnni =
      tpserve::CpuSupportsIsa(tpserve::CpuIsa::kAvx512Vnni) && in.ConsumeBool();
  const CpuKernels& simd = vnni ? tpserve::Avx512VnniCpuKernels() : tpserve::Avx2CpuKernels();
  const CpuKernels& ref = tpserve::ScalarCpuKernels();
  const int which = in.ConsumeIntegralInRange(0, 22);
  const int num = in.ConsumeIntegralInRange(1, tpserve::kMaxDotRows);
  const int64_t n = in.ConsumeIntegralInRange<int64_t>(0, 300);
  switch (which) {
    case 0: {  // quantize_q8: bit for bit with the reference
      const int64_t k = (n / 32) * 32;
      const std::vector<float> x = Floats(in, k);
      std::vector<Q8Block> got(k / 32), want(k / 32);
      simd.quantize_q8(x.data(), k, got.data());
      ref.quantize_q8(x.data(), k, want.data());
      Expect(k == 0 || std::memcmp(got.data(), want.data(), got.size() * sizeof(Q8Block)) == 0,
             "quantize_q8", k);
      break;
    }
    case 1: GgmlDot(in, simd, ref, DType::kQ8_0, &CpuKernels::dot_q8_0); break;
    case 2: GgmlDot(in, simd, ref, DType::kQ4_0, &CpuKernels::dot_q4_0); break;
    case 3: GgmlDot(in, simd, ref, DType::kQ4_1, &CpuKernels::dot_q4_1); break;
    case 4: GgmlDot(in, simd, ref, DType::kQ5_0, &CpuKernels::dot_q5_0); break;
    case 5: GgmlDot(in, simd, ref, DType::kQ5_1, &CpuKernels::dot_q5_1); break;
    case 6: GgmlDot(in, simd, ref, DType::kQ4_K, &CpuKernels::dot_q4_K); break;
    case 7: GgmlDot(in, simd, ref, DType::kQ5_K, &CpuKernels::dot_q5_K); break;
    case 8: GgmlDot(in, simd, ref, DType::kQ6_K, &CpuKernels::dot_q6_K); break;
    case 9: {  // int4 groups of 32, 64 or 128 columns
      const int64_t group = int64_t{32} << in.ConsumeIntegralInRange(0, 2);
      const int64_t chunks = n / 32;
      const int64_t groups = (chunks * 32 + group - 1) / group;
      const std::vector<uint8_t> w = Raw<uint8_t>(in, chunks * 16);
      const std::vector<uint16_t> scales = Halves(in, groups, false);
      const std::vector<uint16_t> zeros = Halves(in, groups, false);
      const Q8Rows x = Activations(in, ref, num, chunks);
      std::vector<float> out(num);
      simd.dot_int4(w.data(), scales.data(), zeros.data(), group, x.ptrs.data(), num, chunks,
                    out.data());
      break;
    }
    case 10: {  // fp8, per-channel (one tile) or 128-column tiles
      const int64_t tile = in.ConsumeBool() ? 128 : (n > 0 ? n : 1);
      std::vector<uint8_t> w = Raw<uint8_t>(in, n);
      for (uint8_t& c : w) {
        if ((c & 0x7f) == 0x7f) c &= 0xfe;  // the NaN codes are never stored
      }
      const std::vector<float> scales = Floats(in, (n + tile - 1) / tile);
      const F32Rows x = FloatRows(in, num, n);
      std::vector<float> out(num);
      simd.dot_fp8(w.data(), scales.data(), tile, x.ptrs.data(), num, n, out.data());
      break;
    }
    case 11: {  // dense dots over f32, f16, bf16 weights
      const int kind = in.ConsumeIntegralInRange(0, 2);
      const F32Rows x = FloatRows(in, num, n);
      std::vector<float> out(num);
      if (kind == 0) {
        const std::vector<float> w = Floats(in, n);
        simd.dot_f32(w.data(), x.ptrs.data(), num, n, out.data());
      } else {
        const std::vector<uint16_t> w = Halves(in, n, kind == 2);
        (kind == 1 ? simd.dot_f16 : simd.dot_bf16)(w.data(), x.ptrs.data(), num, n, out.data());
      }
      break;
    }
    case 12: {  // widening, and narrowing any 32-bit pattern to f16: exact
      if (in.ConsumeBool()) {
        const std::vector<uint32_t> bits = Raw<uint32_t>(in, n);
        std::vector<float> src(n);  // n may be 0: no memcpy from an empty vector's null data()
        for (int64_t i = 0; i < n; ++i) src[i] = std::bit_cast<float>(bits[i]);
        std::vector<uint16_t> got(n), want(n);
        simd.f32_to_f16(src.data(), got.data(), n);
        ref.f32_to_f16(src.data(), want.data(), n);
        for (int64_t i = 0; i < n; ++i) Expect(got[i] == want[i], "f32_to_f16", n);
        break;
      }
      const bool bf16 = in.ConsumeBool();
      const std::vector<uint16_t> src = Halves(in, n, bf16);
      std::vector<float> got(n), want(n);
      (bf16 ? simd.bf16_to_f32 : simd.f16_to_f32)(src.data(), got.data(), n);
      (bf16 ? ref.bf16_to_f32 : ref.f16_to_f32)(src.data(), want.data(), n);
      for (int64_t i = 0; i < n; ++i) Expect(Same(got[i], want[i]), "f16/bf16_to_f32", n);
      break;
    }
    case 13: {  // element-wise: add is exact
      const std::vector<float> a = Floats(in, n), b = Floats(in, n);
      std::vector<float> got(n), want(n), y = Floats(in, n);
      simd.add(a.data(), b.data(), n, got.data());
      ref.add(a.data(), b.data(), n, want.data());
      for (int64_t i = 0; i < n; ++i) Expect(Same(got[i], want[i]), "add", n);
      simd.silu_mul(a.data(), b.data(), n, got.data());
      simd.axpy(0.5f, a.data(), n, y.data());
      simd.scale(0.25f, n, y.data());
      break;
    }
    case 14: {  // rms_norm, exp_sub_sum
      if (n == 0) break;
      const std::vector<float> x = Floats(in, n), w = Floats(in, n);
      std::vector<float> y(n), e = Floats(in, n);
      simd.rms_norm(x.data(), w.data(), n, 1e-5f, y.data());
      simd.exp_sub_sum(e.data(), n, 8.0f);
      break;
    }
    case 15:
    case 16:
    case 17: {  // attention over cache rows at a stride, f32 or f16 (17)
      const int64_t head_dim = in.ConsumeIntegralInRange<int64_t>(1, 80);
      const int64_t stride = head_dim + in.ConsumeIntegralInRange<int64_t>(0, 40);
      const int64_t count = in.ConsumeIntegralInRange<int64_t>(0, 20);
      const int64_t span = count > 0 ? (count - 1) * stride + head_dim : 0;
      const int64_t scores_stride = count + in.ConsumeIntegralInRange<int64_t>(0, 3);
      const F32Rows q = FloatRows(in, num, head_dim);
      const F32Rows p = FloatRows(in, num, count);
      std::vector<float> scores(num > 0 ? (num - 1) * scores_stride + count : 0);
      std::vector<std::vector<float>> outs(num, std::vector<float>(head_dim));
      std::vector<float*> out_ptrs;
      for (auto& o : outs) out_ptrs.push_back(o.data());
      if (which == 17) {
        const std::vector<uint16_t> cache = Halves(in, span, false);
        simd.attn_scores_f16(q.ptrs.data(), num, cache.data(), stride, count, head_dim, 0.125f,
                             scores.data(), scores_stride);
        simd.attn_accumulate_f16(p.ptrs.data(), num, cache.data(), stride, count, head_dim,
                                 out_ptrs.data());
      } else {
        const std::vector<float> cache = Floats(in, span);
        simd.attn_scores(q.ptrs.data(), num, cache.data(), stride, count, head_dim, 0.125f,
                         scores.data(), scores_stride);
        simd.attn_accumulate(p.ptrs.data(), num, cache.data(), stride, count, head_dim,
                             out_ptrs.data());
      }
      break;
    }
    case 18: RowGroupDot(in, simd, ref, num, DType::kQ4_0); break;
    case 19: RowGroupDot(in, simd, ref, num, DType::kQ4_1); break;
    case 20: RowGroupDot(in, simd, ref, num, DType::kQ5_0); break;
    case 21: RowGroupDot(in, simd, ref, num, DType::kQ5_1); break;
    case 22: RowGroupDot(in, simd, ref, num, DType::kQ8_0); break;
  }
  return 0;
}
