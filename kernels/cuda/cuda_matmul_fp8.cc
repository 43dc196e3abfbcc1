// CudaMatMul's fp8 GEMMs for m > 16 (cuda_matmul.h): x quantized to e4m3 with a scale per row
// or per 1x128 group, then one cuBLASLt GEMM that applies the activation and weight scales
// inside and writes y in its own type: no f32 round trip, no separate scale pass, and the
// 128x128-tile weights are read as they are stored (no per-call decode of the matrix).
// Scale layouts: cublas_gemm.cc.
#include <cuda_runtime_api.h>

#include "base/status_macros.h"
#include "kernels/cuda/cuda_matmul.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/quant_kernels.h"

namespace tpserve::cuda {
namespace {

// y = x_q * W^T (gemm_request.h's Fp8ScaledGemmArgs) on W's codes, rows row_bytes apart.
GemmArgs Fp8Args(bool block128, const WeightMatrix& w, int64_t m, const void* x_fp8, void* y,
                 bool y_f32) {
  GemmArgs g = Fp8ScaledGemmArgs(block128, m, w.rows, w.cols, w.row_bytes, y_f32);
  g.w = w.data;
  g.x = x_fp8;
  g.y = y;
  return g;
}

}  // namespace

absl::Status CudaMatMul::Fp8RowScaledGemm(const void* x, int64_t m, const WeightMatrix& w, void* y,
                                          bool y_f32, void* stream) {
  const int64_t n = w.rows, k = w.cols;
  TP_RETURN_IF_ERROR(x_fp8_.Reserve(m * k, stream));
  TP_RETURN_IF_ERROR(x_scales_.Reserve(m * 4, stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchQuantizeRowsFp8(
      x, m, k, w.activation_scale_ub, x_fp8_.as<uint8_t>(), x_scales_.as<float>(), stream)));
  const float* w_scales = static_cast<const float*>(w.scales);
  if (w.format.kind == FormatKind::kF8E4M3 || w_scales == nullptr) {
    // Plain fp8 (scale 1): the outer-vector mode takes a vector for each operand.
    TP_RETURN_IF_ERROR(w_scales_.Reserve(n * 4, stream));
    TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchFillF32(w_scales_.as<float>(), n, 1.0f, stream)));
    w_scales = w_scales_.as<float>();
  }
  GemmArgs g = Fp8Args(/*block128=*/false, w, m, x_fp8_.data(), y, y_f32);
  g.w_scales = w_scales;
  g.x_scales = x_scales_.as<float>();
  return gemm_->Run(g, stream);
}

absl::Status CudaMatMul::Fp8BlockScaledGemm(const void* x, int64_t m, const WeightMatrix& w,
                                            void* y, bool y_f32, void* stream) {
  const int64_t k = w.cols;
  // cuBLASLt reads the tile scales in its BLK128x128 layout (gemm_request.h, checked against
  // the CPU's decode in gemm_request_test.cc): bands of round_up(k_tiles, 4) floats. A
  // checkpoint's bands of another length, or a chunk's (a window into its matrix's bands), are
  // copied into that layout: ceil(n / 128) short rows, far less than one activation row.
  const Block128ScaleLayout layout = CublasBlock128Layout(w.rows, k);
  TP_RETURN_IF_ERROR(x_fp8_.Reserve(m * k, stream));
  TP_RETURN_IF_ERROR(x_scales_.Reserve(layout.k_tiles * m * 4, stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchQuantizeGroupsFp8(
      x, m, k, w.activation_scale_ub, x_fp8_.as<uint8_t>(), x_scales_.as<float>(), stream)));
  const float* w_scales = static_cast<const float*>(w.scales);
  if (w.scale_stride != layout.ld || PointerAlignment(w_scales) < 16) {
    const ScaleRepack copy = Block128ScaleRepack(layout, w.scale_stride);
    TP_RETURN_IF_ERROR(w_scales_.Reserve(layout.floats() * 4, stream));
    TP_RETURN_IF_ERROR(TPK_CUDA(cudaMemcpy2DAsync(
        w_scales_.data(), copy.dst_pitch_bytes, w_scales, copy.src_pitch_bytes, copy.width_bytes,
        copy.height, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream))));
    w_scales = w_scales_.as<float>();
  }
  GemmArgs g = Fp8Args(/*block128=*/true, w, m, x_fp8_.data(), y, y_f32);
  g.w_scales = w_scales;
  g.x_scales = x_scales_.as<float>();
  return gemm_->Run(g, stream);
}

}  // namespace tpserve::cuda
