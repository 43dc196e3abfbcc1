// RunMixedGemm and MixedGemmWorkspaceBytes (mixed_gemm.h): checks a call against what the
// kernels need and dispatches to the compiled configuration of its plan.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/launch_cache.h"
#include "kernels/cuda/mixed_gemm/kernel_args.h"
#include "kernels/cuda/mixed_gemm/mixed_gemm.h"

namespace tpserve::cuda {
namespace {

using mixed_gemm::KernelArgs;

// `a` with only the fields the workspace depends on (its shape, output type, split and SMs).
KernelArgs ShapeOnly(const KernelArgs& a) {
  KernelArgs s;
  s.n = a.n;
  s.m = a.m;
  s.k = a.k;
  s.batches = a.batches;
  s.y_f32 = a.y_f32;
  s.splits = a.splits;
  s.sm_count = a.sm_count;
  return s;
}

// The kernel arguments of a call; the shape fields alone for a workspace query.
KernelArgs ShapeArgs(const MixedGemmPlan& plan, int64_t m, int64_t n, int64_t k, int64_t num_chunks,
                     bool y_f32, int sm_count) {
  KernelArgs a;
  a.n = static_cast<int>(n);
  a.m = static_cast<int>(m);
  a.k = static_cast<int>(k);
  a.batches = static_cast<int>(num_chunks);
  a.y_f32 = y_f32;
  a.splits = plan.splits;
  a.sm_count = sm_count;
  a.group_size = static_cast<int>(kMixedGemmTileK);  // any divisor of k: sizes only
  a.x_row_elems = k * num_chunks;
  a.code_row_bytes = k * num_chunks;
  a.code_batch = k;
  return a;
}

// CUTLASS's get_workspace_size, once per plan and shape (every launch asks: the matmul to
// size its scratch, RunMixedGemm to check it).
int64_t Workspace(const MixedGemmPlan& plan, const KernelArgs& a) {
  static LaunchCache<int64_t>* const sizes = new LaunchCache<int64_t>();
  LaunchKey key = mixed_gemm::MixedGemmLaunchKey(ShapeOnly(a));
  key[18] = static_cast<int64_t>(plan.kind);
  key[19] = static_cast<int64_t>(plan.tile);
  int64_t bytes = 0;
  sizes->Get(
      key,
      [&](int64_t* out) {
        if (plan.kind == MixedGemmKind::kFp8) {
          *out = mixed_gemm::Fp8DecodeWorkspace(a);
        } else {
          *out = plan.tile == MixedGemmTile::kDecode ? mixed_gemm::Int4DecodeWorkspace(a)
                                                     : mixed_gemm::Int4LargeWorkspace(a);
        }
        return 0;
      },
      &bytes);
  return bytes;
}

}  // namespace

int64_t MixedGemmWorkspaceBytes(const MixedGemmPlan& plan, int64_t m, int64_t n, int64_t k,
                                int64_t num_chunks, bool y_f32, int sm_count) {
  return Workspace(plan, ShapeArgs(plan, m, n, k, num_chunks, y_f32, sm_count));
}

int RunMixedGemm(const MixedGemmWeight& w, const MixedGemmCall& call, const MixedGemmPlan& plan,
                 void* stream) {
  if (!MixedGemmCallFits(w, call, plan)) return cudaErrorInvalidValue;
  KernelArgs a = ShapeArgs(plan, call.m, w.n, w.k, call.num_chunks, call.y_f32, call.sm_count);
  if (Workspace(plan, a) > call.workspace_bytes) return cudaErrorInvalidValue;
  a.codes = w.codes;
  a.code_row_bytes = w.row_bytes;
  a.code_batch = w.k;
  a.scales = w.scales;
  a.offsets = w.offsets;
  a.group_size = static_cast<int>(w.group_size);
  a.x = call.x;
  a.x_row_elems = call.x_row_elems;
  a.y = call.y;
  a.workspace = call.workspace;
  a.stream = stream;
  if (plan.kind == MixedGemmKind::kFp8) return mixed_gemm::RunFp8Decode(a);
  return plan.tile == MixedGemmTile::kDecode ? mixed_gemm::RunInt4Decode(a)
                                             : mixed_gemm::RunInt4Large(a);
}

}  // namespace tpserve::cuda
