// CudaMatMul's mixed-input GEMM (cuda_matmul.h): int4 and fp8 weights the backend placed in
// CUTLASS's mixed-input layout (weight_placement.h) against exact bf16 activations on Hopper
// tensor cores, one launch for every chunk of a chunked product (CUTLASS's batch mode, each
// chunk with the plan of a call on that chunk alone: mixed_gemm.h).
#include <cuda_runtime_api.h>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/guarded_launch.h"

namespace tpserve::cuda {

absl::Status CudaMatMul::MixedGemm(const TensorFormat& format, const void* x,
                                   int64_t x_row_elems, int64_t m, const MixedGemmWeight& chunk,
                                   int64_t num_chunks, void* y, bool y_f32, void* stream) {
  const int64_t n = chunk.n, kc = chunk.k;
  // Deterministic mode: the batch-invariant plan (split count of k alone), so a row's floats
  // depend neither on the batch nor on the rows a tensor-parallel rank holds.
  const MixedGemmPlan plan =
      PlanMixedGemm(format, m, n, kc, options_.sm_count, options_.deterministic);
  const int64_t workspace_bytes =
      MixedGemmWorkspaceBytes(plan, m, n, kc, num_chunks, y_f32, options_.sm_count);
  if (workspace_bytes > 0) TP_RETURN_IF_ERROR(mixed_workspace_.Reserve(workspace_bytes, stream));
  // The TMA store needs a 16-byte-aligned y (a backend buffer always is; a caller's view into
  // the middle of one may not be).
  const int64_t y_bytes = num_chunks * m * n * (y_f32 ? 4 : 2);
  const bool stage_y = PointerAlignment(y) < 16;
  void* out = y;
  if (stage_y) {
    TP_RETURN_IF_ERROR(y_staged_.Reserve(y_bytes, stream));
    out = y_staged_.data();
  }
  MixedGemmCall call;
  call.x = x;
  call.x_row_elems = x_row_elems;
  call.m = m;
  call.num_chunks = num_chunks;
  call.y = out;
  call.y_f32 = y_f32;
  call.workspace = workspace_bytes > 0 ? mixed_workspace_.data() : nullptr;
  call.workspace_bytes = workspace_bytes;
  call.sm_count = options_.sm_count;
  if (!MixedGemmCallFits(chunk, call, plan)) {
    return absl::InternalError(StrCat(
        "MatMul path ", MatMulPathName(MatMulPath::kMixedGemm), " but the mixed GEMM does not "
        "take m=", m, " n=", n, " k=", kc, " chunks=", num_chunks, " x_row_elems=", x_row_elems,
        " (alignment of x, y or the prepared weight; matmul_plan.cc and mixed_gemm.h disagree)"));
  }
  TP_RETURN_IF_ERROR(GuardedLaunch(
      "CUTLASS mixed-input GEMM",
      StrCat("m=", m, " n=", n, " k=", kc, " chunks=", num_chunks),
      [&] { return RunMixedGemm(chunk, call, plan, stream); }));
  if (!stage_y) return absl::OkStatus();
  return TPK_CUDA(cudaMemcpyAsync(y, out, y_bytes, cudaMemcpyDeviceToDevice,
                                  static_cast<cudaStream_t>(stream)));
}

}  // namespace tpserve::cuda
