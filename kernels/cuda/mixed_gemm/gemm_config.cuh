// The CUTLASS 3.x types of one mixed GEMM configuration (weight type x tile x output type),
// and the host code that runs it: included by one .cu per (weight type, tile), which
// instantiates it for bf16 and f32 y. What the library does is in README.md; the choices here:
//  * A = the narrow weights, as a tuple (Narrow, float scale[, float zero]) so the collective
//    runs ConvertAndScale[WithZero] staged in f32 (scale type != MMA type), then converts to
//    bf16; int4 as cutlass::int4b_t in the reordered layout (prepared_layout.h), fp8 as
//    float_e4m3_t in the checkpoint's row-major (K-major) rows.
//  * B = x, bf16, K-major ([m, k] row-major); D = y column-major over (n, m, L): y[L][m][n].
//  * Cooperative warp-specialized kernel (2 consumer warpgroups of 64 weight rows), TMA
//    epilogue with no C operand, 1x1x1 cluster, pipeline stages filling shared memory.
//  * Stream-K scheduler used as split-K with deterministic reduction, or data-parallel when
//    splits = 1; never the stream-K heuristic, whose work split depends on the total tile
//    count (and so on L, which would break the chunk-by-chunk bit identity).
#ifndef TPSERVE_KERNELS_CUDA_MIXED_GEMM_GEMM_CONFIG_CUH_
#define TPSERVE_KERNELS_CUDA_MIXED_GEMM_GEMM_CONFIG_CUH_

#include <cuda_runtime.h>

// Before CUTLASS's headers: its adapter's cudaFuncSetAttribute, once per kernel and device.
#include "kernels/cuda/cached_cuda_queries.h"

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/mixed_dtype_utils.hpp"
#include "kernels/cuda/launch_cache.h"
#include "kernels/cuda/mixed_gemm/kernel_args.h"

namespace tpserve::cuda::mixed_gemm {

using ElementX = cutlass::bfloat16_t;
using StrideKMajor = cute::Stride<int64_t, cute::_1, int64_t>;

// Each thread's 8 values of a bf16 wgmma A fragment contiguous (one 32-bit shared load), no
// value shuffle: the f32 staging path converts int4b_t -> f32 eight at a time in any order.
using Int4LayoutAtom = decltype(cutlass::compute_memory_reordering_atom<ElementX>());
using Int4Layout = decltype(cute::tile_to_shape(
    Int4LayoutAtom{}, cute::Layout<cute::Shape<int, int, int>, StrideKMajor>{}));

inline Int4Layout MakeInt4Layout(int n, int k, int batches) {
  return cute::tile_to_shape(Int4LayoutAtom{}, cute::make_shape(n, k, batches));
}

template <bool kInt4, class TileShape, class ElementY>
struct MixedGemmConfig {
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Narrow = cute::conditional_t<kInt4, cutlass::int4b_t, cutlass::float_e4m3_t>;
  using NarrowTuple =
      cute::conditional_t<kInt4, cute::tuple<Narrow, float, float>, cute::tuple<Narrow, float>>;
  using LayoutW = cute::conditional_t<kInt4, Int4Layout, cutlass::layout::RowMajor>;
  static constexpr int kAlignW = 128 / cutlass::sizeof_bits<Narrow>::value;
  static constexpr int kAlignY = 128 / cutlass::sizeof_bits<ElementY>::value;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void,
      cutlass::layout::ColumnMajor, kAlignY, ElementY, cutlass::layout::ColumnMajor, kAlignY,
      cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, NarrowTuple, LayoutW, kAlignW, ElementX,
      cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                      Epilogue, cutlass::gemm::StreamKScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Gemm::Arguments MakeArguments(const KernelArgs& a) {
    using Scheduler = typename Kernel::TileScheduler;
    const int64_t groups = a.k / a.group_size;
    typename Mainloop::StrideScale stride_scale{cute::_1{}, int64_t{a.n}, int64_t{a.n} * groups};
    StrideKMajor stride_x{a.x_row_elems, cute::_1{}, int64_t{a.k}};
    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {a.n, a.m, a.k, a.batches};
    if constexpr (kInt4) {
      args.mainloop = {static_cast<const Narrow*>(a.codes),
                       MakeInt4Layout(a.n, a.k, a.batches),
                       static_cast<const ElementX*>(a.x),
                       stride_x,
                       a.scales,
                       stride_scale,
                       a.group_size,
                       a.offsets};
    } else {
      StrideKMajor stride_w{a.code_row_bytes, cute::_1{}, a.code_batch};
      args.mainloop = {static_cast<const Narrow*>(a.codes),
                       stride_w,
                       static_cast<const ElementX*>(a.x),
                       stride_x,
                       a.scales,
                       stride_scale,
                       a.group_size};
    }
    typename Epilogue::StrideD stride_y{cute::_1{}, int64_t{a.n}, int64_t{a.n} * a.m};
    args.epilogue = {{1.0f, 0.0f}, nullptr, {}, static_cast<ElementY*>(a.y), stride_y};
    args.hw_info.sm_count = a.sm_count;
    args.scheduler.splits = a.splits;
    args.scheduler.reduction_mode = Scheduler::ReductionMode::Deterministic;
    args.scheduler.decomposition_mode = a.splits > 1 ? Scheduler::DecompositionMode::SplitK
                                                     : Scheduler::DecompositionMode::DataParallel;
    return args;
  }

  static int64_t Workspace(const KernelArgs& a) {
    return static_cast<int64_t>(Gemm::get_workspace_size(MakeArguments(a)));
  }

  // The kernel parameters of each argument set, built (can_implement, initialize) by its
  // first launch and reused by every later one with the same key (launch_cache.h).
  static LaunchCache<typename Gemm::Params>& ParamsCache() {
    static LaunchCache<typename Gemm::Params>* const cache =
        new LaunchCache<typename Gemm::Params>();
    return *cache;
  }

  static int Run(const KernelArgs& a) {
    const typename Gemm::Arguments args = MakeArguments(a);
    const auto stream = static_cast<cudaStream_t>(a.stream);
    bool built = false;
    typename Gemm::Params params;
    const int made = ParamsCache().Get(
        MixedGemmLaunchKey(a),
        [&](typename Gemm::Params* out) -> int {
          Gemm gemm;
          if (gemm.can_implement(args) != cutlass::Status::kSuccess) return cudaErrorInvalidValue;
          if (gemm.initialize(args, a.workspace, stream) != cutlass::Status::kSuccess) {
            const cudaError_t e = cudaGetLastError();
            return e != cudaSuccess ? e : cudaErrorInvalidValue;
          }
          *out = gemm.params();
          built = true;
          return 0;
        },
        &params);
    if (made != 0) return made;
    // A kept set of parameters: only the workspace the split-K reduction needs cleared again
    // (a memset on the stream; nothing for a data-parallel launch), as initialize did.
    if (!built && Kernel::initialize_workspace(args, a.workspace, stream) !=
                      cutlass::Status::kSuccess) {
      const cudaError_t e = cudaGetLastError();
      return e != cudaSuccess ? e : cudaErrorInvalidValue;
    }
    if (Gemm::run(params, stream) != cutlass::Status::kSuccess) {
      const cudaError_t e = cudaGetLastError();
      return e != cudaSuccess ? e : cudaErrorLaunchFailure;
    }
    return cudaGetLastError();
  }
};

// The two tiles (weight rows x tokens x k) of mixed_gemm.h's MixedGemmTile.
using DecodeTile = cute::Shape<cute::_128, cute::_16, cute::_64>;
using LargeTile = cute::Shape<cute::_128, cute::_128, cute::_64>;

template <bool kInt4, class TileShape>
int RunEitherOutput(const KernelArgs& a) {
  return a.y_f32 ? MixedGemmConfig<kInt4, TileShape, float>::Run(a)
                 : MixedGemmConfig<kInt4, TileShape, cutlass::bfloat16_t>::Run(a);
}

template <bool kInt4, class TileShape>
int64_t WorkspaceEitherOutput(const KernelArgs& a) {
  return a.y_f32 ? MixedGemmConfig<kInt4, TileShape, float>::Workspace(a)
                 : MixedGemmConfig<kInt4, TileShape, cutlass::bfloat16_t>::Workspace(a);
}

}  // namespace tpserve::cuda::mixed_gemm

#endif  // TPSERVE_KERNELS_CUDA_MIXED_GEMM_GEMM_CONFIG_CUH_
