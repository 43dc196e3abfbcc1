// Avx2CpuKernels() and Avx512VnniCpuKernels(), and under AddressSanitizer the bounds every AVX2
// kernel call must keep.
//
// ASan checks each load a kernel makes, and the AVX2 dot products make one per 32 bytes: under
// --config=asan they ran 6x slower than without it, most of the ASan pass's test time
// (//worker:llama_golden_test 42.5 s; 15.5 s with the AVX2 files not instrumented, 23.1 s with the
// checks below as well: docs/RELIABILITY.md). So that config compiles kernels_avx2*.cc without ASan
// (UBSan stays), and this file, which is instrumented, hands out the AVX2 table with every entry
// wrapped: before the kernel runs, each range the table's contract (cpu_kernels.h) says it reads or
// writes is checked against ASan's shadow memory in one call, and a range that is not all
// addressable aborts with ASan's description of the byte (heap-buffer-overflow, use-after-free,
// ...). That keeps what the engine's tests under ASan were there to catch: a caller that hands a
// kernel a short or freed buffer. What a kernel reads outside its own contract is checked by
// //fuzz:cpu_kernels_fuzzer, which runs the kernels instrumented (clang ASan+UBSan, exact-size
// buffers, random shapes) in every CI run.
//
// Without ASan, Avx2CpuKernels() is the plain table.
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "formats/dtype.h"
#include "kernels/cpu/cpu_kernels.h"

#if defined(__SANITIZE_ADDRESS__)
#define TPSERVE_KERNEL_BOUNDS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TPSERVE_KERNEL_BOUNDS 1
#endif
#endif

#if defined(TPSERVE_KERNEL_BOUNDS)
#include <sanitizer/asan_interface.h>
#endif

namespace tpserve {

#if defined(__x86_64__)

namespace avx2_internal {
const CpuKernels& Avx2Table();        // kernels_avx2.cc
const CpuKernels& Avx512VnniTable();  // kernels_avx2.cc
}  // namespace avx2_internal

#if defined(TPSERVE_KERNEL_BOUNDS)
namespace {

// Aborts, naming the kernel and the argument, unless [p, p + count * sizeof(T)) is addressable.
template <typename T>
void Check(const char* kernel, const char* arg, const T* p, int64_t count) {
  if (count <= 0) return;
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  void* bad = __asan_region_is_poisoned(const_cast<T*>(p), bytes);
  if (bad == nullptr) return;
  std::fprintf(stderr,
               "tpserve: CPU kernel %s: argument %s spans %zu bytes from %p, but byte %td of them "
               "is not addressable:\n",
               kernel, arg, bytes, static_cast<const void*>(p),
               static_cast<const char*>(bad) - reinterpret_cast<const char*>(p));
  __asan_describe_address(bad);
  std::abort();
}

// The activation rows of a dot call: num_x pointers, each to `count` elements.
template <typename T>
void CheckRows(const char* kernel, const char* arg, const T* const* rows, int num, int64_t count) {
  Check(kernel, arg, rows, num);
  for (int j = 0; j < num; ++j) Check(kernel, arg, rows[j], count);
}

// Cache rows t < count of head_dim elements at base + t * stride.
template <typename T>
void CheckCacheRows(const char* kernel, const char* arg, const T* base, int64_t stride,
                    int64_t count, int64_t head_dim) {
  for (int64_t t = 0; t < count; ++t) Check(kernel, arg, base + t * stride, head_dim);
}

// "dot_q4_1" for kQ4_1: the table entry's name.
std::string EntryName(DType t) {
  std::string name = "dot_" + std::string(DTypeName(t));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// One wrapper per entry, over the table `Inner` returns.
template <const CpuKernels& (*Inner)()>
struct Bounded {
  static void QuantizeQ8(const float* x, int64_t k, Q8Block* out) {
    Check("quantize_q8", "x", x, k);
    Check("quantize_q8", "out", out, k / 32);
    Inner().quantize_q8(x, k, out);
  }

  // The GGML block dots: w is num_blocks blocks of `t`, each x[j] the matching Q8 blocks (8 per
  // 256-value K-quant super-block).
  template <DType t, int kQ8PerBlock,
            void (*CpuKernels::*kEntry)(const uint8_t*, const Q8Block* const*, int, int64_t,
                                        float*)>
  static void DotBlocks(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                        float* out) {
    static const std::string name = EntryName(t);
    Check(name.c_str(), "w", w, num_blocks * BlockBytes(t));
    CheckRows(name.c_str(), "x", x, num_x, num_blocks * kQ8PerBlock);
    Check(name.c_str(), "out", out, num_x);
    (Inner().*kEntry)(w, x, num_x, num_blocks, out);
  }

  // The row groups: num_w weight rows of num_blocks blocks of `t`, block b of row i at
  // w + i * row_stride + b * block_stride (both strides >= 0).
  template <DType t,
            void (*CpuKernels::*kEntry)(const uint8_t*, int64_t, int64_t, int,
                                        const Q8Block* const*, int, int64_t, float*)>
  static void DotRowGroup(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                          const Q8Block* const* x, int num_x, int64_t num_blocks, float* out) {
    static const std::string name = EntryName(t) + "_rows";
    // The last block of the last row ends furthest out.
    const int64_t end = num_w > 0 && num_blocks > 0
                            ? (num_w - 1) * row_stride + (num_blocks - 1) * block_stride +
                                  BlockBytes(t)
                            : 0;
    Check(name.c_str(), "w", w, end);
    CheckRows(name.c_str(), "x", x, num_x, num_blocks);
    Check(name.c_str(), "out", out, num_x * kWeightRowGroup);
    (Inner().*kEntry)(w, row_stride, block_stride, num_w, x, num_x, num_blocks, out);
  }

  static void DotInt4(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
                      int64_t group_size, const Q8Block* const* x, int num_x, int64_t num_chunks,
                      float* out) {
    const int64_t groups = group_size > 0 ? (num_chunks * 32 + group_size - 1) / group_size : 0;
    Check("dot_int4", "w", w, num_chunks * 16);
    Check("dot_int4", "scales", scales, groups);
    Check("dot_int4", "zeros", zeros, groups);
    CheckRows("dot_int4", "x", x, num_x, num_chunks);
    Check("dot_int4", "out", out, num_x);
    Inner().dot_int4(w, scales, zeros, group_size, x, num_x, num_chunks, out);
  }

  static void DotFp8(const uint8_t* w, const float* scales, int64_t tile_cols,
                     const float* const* x, int num_x, int64_t n, float* out) {
    Check("dot_fp8", "w", w, n);
    Check("dot_fp8", "scales", scales, tile_cols > 0 ? (n + tile_cols - 1) / tile_cols : 0);
    CheckRows("dot_fp8", "x", x, num_x, n);
    Check("dot_fp8", "out", out, num_x);
    Inner().dot_fp8(w, scales, tile_cols, x, num_x, n, out);
  }

  template <typename W,
            void (*CpuKernels::*kEntry)(const W*, const float* const*, int, int64_t, float*)>
  static void DotDense(const W* w, const float* const* x, int num_x, int64_t n, float* out) {
    Check("dot_f32/f16/bf16", "w", w, n);
    CheckRows("dot_f32/f16/bf16", "x", x, num_x, n);
    Check("dot_f32/f16/bf16", "out", out, num_x);
    (Inner().*kEntry)(w, x, num_x, n, out);
  }

  template <void (*CpuKernels::*kEntry)(const uint16_t*, float*, int64_t)>
  static void Widen(const uint16_t* src, float* dst, int64_t n) {
    Check("f16/bf16_to_f32", "src", src, n);
    Check("f16/bf16_to_f32", "dst", dst, n);
    (Inner().*kEntry)(src, dst, n);
  }

  static void Narrow(const float* src, uint16_t* dst, int64_t n) {
    Check("f32_to_f16", "src", src, n);
    Check("f32_to_f16", "dst", dst, n);
    Inner().f32_to_f16(src, dst, n);
  }

  static void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
    Check("rms_norm", "x", x, n);
    Check("rms_norm", "w", w, n);
    Check("rms_norm", "y", y, n);
    Inner().rms_norm(x, w, n, eps, y);
  }
  static void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
    Check("silu_mul", "gate", gate, n);
    Check("silu_mul", "up", up, n);
    Check("silu_mul", "out", out, n);
    Inner().silu_mul(gate, up, n, out);
  }
  static void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
    Check("gelu_tanh_mul", "gate", gate, n);
    Check("gelu_tanh_mul", "up", up, n);
    Check("gelu_tanh_mul", "out", out, n);
    Inner().gelu_tanh_mul(gate, up, n, out);
  }
  static void Add(const float* a, const float* b, int64_t n, float* out) {
    Check("add", "a", a, n);
    Check("add", "b", b, n);
    Check("add", "out", out, n);
    Inner().add(a, b, n, out);
  }
  static void Axpy(float a, const float* x, int64_t n, float* y) {
    Check("axpy", "x", x, n);
    Check("axpy", "y", y, n);
    Inner().axpy(a, x, n, y);
  }
  static void Scale(float a, int64_t n, float* y) {
    Check("scale", "y", y, n);
    Inner().scale(a, n, y);
  }
  static float ExpSubSum(float* x, int64_t n, float max) {
    Check("exp_sub_sum", "x", x, n);
    return Inner().exp_sub_sum(x, n, max);
  }

  template <typename K, void (*CpuKernels::*kEntry)(const float* const*, int, const K*, int64_t,
                                                    int64_t, int64_t, float, float*, int64_t)>
  static void AttnScores(const float* const* q, int num_q, const K* k, int64_t stride,
                         int64_t count, int64_t head_dim, float scale, float* scores,
                         int64_t scores_stride) {
    CheckRows("attn_scores", "q", q, num_q, head_dim);
    CheckCacheRows("attn_scores", "k", k, stride, count, head_dim);
    for (int h = 0; h < num_q; ++h)
      Check("attn_scores", "scores", scores + h * scores_stride, count);
    (Inner().*kEntry)(q, num_q, k, stride, count, head_dim, scale, scores, scores_stride);
  }

  template <typename V, void (*CpuKernels::*kEntry)(const float* const*, int, const V*, int64_t,
                                                    int64_t, int64_t, float* const*)>
  static void AttnAccumulate(const float* const* p, int num_heads, const V* v, int64_t stride,
                             int64_t count, int64_t head_dim, float* const* out) {
    CheckRows("attn_accumulate", "p", p, num_heads, count);
    CheckCacheRows("attn_accumulate", "v", v, stride, count, head_dim);
    CheckRows("attn_accumulate", "out", out, num_heads, head_dim);
    (Inner().*kEntry)(p, num_heads, v, stride, count, head_dim, out);
  }

  static CpuKernels Table() {
    using K = CpuKernels;
    return {
        .quantize_q8 = QuantizeQ8,
        .dot_q8_0 = DotBlocks<DType::kQ8_0, 1, &K::dot_q8_0>,
        .dot_q4_0 = DotBlocks<DType::kQ4_0, 1, &K::dot_q4_0>,
        .dot_q4_1 = DotBlocks<DType::kQ4_1, 1, &K::dot_q4_1>,
        .dot_q5_0 = DotBlocks<DType::kQ5_0, 1, &K::dot_q5_0>,
        .dot_q5_1 = DotBlocks<DType::kQ5_1, 1, &K::dot_q5_1>,
        .dot_q4_0_rows = DotRowGroup<DType::kQ4_0, &K::dot_q4_0_rows>,
        .dot_q4_1_rows = DotRowGroup<DType::kQ4_1, &K::dot_q4_1_rows>,
        .dot_q5_0_rows = DotRowGroup<DType::kQ5_0, &K::dot_q5_0_rows>,
        .dot_q5_1_rows = DotRowGroup<DType::kQ5_1, &K::dot_q5_1_rows>,
        .dot_q8_0_rows = DotRowGroup<DType::kQ8_0, &K::dot_q8_0_rows>,
        .dot_q4_K = DotBlocks<DType::kQ4_K, 8, &K::dot_q4_K>,
        .dot_q5_K = DotBlocks<DType::kQ5_K, 8, &K::dot_q5_K>,
        .dot_q6_K = DotBlocks<DType::kQ6_K, 8, &K::dot_q6_K>,
        .dot_int4 = DotInt4,
        .dot_fp8 = DotFp8,
        .dot_f32 = DotDense<float, &K::dot_f32>,
        .dot_f16 = DotDense<uint16_t, &K::dot_f16>,
        .dot_bf16 = DotDense<uint16_t, &K::dot_bf16>,
        .f16_to_f32 = Widen<&K::f16_to_f32>,
        .bf16_to_f32 = Widen<&K::bf16_to_f32>,
        .f32_to_f16 = Narrow,
        .rms_norm = RmsNorm,
        .silu_mul = SiluMul,
        .gelu_tanh_mul = GeluTanhMul,
        .add = Add,
        .axpy = Axpy,
        .scale = Scale,
        .exp_sub_sum = ExpSubSum,
        .attn_scores = AttnScores<float, &K::attn_scores>,
        .attn_accumulate = AttnAccumulate<float, &K::attn_accumulate>,
        .attn_scores_f16 = AttnScores<uint16_t, &K::attn_scores_f16>,
        .attn_accumulate_f16 = AttnAccumulate<uint16_t, &K::attn_accumulate_f16>,
    };
  }
};

}  // namespace
#endif  // TPSERVE_KERNEL_BOUNDS

const CpuKernels& Avx2CpuKernels() {
#if defined(TPSERVE_KERNEL_BOUNDS)
  static const CpuKernels bounded = Bounded<avx2_internal::Avx2Table>::Table();
  return bounded;
#else
  return avx2_internal::Avx2Table();
#endif
}

const CpuKernels& Avx512VnniCpuKernels() {
#if defined(TPSERVE_KERNEL_BOUNDS)
  static const CpuKernels bounded = Bounded<avx2_internal::Avx512VnniTable>::Table();
  return bounded;
#else
  return avx2_internal::Avx512VnniTable();
#endif
}

#endif  // __x86_64__

bool Avx2KernelBoundsChecked() {
#if defined(TPSERVE_KERNEL_BOUNDS) && defined(__x86_64__)
  return true;
#else
  return false;
#endif
}

}  // namespace tpserve
