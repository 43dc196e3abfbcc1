// The innermost CPU loops (dot products, activation quantization, element-wise ops) as a table
// of function pointers, one table per instruction set. The scalar table is portable C++ and is
// the reference every SIMD table is tested against (cpu_kernels_test.cc).
//
//   const CpuKernels& k = CpuKernelsFor(DetectCpuIsa());
//   k.quantize_q8(x, 576, blocks); k.dot_q4_1(w_row, rows, 4, 18, out);
//
// Thread-safe: the tables are immutable and the functions are pure.
#ifndef TPSERVE_KERNELS_CPU_CPU_KERNELS_H_
#define TPSERVE_KERNELS_CPU_CPU_KERNELS_H_

#include <cstdint>
#include <string_view>

namespace tpserve {

// 32 activations quantized to int8 with one scale: x ~= d * q. The llama.cpp Q8_0 / Q8_1
// activation blocks, widened to f32 fields for speed but holding the same fp16-rounded values:
// d = fp16(max|x| / 127) and s = fp16(d * sum(q)) (what a Q4_1 weight's offset multiplies).
// `sum` is sum(q) exactly, for the K-quants' per-sub-block mins (d * sum, unrounded).
struct Q8Block {
  float d;
  float s;
  int32_t sum;
  int8_t q[32];
};

// Most activation rows one quantized dot call handles; the weight block is unpacked once for all.
inline constexpr int kMaxDotRows = 8;

// Weight rows one row-group dot call (dot_q4_0_rows ... dot_q5_1_rows) handles, one per 32-bit
// SIMD lane.
inline constexpr int kWeightRowGroup = 8;

enum class CpuIsa {
  kScalar,      // portable C++, the reference
  kAvx2,        // x86-64 AVX2 + FMA + F16C
  kAvx512Vnni,  // kAvx2's table with the int8 dots of the row groups as AVX-512 VNNI's
                // vpdpbusd (256-bit registers, AVX512VL): the same integers, so the same floats
};

std::string_view CpuIsaName(CpuIsa isa);

// Whether this CPU can run the kernels of `isa` (the scalar ones always).
bool CpuSupportsIsa(CpuIsa isa);

// The best ISA this CPU supports, unless the environment variable TPSERVE_CPU_ISA is "scalar"
// (forces the reference path) or "avx2" (AVX2 without VNNI, used only when supported).
CpuIsa DetectCpuIsa();

struct CpuKernels {
  // Quantizes k activations (k % 32 == 0) into k / 32 blocks.
  void (*quantize_q8)(const float* x, int64_t k, Q8Block* out);

  // out[j] = dot(weight row w, activation row x[j]) for j < num_x (1..kMaxDotRows), both
  // num_blocks blocks of 32 long. w points at the weight row's GGML blocks (Q8_0 / Q4_0 / Q4_1).
  void (*dot_q8_0)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  void (*dot_q4_0)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  void (*dot_q4_1)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  // Q5_0 / Q5_1 (llama.cpp's fallbacks in K-quant files for rows that are not whole
  // super-blocks): the fifth bits come from the block's 32-bit qh, then as Q4_0 / Q4_1.
  void (*dot_q5_0)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  void (*dot_q5_1)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  // The same four as row groups: out[j * kWeightRowGroup + i] = dot(weight row i, x[j]) for
  // i < num_w (1..kWeightRowGroup) and j < num_x (1..kMaxDotRows); block b of row i is at
  // w + i * row_stride + b * block_stride (rows one after another: row_stride = the row's bytes,
  // block_stride = the block's; the CPU backend's interleaved form, cpu_matmul.h: row_stride =
  // the block's bytes, block_stride = kWeightRowGroup of them). out holds num_x *
  // kWeightRowGroup floats (the slots past num_w are written and mean nothing). Every table gives the same floats: per row and x[j], with d
  // (and m, Q4_1 / Q5_1) the weight block's scalars, dx (and s) the activation block's and isum
  // the exact integer sum,
  //   sum = 0; for each block: sum = fma(isum, d * dx, sum)   (then sum = fma(m, s, sum))
  // so a row's result does not depend on the rows or the number of rows it shares a call with.
  // (Not the per-row entries' floats: a matrix takes one form or the other, cpu_matmul.cc.)
  void (*dot_q4_0_rows)(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                        const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
  void (*dot_q4_1_rows)(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                        const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
  void (*dot_q5_0_rows)(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                        const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
  void (*dot_q5_1_rows)(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                        const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
  // Q8_0 the same way (d the block's scalar, isum over its signed levels, no m term).
  void (*dot_q8_0_rows)(const uint8_t* w, int64_t row_stride, int64_t block_stride, int num_w,
                        const Q8Block* const* x, int num_x, int64_t num_blocks, float* out);
  // The K-quants: num_blocks counts 256-value super-blocks of w, each against 8 consecutive
  // Q8 blocks of every x[j]. Integer sums are exact; per 32-value sub-block the float part is
  //   Q4_K/Q5_K: d * dx * (scale * sum(q * qx)) - dmin * dx * (min * sum(qx))
  //   Q6_K:      d * dx * (scale_lo * sum_lo((q - 32) * qx) + scale_hi * sum_hi(...))
  // with dx the activation block's d and sum(qx) its exact `sum` (not the fp16-rounded s).
  void (*dot_q4_K)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  void (*dot_q5_K)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);
  void (*dot_q6_K)(const uint8_t* w, const Q8Block* const* x, int num_x, int64_t num_blocks,
                   float* out);

  // int4 groups (layout: kernels/weight_matrix.h): num_chunks chunks of 32 4-bit codes (16
  // bytes each, GGML Q4_0 nibble order) of one weight row against the Q8 blocks of x[j];
  // scales and zeros are the row's f16 pairs, one per group_size columns (a multiple of 32).
  // Per chunk, with exact integer sums and the activation block's exact sum(qx):
  //   scale * dx * (sum(code * qx) - zero * sum(qx))
  void (*dot_int4)(const uint8_t* w, const uint16_t* scales, const uint16_t* zeros,
                   int64_t group_size, const Q8Block* const* x, int num_x, int64_t num_chunks,
                   float* out);

  // fp8 e4m3 weights (decoded as F8E4M3ToF32 in formats/dtype.h, subnormals included; the NaN
  // codes 0x7F / 0xFF are never stored) against f32 activations, nothing rounded on the way:
  //   out[j] = sum over tiles t of scales[t] * sum over columns c of tile t of w[c] * x[j][c]
  // over n columns in tiles of tile_cols (the last one may be shorter), j < num_x
  // (1..kMaxDotRows). Per-channel fp8: one tile of n columns and the row's scale; 128x128
  // blocks: tile_cols = 128 and the row's line of tile scales.
  void (*dot_fp8)(const uint8_t* w, const float* scales, int64_t tile_cols,
                  const float* const* x, int num_x, int64_t n, float* out);

  // out[j] = dot(w, x[j]) over n f32 elements for j < num_x (1..kMaxDotRows).
  void (*dot_f32)(const float* w, const float* const* x, int num_x, int64_t n, float* out);
  // The same with w in f16 / bf16, widened in registers where used: the same floats as
  // widening w to f32 and calling dot_f32.
  void (*dot_f16)(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out);
  void (*dot_bf16)(const uint16_t* w, const float* const* x, int num_x, int64_t n, float* out);

  // Widen n weight elements to f32.
  void (*f16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, int64_t n);
  // Narrow n floats to f16 (the KV cache's rows): F32ToF16 (formats/dtype.h) bit for bit,
  // NaNs included.
  void (*f32_to_f16)(const float* src, uint16_t* dst, int64_t n);

  // y = x / sqrt(mean(x^2) + eps) * w over n elements (sum of squares in f64, as llama.cpp).
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* y);
  // out = gate / (1 + exp(-gate)) * up.
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  // out = gelu_tanh(gate) * up, gelu_tanh(g) = g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3)))
  // (the tanh form rewritten as a sigmoid: 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u))).
  void (*gelu_tanh_mul)(const float* gate, const float* up, int64_t n, float* out);
  // out = a + b.
  void (*add)(const float* a, const float* b, int64_t n, float* out);
  // y += a * x.
  void (*axpy)(float a, const float* x, int64_t n, float* y);
  // y *= a.
  void (*scale)(float a, int64_t n, float* y);
  // x = exp(x - max) in place; returns the sum of the results.
  float (*exp_sub_sum)(float* x, int64_t n, float max);

  // Attention over `count` cache rows of head_dim floats, row t at k + t * stride:
  // scores[h * scores_stride + t] = scale * dot(q[h], row t) for h < num_q (1..kMaxDotRows).
  void (*attn_scores)(const float* const* q, int num_q, const float* k, int64_t stride,
                      int64_t count, int64_t head_dim, float scale, float* scores,
                      int64_t scores_stride);
  // out[h][d] += sum over t < count of p[h][t] * v[t * stride + d], for d < head_dim and
  // h < num_heads (the query heads of one KV head, for one or several query rows: each V row
  // is read once for all of them);
  // each head's sums in t order, the same floats as one head at a time.
  void (*attn_accumulate)(const float* const* p, int num_heads, const float* v, int64_t stride,
                          int64_t count, int64_t head_dim, float* const* out);
  // The same two over f16 cache rows, each element widened in registers where it is used
  // rather than the block first copied to f32: the same products and the same sums, in the
  // same order, as widening the rows and calling attn_scores / attn_accumulate.
  void (*attn_scores_f16)(const float* const* q, int num_q, const uint16_t* k, int64_t stride,
                          int64_t count, int64_t head_dim, float scale, float* scores,
                          int64_t scores_stride);
  void (*attn_accumulate_f16)(const float* const* p, int num_heads, const uint16_t* v,
                              int64_t stride, int64_t count, int64_t head_dim, float* const* out);
};

const CpuKernels& ScalarCpuKernels();
// REQUIRES: the CPU supports AVX2, FMA and F16C (see DetectCpuIsa).
const CpuKernels& Avx2CpuKernels();
// REQUIRES: CpuSupportsIsa(CpuIsa::kAvx512Vnni).
const CpuKernels& Avx512VnniCpuKernels();
// True when Avx2CpuKernels() and Avx512VnniCpuKernels() check every call's ranges against
// AddressSanitizer's shadow before the kernel runs (an ASan build: kernels_bounds.cc).
bool Avx2KernelBoundsChecked();
const CpuKernels& CpuKernelsFor(CpuIsa isa);

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_KERNELS_H_
