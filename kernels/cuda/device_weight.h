// The CUDA backend's view of a WeightMatrix: which formats it multiplies, and the DeviceWeight
// (device_types.h) its kernels read. Plain C++ (no CUDA), so host tests can decode a matrix
// exactly as the kernels do (weight_decode.h).
//
//   if (CudaMatMulSupports(w.format)) LaunchEmbeddingRows(ToDeviceWeight(w), ...);
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_DEVICE_WEIGHT_H_
#define TPSERVE_KERNELS_CUDA_DEVICE_WEIGHT_H_

#include "formats/tensor_format.h"
#include "kernels/cuda/device_types.h"
#include "kernels/weight_matrix.h"

namespace tpserve::cuda {

// The formats the CUDA backend accepts: f32, f16, bf16, plain fp8, fp8 per channel, fp8
// 128x128 tiles, and int4 groups whose size is a positive multiple of 32. (No GGML blocks.)
bool CudaMatMulSupports(const TensorFormat& format);

// `w`'s stored form as the kernels see it (the act-order permutation is not part of it:
// callers gather x). REQUIRES: CudaMatMulSupports(w.format), and the stored form is on the
// device (not an int4 weight weight_placement.h replaced by the mixed GEMM's form).
DeviceWeight ToDeviceWeight(const WeightMatrix& w);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_DEVICE_WEIGHT_H_
