// Device weight preparation (prepare_kernels.h): one thread per prepared code byte (two
// nibbles, looked up through the inverse layout, so no two threads write one byte) and one per
// (group, row) scale. Load-time work: simple, not tuned.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/mixed_gemm/prepare_kernels.h"
#include "kernels/cuda/mixed_gemm/prepared_layout.h"

namespace tpserve::cuda {
namespace {

using mixed_gemm::EngineInt4Code;
using mixed_gemm::Int4Offset;
using mixed_gemm::PreparedInt4Position;
using mixed_gemm::SignedNibble;

constexpr int kThreads = 256;

unsigned Blocks(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

__device__ float LoadF16(const void* base, int64_t i) {
  __half_raw raw;
  raw.x = static_cast<const uint16_t*>(base)[i];
  return __half2float(__half(raw));
}

__global__ void PrepareInt4Codes(Int4Source src, uint8_t* out) {
  const int64_t byte = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (byte >= src.n * src.k / 2) return;
  uint32_t packed = 0;
  for (int half = 0; half < 2; ++half) {
    int64_t row, col;
    PreparedInt4Position(src.n, 2 * byte + half, &row, &col);
    const auto* codes = static_cast<const uint8_t*>(src.codes) + row * src.row_bytes;
    packed |= SignedNibble(EngineInt4Code(codes, col)) << (4 * half);
  }
  out[byte] = static_cast<uint8_t>(packed);
}

__global__ void PrepareInt4Scales(Int4Source src, float* scales, float* offsets) {
  const int64_t groups = src.k / src.group_size;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;  // g * n + row
  if (i >= groups * src.n) return;
  const int64_t g = i / src.n, row = i % src.n;
  const float scale = LoadF16(src.scales, row * src.scale_stride + g);
  const float zero = LoadF16(src.zeros, row * src.scale_stride + g);
  scales[i] = scale;
  offsets[i] = Int4Offset(zero, scale);
}

__global__ void PrepareFp8ScaleGroups(Fp8ScaleSource src, float* out) {
  const int64_t groups = src.k / 128;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= groups * src.n) return;
  const int64_t g = i / src.n, row = i % src.n;
  float s = 1.0f;
  if (src.kind == 1 && src.scales != nullptr) s = src.scales[row];
  if (src.kind == 2) s = src.scales[(row / 128) * src.scale_stride + g];
  out[i] = s;
}

}  // namespace

int LaunchPrepareInt4(const Int4Source& src, void* codes, float* scales, float* offsets,
                      void* stream) {
  if (src.n <= 0 || src.k <= 0 || src.n % 16 != 0 || src.group_size <= 0 ||
      src.k % src.group_size != 0 || src.k % 32 != 0) {
    return cudaErrorInvalidValue;
  }
  const auto s = static_cast<cudaStream_t>(stream);
  PrepareInt4Codes<<<Blocks(src.n * src.k / 2), kThreads, 0, s>>>(src,
                                                                  static_cast<uint8_t*>(codes));
  PrepareInt4Scales<<<Blocks(src.n * (src.k / src.group_size)), kThreads, 0, s>>>(src, scales,
                                                                                  offsets);
  return cudaGetLastError();
}

int LaunchPrepareFp8Scales(const Fp8ScaleSource& src, float* scales, void* stream) {
  if (src.n <= 0 || src.k <= 0 || src.k % 128 != 0 || src.kind < 0 || src.kind > 2) {
    return cudaErrorInvalidValue;
  }
  PrepareFp8ScaleGroups<<<Blocks(src.n * (src.k / 128)), kThreads, 0,
                          static_cast<cudaStream_t>(stream)>>>(src, scales);
  return cudaGetLastError();
}

}  // namespace tpserve::cuda
