// One GEMM of the CUDA backend as data (GemmArgs), and what CublasLtGemm asks cuBLASLt for to
// run it (GemmRequest): the shape the algorithm heuristic is queried with, the alignments it
// may assume, whether split-K / reduction schemes are allowed, and whether one algorithm is
// pinned for every shape. MakeGemmRequest is a pure function, so the deterministic mode's
// promise (the same algorithm, without split-K, at every batch size and tensor-parallel
// degree) is tested on the host (tests/kernels/deterministic_plan_test.cc). Plain C++ header.
//
//   const GemmRequest req = MakeGemmRequest(args, /*deterministic=*/true);
//   // req is the same for every m, n, k of args' types and scales
//
// Thread-safe: value types and pure functions.
#ifndef TPSERVE_KERNELS_CUDA_GEMM_REQUEST_H_
#define TPSERVE_KERNELS_CUDA_GEMM_REQUEST_H_

#include <cstdint>
#include <string>

namespace tpserve::cuda {

enum class GemmType : int { kF32, kF16, kBF16, kE4M3 };

// How a scale tensor multiplies an fp8 operand inside the GEMM (cuBLASLt 12.9+ on sm_90; the
// layouts are in cublas_gemm.cc):
enum class GemmScale : int {
  kNone,      // no scale (not fp8, or scale 1)
  kOuterVec,  // one f32 per row of the operand: W per output channel, x per token
  kVec128,    // one f32 per 128 consecutive k values of a row (x per 1x128 group)
  kBlock128,  // one f32 per 128x128 tile (W, as fp8-block checkpoints store it)
};

// y[m, n] = x[m, k] * W^T with row-major x, W and y (see cublas_gemm.h for the TN mapping).
struct GemmArgs {
  GemmType type = GemmType::kBF16;  // of W and x
  GemmType out = GemmType::kBF16;   // of y: kF32, or kBF16 / kF16
  int64_t m = 0, n = 0, k = 0;
  const void* w = nullptr;  // [n, k], rows ldw elements apart
  int64_t ldw = 0;
  const void* x = nullptr;  // [m, k], rows ldx elements apart
  int64_t ldx = 0;
  void* y = nullptr;  // [m, n], rows ldy elements apart
  int64_t ldy = 0;
  // fp8 only: scales applied inside the GEMM (device f32; layouts in cublas_gemm.cc).
  GemmScale w_scale = GemmScale::kNone;
  const float* w_scales = nullptr;
  GemmScale x_scale = GemmScale::kNone;
  const float* x_scales = nullptr;
  // f32 [n] added to every row of y in the GEMM's epilogue (CUBLASLT_EPILOGUE_BIAS), before
  // y is rounded to its type; nullptr: none.
  const float* bias = nullptr;
};

// The alignment cuBLASLt may assume for a pointer: the largest power of two dividing the
// address, capped at 16 bytes. cuBLASLt's default assumption (256) is wrong for a pointer into
// the middle of a buffer, and the cap keeps a plan independent of where a 16-byte-aligned
// operand sits. 16 bytes is all the tensor-core kernels' vector loads need.
int PointerAlignment(const void* p);

struct GemmRequest {
  GemmType type = GemmType::kBF16;
  GemmType out = GemmType::kBF16;
  GemmScale w_scale = GemmScale::kNone;
  GemmScale x_scale = GemmScale::kNone;
  bool bias = false;  // the epilogue adds an f32 bias (an algorithm of its own)
  // The problem cublasLtMatmulAlgoGetHeuristic is asked about (m, n, k of GemmArgs and the
  // leading dimensions), and the alignments promised for W, x and y (bytes).
  int64_t query_m = 0, query_n = 0, query_k = 0;
  int64_t query_ldw = 0, query_ldx = 0, query_ldy = 0;
  int align_w = 16, align_x = 16, align_y = 16;
  // false: CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = CUBLASLT_REDUCTION_SCHEME_NONE, and an
  // algorithm is used only if its CUBLASLT_ALGO_CONFIG_SPLITK_NUM is 1 and its
  // CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME is NONE: every dot product summed in one sequence.
  bool reductions_allowed = true;
  // true: the algorithm found for the query problem is kept for every call of this
  // (type, out, scales) whatever its m, n, k and leading dimensions (cublasLtMatmulAlgoCheck
  // confirms it fits each call; a call it does not fit is FAILED_PRECONDITION, never another
  // algorithm). false: each call's own problem is queried and its answer cached.
  bool pinned = false;

  friend bool operator==(const GemmRequest&, const GemmRequest&) = default;
};

// The problem every deterministic query uses: a shape of the sizes the model runs, fixed, so
// the pinned algorithm does not depend on the batch (m), the tensor-parallel slice (n, k) or
// leading dimensions.
inline constexpr int64_t kPinnedQueryM = 128;
inline constexpr int64_t kPinnedQueryN = 4096;
inline constexpr int64_t kPinnedQueryK = 4096;

// What to ask for `args`. Not deterministic: the call's own problem and pointer alignments,
// any reduction scheme, a plan per problem. Deterministic: the fixed query problem,
// 16-byte alignments (the caller stages operands that are not: CublasLtGemm refuses them), no
// split-K or reduction scheme, one pinned algorithm per (type, out, w_scale, x_scale, bias).
GemmRequest MakeGemmRequest(const GemmArgs& args, bool deterministic);

// The GEMM CudaMatMul runs for y[m, n] = x[m, k] * W^T with W of `type` (rows `ldw` elements
// apart), x and y dense (ldx = k, ldy = n): bf16 W writes y in its own type (bf16, or f32
// when y_f32); f16 and f32 W write f32 (narrowed after). Pointers, scales and bias unset.
GemmArgs MatMulGemmArgs(GemmType type, int64_t m, int64_t n, int64_t k, int64_t ldw, bool y_f32);

// The scaled fp8 GEMM of y[m, n] = x_q[m, k] * W^T for e4m3 W (rows `ldw` bytes apart) and x
// quantized into dense scratch: scales per output channel and per token (kOuterVec both), or
// with `block128` per 128x128 tile of W and per 1x128 group of x (kBlock128 / kVec128); y in
// its own type (bf16, or f32 when y_f32). Pointers unset.
GemmArgs Fp8ScaledGemmArgs(bool block128, int64_t m, int64_t n, int64_t k, int64_t ldw,
                           bool y_f32);

// cuBLASLt's BLK128x128_32F scale tensor for W [n, k] (kBlock128; the citations are in
// cublas_gemm.cc): one f32 per 128x128 tile, the tiles of one 128-row band of W contiguous,
// bands `ld` floats apart, ld = round_up(ceil(k / 128), 4) (16-byte rows). W's element (r, c)
// is multiplied by scale[Index(r, c)] = scale[(r / 128) * ld + c / 128].
struct Block128ScaleLayout {
  int64_t n_tiles = 0;  // ceil(n / 128): 128-row bands
  int64_t k_tiles = 0;  // ceil(k / 128): tiles of one band
  int64_t ld = 0;       // floats from one band to the next
  int64_t floats() const { return n_tiles * ld; }
  int64_t Index(int64_t r, int64_t c) const { return (r / 128) * ld + c / 128; }
};
Block128ScaleLayout CublasBlock128Layout(int64_t n, int64_t k);

// The 2-D copy (cudaMemcpy2D's arguments) that puts a matrix's tile scales, bands
// `stored_stride` floats apart as WeightMatrix holds them (checkpoint order: band-major,
// kernels/weight_matrix.h), into `layout`: k_tiles floats of each of n_tiles bands.
struct ScaleRepack {
  int64_t dst_pitch_bytes = 0;
  int64_t src_pitch_bytes = 0;
  int64_t width_bytes = 0;
  int64_t height = 0;
};
ScaleRepack Block128ScaleRepack(const Block128ScaleLayout& layout, int64_t stored_stride);

// "bf16 x bf16 -> f32 scales none/none query m=128 n=4096 k=4096 ld 4096/4096/4096 align
// 16/16/16 no-split-K pinned" (" +bias" after the scales where the epilogue adds one): for
// logs and test failures.
std::string GemmRequestString(const GemmRequest& request);
const char* GemmTypeName(GemmType type);
const char* GemmScaleName(GemmScale scale);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_GEMM_REQUEST_H_
