// The experts' projections as ONE CUTLASS 3.x sm90 ptr-array grouped GEMM per projection call
// (moe_grouped_gemm.cu: KernelPtrArrayTmaWarpSpecializedCooperative for bf16 weights,
// ...CooperativeFP8Blockwise for fp8 e4m3 weights with 128x128 block scales applied inside the
// mainloop), its problem sizes and A / B / D pointers, strides and scale layouts in DEVICE
// memory, written by a small kernel from the device grouping's expert offsets (moe_plan.h): no
// host read of the row counts is needed for these GEMMs.
//
// This header is plain C++: the argument arrays' contents as functions of the offsets
// (`__host__ __device__`: the argument kernel runs the same code that moe_grouped_gemm_test
// checks on the host against the CPU grouping), which experts take the grouped path, and the
// argument bytes. The launchers are defined in moe_grouped_gemm.cu (nvcc, CUTLASS).
//
// Groups: call.projections x call.num_experts x call.num_chunks, group g = (projection p,
// expert e, chunk c) in that nesting (gate then up in one call: p = 0 gate, 1 up; the chunked
// down: p = 0 only). Group (p, e, c) multiplies expert e's n_e = offsets[e + 1] - offsets[e]
// grouped rows (A rows offsets[e] ...) by columns [c kc, (c + 1) kc) of weight p * E + e (kc =
// k / num_chunks), into D rows num_chunks * offsets[e] + c * n_e (GroupedDownRow's layout; for
// one chunk simply offsets[e]).
//
// Zero-row groups are COMPACTED on the device: the argument kernel writes the groups with rows
// first, in (p, e, c) order, then the empty ones with M = 0 (MoeCompactedSlot). The group count
// CUTLASS takes is a host number, so the empty groups cannot be dropped from it; at the end with
// M = 0 they hold no tile, and CUTLASS's group tile scheduler (PersistentTileSchedulerSm90Group)
// walks past groups of no tiles. Their pointers are valid addresses regardless. Not run on a GPU.
#ifndef TPSERVE_KERNELS_CUDA_MOE_GROUPED_GEMM_H_
#define TPSERVE_KERNELS_CUDA_MOE_GROUPED_GEMM_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/host_device.h"

#ifndef __CUDACC__
#include "absl/types/span.h"
#include "kernels/backend.h"
#endif

namespace tpserve::cuda {

// The weight forms with a grouped GEMM; every other form keeps the per-expert MatMul path.
enum class MoeGroupedForm : int32_t {
  kNone = 0,
  kBf16 = 1,         // bf16 W x bf16 x, f32 accumulation
  kFp8Block128 = 2,  // e4m3 W (128x128 f32 tile scales) x e4m3 x (1x128 f32 group scales)
};

// The fp8 scale tile / group width.
inline constexpr int64_t kMoeScaleTile = 128;

// An upper bound of one group's argument bytes in device memory (problem shape, A / B / D
// pointers and strides, fp8: the scale pointers and layouts), checked against CUTLASS's types by
// static_assert in moe_grouped_gemm.cu, and the slack of aligning each of the arrays to 128.
inline constexpr int64_t kMoeGroupedBytesPerGroup = 256;
inline constexpr int64_t kMoeGroupedArraySlack = 12 * 128;

// One expert matrix of a call, as the argument kernel reads it (a per-call table uploaded to
// device memory).
struct MoeGemmWeight {
  const void* data = nullptr;      // [n, k] row-major, rows row_elems elements apart
  int64_t row_elems = 0;
  const float* scales = nullptr;   // fp8: [ceil(n / 128)][scale_stride] (the stored tile rows)
  int64_t scale_stride = 0;
};

// One grouped call.
struct MoeGemmCall {
  MoeGroupedForm form = MoeGroupedForm::kNone;
  int32_t num_experts = 0;
  int32_t projections = 1;  // 2: gate (p = 0) then up (p = 1) over the same A
  int32_t num_chunks = 1;
  int64_t n = 0, k = 0;     // every weight is [n, k]; chunk c is columns [c kc, (c + 1) kc)
  const int32_t* offsets = nullptr;       // device: the grouping's offsets [num_experts + 1]
  const MoeGemmWeight* weights = nullptr; // device: [projections * num_experts], p * E + e
  const void* a = nullptr;  // [a_rows, k] row-major (bf16, or e4m3 for fp8), grouped rows
  int64_t a_rows = 0;       // rows A holds (>= offsets[E]): the stride of its fp8 scales
  const float* a_scales = nullptr;  // fp8: [k / 128][a_rows] (LaunchQuantizeGroupsFp8)
  // fp8: the weights' tile scales MN-major, as CUTLASS's sm90 blockwise mainloop reads them:
  // [projections * E][k / 128][ceil(n / 128)] (LaunchMoeScalesMnMajor writes them per call).
  const float* b_scales = nullptr;
  void* d[2] = {nullptr, nullptr};  // per projection: D [*, n] rows, bf16 or f32 (d_f32)
  bool d_f32 = false;
};

// One group's GEMM: D[m, n] = A[m, k] * B[n, k]^T, leading dimensions in elements; fp8: A's
// scale (row r, k block j) at sfa[r + j * sfa_k_stride], B's (n block i, k block j) at
// sfb[i + j * sfb_k_stride].
struct MoeGemmGroup {
  int32_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  const float* sfa = nullptr;
  int64_t sfa_k_stride = 0;
  const float* sfb = nullptr;
  int64_t sfb_k_stride = 0;
};

TP_HD int64_t MoeGroupCount(const MoeGemmCall& c) {
  return static_cast<int64_t>(c.projections) * c.num_experts * c.num_chunks;
}

TP_HD int64_t MoeCeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Group g of `c` with expert offsets `offsets` (the device's on the device, the CPU grouping's
// in the test) and weight table `weights` (c.weights on the device).
TP_HD MoeGemmGroup MoeGemmGroupFor(const MoeGemmCall& c, const int32_t* offsets,
                                   const MoeGemmWeight* weights, int64_t g) {
  const int64_t chunks = c.num_chunks, experts = c.num_experts;
  const int64_t p = g / (experts * chunks), e = (g / chunks) % experts, ch = g % chunks;
  const int64_t first = offsets[e], rows = offsets[e + 1] - offsets[e];
  const int64_t kc = c.k / chunks;
  const bool fp8 = c.form == MoeGroupedForm::kFp8Block128;
  const int64_t ab_bytes = fp8 ? 1 : 2, d_bytes = c.d_f32 ? 4 : 2;
  const MoeGemmWeight& w = weights[p * experts + e];
  MoeGemmGroup o;
  o.m = static_cast<int32_t>(rows);
  o.n = static_cast<int32_t>(c.n);
  o.k = static_cast<int32_t>(kc);
  o.a = static_cast<const uint8_t*>(c.a) + (first * c.k + ch * kc) * ab_bytes;
  o.lda = c.k;
  o.b = static_cast<const uint8_t*>(w.data) + ch * kc * ab_bytes;
  o.ldb = w.row_elems;
  o.d = static_cast<uint8_t*>(c.d[p]) + (chunks * first + ch * rows) * c.n * d_bytes;
  o.ldd = c.n;
  if (fp8) {
    const int64_t k_tiles = c.k / kMoeScaleTile, n_tiles = MoeCeilDiv(c.n, kMoeScaleTile);
    const int64_t first_tile = ch * kc / kMoeScaleTile;
    o.sfa = c.a_scales + first_tile * c.a_rows + first;
    o.sfa_k_stride = c.a_rows;
    o.sfb = c.b_scales + (p * experts + e) * k_tiles * n_tiles + first_tile * n_tiles;
    o.sfb_k_stride = n_tiles;
  }
  return o;
}

// Where group g's arguments go: the groups with rows first, in g order, then the empty ones.
TP_HD int64_t MoeCompactedSlot(const MoeGemmCall& c, const int32_t* offsets, int64_t g) {
  const int64_t chunks = c.num_chunks, experts = c.num_experts;
  const int64_t p = g / (experts * chunks), e = (g / chunks) % experts, ch = g % chunks;
  int64_t busy = 0, busy_before = 0;  // experts with rows: all, and before e
  for (int64_t i = 0; i < experts; ++i) {
    const bool has = offsets[i + 1] > offsets[i];
    busy += has ? 1 : 0;
    busy_before += has && i < e ? 1 : 0;
  }
  const int64_t idle = experts - busy, idle_before = e - busy_before;
  if (offsets[e + 1] > offsets[e]) return (p * busy + busy_before) * chunks + ch;
  return c.projections * busy * chunks + (p * idle + idle_before) * chunks + ch;
}

// The MN-major index of weight w's scale (n block i, k block j) in MoeGemmCall::b_scales
// (the stored one is at weights[w].scales[i * scale_stride + j]).
TP_HD int64_t MoeScaleMnMajorIndex(int64_t w, int64_t i, int64_t j, int64_t k_tiles,
                                   int64_t n_tiles) {
  return (w * k_tiles + j) * n_tiles + i;
}

// Device argument bytes of a call of `groups` groups (the arrays CUTLASS reads, each aligned
// to 128 bytes): at most groups * kMoeGroupedBytesPerGroup + kMoeGroupedArraySlack.
TP_HD int64_t MoeGroupedArgumentBytesBound(int64_t groups) {
  return groups * kMoeGroupedBytesPerGroup + kMoeGroupedArraySlack;
}

// ---- Launchers (moe_grouped_gemm.cu). Each queues its kernels on `stream` and returns a
// cudaError_t as int (0: success); a CUTLASS refusal (can_implement, initialize, run) is
// reported as cudaErrorNotSupported / cudaErrorLaunchFailure.

// Bytes LaunchMoeGroupedGemm needs in `scratch` for a call of `groups` groups on `sm_count`
// SMs: the argument arrays (<= MoeGroupedArgumentBytesBound) and CUTLASS's workspace.
int64_t MoeGroupedGemmScratchBytes(MoeGroupedForm form, bool d_f32, int64_t groups,
                                   int sm_count);

// b_scales[MoeScaleMnMajorIndex(w, i, j)] = weights[w].scales[i * scale_stride + j] for the
// num_weights weights of the (device) table, k_tiles x n_tiles each.
LaunchResult LaunchMoeScalesMnMajor(const MoeGemmWeight* weights, int64_t num_weights,
                                    int64_t k_tiles, int64_t n_tiles, float* b_scales,
                                    void* stream);

// The argument kernel, then the grouped GEMM. REQUIRES: call as MoeGroupedFormFor admits (the
// alignments), scratch of MoeGroupedGemmScratchBytes bytes, 128-byte aligned.
LaunchResult LaunchMoeGroupedGemm(const MoeGemmCall& call, int sm_count, void* scratch,
                                  int64_t scratch_bytes, void* stream);

#ifndef __CUDACC__

// Which grouped GEMM the experts take, or kNone (the per-expert MatMul path): kNone in
// deterministic mode (the per-expert path's batch-invariant plans are what it promises), off
// compute capability 9.0 (sm_90a SASS only), and unless every gate, up and down matrix is in
// one of the two forms with nothing else to apply (no bias, no act-order permutation), the
// TMA alignments hold (16-byte rows and base pointers, k a multiple of 8 bf16 / 128 fp8
// elements, chunks of whole 128-column tiles for fp8, n a multiple of 8) and, for fp8, all
// gate / up matrices share one activation scale bound and all down matrices one (x is
// quantized once per call, not per expert).
MoeGroupedForm MoeGroupedFormFor(absl::Span<const Backend::ExpertMlp> experts,
                                 int64_t num_chunks, bool deterministic,
                                 int compute_capability);

#endif  // __CUDACC__

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_MOE_GROUPED_GEMM_H_
