#include "kernels/cuda/device_weight.h"

#include "kernels/check.h"

namespace tpserve::cuda {

bool CudaMatMulSupports(const TensorFormat& format) {
  switch (format.kind) {
    case FormatKind::kF32:
    case FormatKind::kF16:
    case FormatKind::kBF16:
    case FormatKind::kF8E4M3:
    case FormatKind::kFp8PerChannel:
    case FormatKind::kFp8Block128: return true;
    case FormatKind::kInt4Group: return format.group_size > 0 && format.group_size % 32 == 0;
    default: return false;
  }
}

DeviceWeight ToDeviceWeight(const WeightMatrix& w) {
  // A weight placed in the mixed GEMM's form (weight_placement.h) may have no stored form on
  // the device: the kernels that read one (GEMV, decode, EmbeddingRows) must not get it.
  TP_CHECK(w.data != nullptr || w.rows == 0 || w.cols == 0,
           "the weight's stored form was replaced by the mixed GEMM's (placed for MatMul only)");
  DeviceWeight d;
  switch (w.format.kind) {
    case FormatKind::kF32: d.kind = WeightKind::kF32; break;
    case FormatKind::kF16: d.kind = WeightKind::kF16; break;
    case FormatKind::kBF16: d.kind = WeightKind::kBF16; break;
    case FormatKind::kF8E4M3: d.kind = WeightKind::kFp8; break;
    case FormatKind::kFp8PerChannel: d.kind = WeightKind::kFp8PerChannel; break;
    case FormatKind::kFp8Block128: d.kind = WeightKind::kFp8Block128; break;
    case FormatKind::kInt4Group: d.kind = WeightKind::kInt4Group; break;
    default: TP_CHECK(false, "weight format not supported by the CUDA backend");
  }
  d.group_size = static_cast<int32_t>(w.format.group_size);
  d.data = w.data;
  d.rows = w.rows;
  d.cols = w.cols;
  d.row_bytes = w.row_bytes;
  d.bias = w.bias;
  d.scales = w.scales;
  d.zeros = w.zeros;
  d.scale_stride = w.scale_stride;
  return d;
}

}  // namespace tpserve::cuda
