// The experts' grouped GEMMs (moe_grouped_gemm.h): CUTLASS 3.x sm90 ptr-array grouped GEMMs
// (GroupProblemShape, problem sizes and every per-group pointer, stride and scale layout in
// device memory) and the small kernels that write their arguments from the device grouping.
// Four instantiations in this one file: {bf16, fp8 e4m3 with 1x128 x 128x128 block scales in
// the mainloop} x {bf16 D (gate, up), f32 D (the chunked down)}. C is void (no source: D =
// accumulators). Hopper only (sm_90a: wgmma and TMA); compile cost: README.md.
#include <cuda_runtime.h>

#include <cstdint>

// Before CUTLASS's headers: its adapter's cudaFuncSetAttribute, once per kernel and device.
#include "kernels/cuda/cached_cuda_queries.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/detail/blockwise_scale_layout.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "kernels/cuda/launch_cache.h"
#include "kernels/cuda/moe_grouped_gemm.h"

namespace tpserve::cuda {
namespace {

using namespace cute;
using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using LayoutA = cutlass::layout::RowMajor;     // x rows [m, k]
using LayoutB = cutlass::layout::ColumnMajor;  // W [n, k] row-major: B = W^T, K-major
using LayoutD = cutlass::layout::RowMajor;
using ClusterShape = Shape<_1, _1, _1>;
using ScaleConfig = cutlass::detail::Sm90BlockwiseScaleConfig<1, 128, 128>;
using LayoutSFA = decltype(ScaleConfig::deduce_layoutSFA());
using LayoutSFB = decltype(ScaleConfig::deduce_layoutSFB());

template <typename ElementD, bool kFp8>
struct Grouped {
  using ElementAB = std::conditional_t<kFp8, cutlass::float_e4m3_t, cutlass::bfloat16_t>;
  static constexpr bool kIsFp8 = kFp8;
  static constexpr int kAlignAB = 16 / sizeof(ElementAB);
  static constexpr int kAlignD = 16 / sizeof(ElementD);
  using TileShape = std::conditional_t<kFp8, Shape<_128, _128, _128>, Shape<_128, _128, _64>>;
  using KernelSchedule =
      std::conditional_t<kFp8,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperativeFP8Blockwise,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlignD,
      ElementD, LayoutD*, kAlignD, cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative,
      cutlass::epilogue::fusion::LinearCombination<ElementD, float, void, float>>::CollectiveOp;
  using GmemA = std::conditional_t<kFp8, cute::tuple<LayoutA*, LayoutSFA*>, LayoutA*>;
  using GmemB = std::conditional_t<kFp8, cute::tuple<LayoutB*, LayoutSFB*>, LayoutB*>;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementAB, GmemA, kAlignAB, ElementAB,
      GmemB, kAlignAB, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  using Problem = typename ProblemShape::UnderlyingProblemShape;

  static constexpr int64_t kBytesPerGroup =
      sizeof(Problem) + 3 * sizeof(void*) + sizeof(StrideA) + sizeof(StrideB) + sizeof(StrideD) +
      (kFp8 ? 2 * sizeof(void*) + sizeof(LayoutSFA) + sizeof(LayoutSFB) : 0);
  static_assert(kBytesPerGroup <= kMoeGroupedBytesPerGroup,
                "kMoeGroupedBytesPerGroup is no bound of CUTLASS's argument bytes");

  // The argument arrays, carved from one scratch buffer, each 128-byte aligned.
  struct Arrays {
    Problem* problems;
    const ElementAB** a;
    StrideA* sa;
    const ElementAB** b;
    StrideB* sb;
    ElementD** d;
    StrideD* sd;
    const float** sfa;
    LayoutSFA* lsfa;
    const float** sfb;
    LayoutSFB* lsfb;
    int64_t bytes;
  };
  static Arrays Carve(void* scratch, int64_t groups) {
    Arrays r{};
    uintptr_t at = reinterpret_cast<uintptr_t>(scratch);
    const uintptr_t start = at;
    auto take = [&](auto*& p, int64_t elem_bytes) {
      at = (at + 127) / 128 * 128;
      p = reinterpret_cast<std::remove_reference_t<decltype(p)>>(at);
      at += groups * elem_bytes;
    };
    take(r.problems, sizeof(Problem));
    take(r.a, sizeof(void*));
    take(r.sa, sizeof(StrideA));
    take(r.b, sizeof(void*));
    take(r.sb, sizeof(StrideB));
    take(r.d, sizeof(void*));
    take(r.sd, sizeof(StrideD));
    if constexpr (kFp8) {
      take(r.sfa, sizeof(void*));
      take(r.lsfa, sizeof(LayoutSFA));
      take(r.sfb, sizeof(void*));
      take(r.lsfb, sizeof(LayoutSFB));
    }
    r.bytes = static_cast<int64_t>((at + 127) / 128 * 128 - start);
    return r;
  }

  static typename Gemm::Arguments Args(const Arrays& r, int64_t groups, int sm_count) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = sm_count;
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {static_cast<int>(groups), r.problems, nullptr};
    if constexpr (kFp8) {
      args.mainloop = {r.a, r.sa, r.b, r.sb, r.sfa, r.lsfa, r.sfb, r.lsfb};
    } else {
      args.mainloop = {r.a, r.sa, r.b, r.sb};
    }
    args.epilogue = {{}, nullptr, nullptr, r.d, r.sd};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.hw_info = hw;
    return args;
  }
};

template <typename G>
__global__ void WriteArguments(MoeGemmCall call, typename G::Arrays r) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= MoeGroupCount(call)) return;
  const MoeGemmGroup grp = MoeGemmGroupFor(call, call.offsets, call.weights, g);
  const int64_t s = MoeCompactedSlot(call, call.offsets, g);
  r.problems[s] = typename G::Problem(grp.m, grp.n, grp.k);
  r.a[s] = static_cast<const typename G::ElementAB*>(grp.a);
  r.b[s] = static_cast<const typename G::ElementAB*>(grp.b);
  r.d[s] = static_cast<typename std::remove_pointer_t<decltype(r.d)>>(grp.d);
  typename G::StrideA sa{};
  get<0>(sa) = grp.lda;
  r.sa[s] = sa;
  typename G::StrideB sb{};
  get<0>(sb) = grp.ldb;
  r.sb[s] = sb;
  typename G::StrideD sd{};
  get<0>(sd) = grp.ldd;
  r.sd[s] = sd;
  if constexpr (G::kIsFp8) {
    const int32_t k_blocks = grp.k / static_cast<int32_t>(kMoeScaleTile);
    const int32_t n_blocks = static_cast<int32_t>(MoeCeilDiv(grp.n, kMoeScaleTile));
    r.sfa[s] = grp.sfa;
    r.lsfa[s] = LayoutSFA(
        make_shape(make_shape(Int<1>{}, grp.m), make_shape(Int<128>{}, k_blocks), int32_t{1}),
        make_stride(make_stride(Int<0>{}, Int<1>{}),
                    make_stride(Int<0>{}, static_cast<int32_t>(grp.sfa_k_stride)), int32_t{0}));
    r.sfb[s] = grp.sfb;
    r.lsfb[s] = LayoutSFB(
        make_shape(make_shape(Int<128>{}, n_blocks), make_shape(Int<128>{}, k_blocks),
                   int32_t{1}),
        make_stride(make_stride(Int<0>{}, Int<1>{}),
                    make_stride(Int<0>{}, static_cast<int32_t>(grp.sfb_k_stride)), int32_t{0}));
  }
}

__global__ void ScalesMnMajor(const MoeGemmWeight* weights, int64_t num_weights, int64_t k_tiles,
                              int64_t n_tiles, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t per = k_tiles * n_tiles;
  if (i >= num_weights * per) return;
  const int64_t w = i / per, j = (i % per) / n_tiles, n = i % n_tiles;
  out[MoeScaleMnMajorIndex(w, n, j, k_tiles, n_tiles)] =
      weights[w].scales[n * weights[w].scale_stride + j];
}

// What a grouped launch's set-up depends on: the arrays' scratch (Carve's pointers follow from
// it and the group count), the group count and the SMs. The problem sizes and pointers are
// written on the device (WriteArguments), so one set of parameters serves every step.
LaunchKey GroupedKey(const void* scratch, int64_t groups, int sm_count) {
  return {KeyWord(scratch), groups, sm_count};
}

// CUTLASS's workspace for `groups`, once per (groups, SMs) of each instantiation.
template <typename G>
int64_t GemmWorkspace(int64_t groups, int sm_count) {
  static LaunchCache<int64_t>* const sizes = new LaunchCache<int64_t>();
  int64_t bytes = 0;
  sizes->Get(
      GroupedKey(nullptr, groups, sm_count),
      [&](int64_t* out) {
        const typename G::Arrays r = G::Carve(nullptr, groups);
        *out = static_cast<int64_t>(G::Gemm::get_workspace_size(G::Args(r, groups, sm_count)));
        return 0;
      },
      &bytes);
  return bytes;
}

template <typename G>
int64_t ScratchBytes(int64_t groups, int sm_count) {
  return G::Carve(nullptr, groups).bytes + GemmWorkspace<G>(groups, sm_count);
}

template <typename G>
int Launch(const MoeGemmCall& call, int sm_count, void* scratch, int64_t scratch_bytes,
           void* stream) {
  const int64_t groups = MoeGroupCount(call);
  if (groups == 0) return 0;
  const typename G::Arrays r = G::Carve(scratch, groups);
  const int64_t workspace = GemmWorkspace<G>(groups, sm_count);
  if (r.bytes + workspace > scratch_bytes) return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  constexpr int kThreads = 128;
  WriteArguments<G><<<static_cast<unsigned>((groups + kThreads - 1) / kThreads), kThreads, 0,
                      s>>>(call, r);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return static_cast<int>(e);
  // The kernel parameters, built (can_implement, initialize) by the first launch of each key
  // and reused after (launch_cache.h).
  static LaunchCache<typename G::Gemm::Params>* const kept =
      new LaunchCache<typename G::Gemm::Params>();
  const typename G::Gemm::Arguments args = G::Args(r, groups, sm_count);
  void* gemm_workspace = static_cast<uint8_t*>(scratch) + r.bytes;
  bool built = false;
  typename G::Gemm::Params params;
  const int made = kept->Get(
      GroupedKey(scratch, groups, sm_count),
      [&](typename G::Gemm::Params* out) -> int {
        typename G::Gemm gemm;
        if (gemm.can_implement(args) != cutlass::Status::kSuccess) {
          return static_cast<int>(cudaErrorNotSupported);
        }
        if (gemm.initialize(args, gemm_workspace, s) != cutlass::Status::kSuccess) {
          return static_cast<int>(cudaErrorLaunchFailure);
        }
        *out = gemm.params();
        built = true;
        return 0;
      },
      &params);
  if (made != 0) return made;
  if (!built && G::Kernel::initialize_workspace(args, gemm_workspace, s) !=
                    cutlass::Status::kSuccess) {
    return static_cast<int>(cudaErrorLaunchFailure);
  }
  if (G::Gemm::run(params, s) != cutlass::Status::kSuccess) {
    return static_cast<int>(cudaErrorLaunchFailure);
  }
  return static_cast<int>(cudaGetLastError());
}

using Bf16ToBf16 = Grouped<cutlass::bfloat16_t, false>;
using Bf16ToF32 = Grouped<float, false>;
using Fp8ToBf16 = Grouped<cutlass::bfloat16_t, true>;
using Fp8ToF32 = Grouped<float, true>;

}  // namespace

int64_t MoeGroupedGemmScratchBytes(MoeGroupedForm form, bool d_f32, int64_t groups,
                                   int sm_count) {
  switch (form) {
    case MoeGroupedForm::kBf16:
      return d_f32 ? ScratchBytes<Bf16ToF32>(groups, sm_count)
                   : ScratchBytes<Bf16ToBf16>(groups, sm_count);
    case MoeGroupedForm::kFp8Block128:
      return d_f32 ? ScratchBytes<Fp8ToF32>(groups, sm_count)
                   : ScratchBytes<Fp8ToBf16>(groups, sm_count);
    case MoeGroupedForm::kNone:
      break;
  }
  return 0;
}

LaunchResult LaunchMoeScalesMnMajor(const MoeGemmWeight* weights, int64_t num_weights,
                                    int64_t k_tiles, int64_t n_tiles, float* b_scales,
                                    void* stream) {
  const int64_t count = num_weights * k_tiles * n_tiles;
  if (count == 0) return 0;
  constexpr int kThreads = 256;
  ScalesMnMajor<<<static_cast<unsigned>((count + kThreads - 1) / kThreads), kThreads, 0,
                  static_cast<cudaStream_t>(stream)>>>(weights, num_weights, k_tiles, n_tiles,
                                                       b_scales);
  return static_cast<int>(cudaGetLastError());
}

LaunchResult LaunchMoeGroupedGemm(const MoeGemmCall& call, int sm_count, void* scratch,
                                  int64_t scratch_bytes, void* stream) {
  switch (call.form) {
    case MoeGroupedForm::kBf16:
      return call.d_f32 ? Launch<Bf16ToF32>(call, sm_count, scratch, scratch_bytes, stream)
                        : Launch<Bf16ToBf16>(call, sm_count, scratch, scratch_bytes, stream);
    case MoeGroupedForm::kFp8Block128:
      return call.d_f32 ? Launch<Fp8ToF32>(call, sm_count, scratch, scratch_bytes, stream)
                        : Launch<Fp8ToBf16>(call, sm_count, scratch, scratch_bytes, stream);
    case MoeGroupedForm::kNone:
      break;
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace tpserve::cuda
