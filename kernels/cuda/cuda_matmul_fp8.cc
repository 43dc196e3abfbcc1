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

constexpr int64_t kTile = 128;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// y = x_q * W^T with the scale modes given; W is e4m3 with rows row_bytes apart.
GemmArgs Fp8Args(const WeightMatrix& w, int64_t m, const void* x_fp8, void* y, bool y_f32) {
  GemmArgs g;
  g.type = GemmType::kE4M3;
  g.out = y_f32 ? GemmType::kF32 : GemmType::kBF16;
  g.m = m;
  g.n = w.rows;
  g.k = w.cols;
  g.w = w.data;
  g.ldw = w.row_bytes;
  g.x = x_fp8;
  g.ldx = w.cols;
  g.y = y;
  g.ldy = w.rows;
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
  GemmArgs g = Fp8Args(w, m, x_fp8_.data(), y, y_f32);
  g.w_scale = GemmScale::kOuterVec;
  g.w_scales = w_scales;
  g.x_scale = GemmScale::kOuterVec;
  g.x_scales = x_scales_.as<float>();
  return gemm_->Run(g, stream);
}

absl::Status CudaMatMul::Fp8BlockScaledGemm(const void* x, int64_t m, const WeightMatrix& w,
                                            void* y, bool y_f32, void* stream) {
  const int64_t n = w.rows, k = w.cols;
  const int64_t k_tiles = CeilDiv(k, kTile), n_tiles = CeilDiv(n, kTile);
  TP_RETURN_IF_ERROR(x_fp8_.Reserve(m * k, stream));
  TP_RETURN_IF_ERROR(x_scales_.Reserve(k_tiles * m * 4, stream));
  TP_RETURN_IF_ERROR(TPK_LAUNCH(LaunchQuantizeGroupsFp8(
      x, m, k, w.activation_scale_ub, x_fp8_.as<uint8_t>(), x_scales_.as<float>(), stream)));
  // cuBLASLt reads the tile scales as rows of round_up(k_tiles, 4) floats. A checkpoint's rows
  // of another length, or a chunk's (a window into its matrix's rows), are copied into that
  // layout: ceil(n / 128) short rows, far less than one activation row.
  const int64_t ld = CeilDiv(k_tiles, 4) * 4;
  const float* w_scales = static_cast<const float*>(w.scales);
  if (w.scale_stride != ld || PointerAlignment(w_scales) < 16) {
    TP_RETURN_IF_ERROR(w_scales_.Reserve(n_tiles * ld * 4, stream));
    TP_RETURN_IF_ERROR(TPK_CUDA(
        cudaMemcpy2DAsync(w_scales_.data(), ld * 4, w_scales, w.scale_stride * 4, k_tiles * 4,
                          n_tiles, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream))));
    w_scales = w_scales_.as<float>();
  }
  GemmArgs g = Fp8Args(w, m, x_fp8_.data(), y, y_f32);
  g.w_scale = GemmScale::kBlock128;
  g.w_scales = w_scales;
  g.x_scale = GemmScale::kVec128;
  g.x_scales = x_scales_.as<float>();
  return gemm_->Run(g, stream);
}

}  // namespace tpserve::cuda
