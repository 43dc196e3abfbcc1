// Row-wise and element-wise kernels of the CUDA backend (launchers: elementwise_kernels.h).
//
// CPU reference of what each computes (bf16 in and out, f32 arithmetic, one rounding at the end):
//   RmsNorm:   for r: inv = 1 / sqrt(sum_i x[r,i]^2 / dim + eps); y[r,i] = x[r,i] * inv * w[i]
//   Rope:      for r, h, i < hd/2: th = double(pos[r]) * inv_freq[i]; (a, b) = pair i;
//              x[a], x[b] = x[a] cos th - x[b] sin th, x[a] sin th + x[b] cos th
//              (RopePart: the same over the rope_dim values at `offset` of each head)
//   SiluMul:   out[i] = g[i] / (1 + exp(-g[i])) * u[i]
//   GeluTanhMul: out[i] = g[i] / (1 + exp(-2 sqrt(2/pi) (g[i] + 0.044715 g[i]^3))) * u[i]
//   Add:       out[i] = a[i] + b[i]
//   BiasRound: y[r, c] = sums[r, c] + bias[c]  (f32 sums, rounded once to y's type)
//   SoftCap:   x[i] = cap * tanh(x[i] / cap)  (f32 in and out)
//   SumChunks: out[i] = ((c[0][i] + c[1][i]) + c[2][i]) + ...
//   Embedding: out[t, c] = id in shard ? WeightAt(table, id - first_row, c) : 0
//   Gather:    out[i, :] = x[rows[i], :]
#include "kernels/cuda/elementwise_kernels.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 256;

unsigned ElementBlocks(int64_t count) {
  // Grid-stride loops: enough blocks to fill an H200 several times, never a huge grid.
  return static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 132 * 32));
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

__global__ void RmsNormKernel(const bf16* x, const float* w, int64_t dim, float eps, bf16* y) {
  __shared__ float scratch[32];
  const bf16* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  bf16* yr = y + static_cast<int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = Bf16ToF32(xr[i]);
    ss += v * v;
  }
  ss = BlockSum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  // Each thread rewrites only the elements it read, so y may be x.
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    yr[i] = F32ToBf16(Bf16ToF32(xr[i]) * inv * w[i]);
  }
}

// One block per row: the row's sines and cosines once, then every head.
// Rotates the rope_dim values at `offset` of each head (stride head_stride) of row
// blockIdx.x; a whole-head Rope is offset 0, rope_dim == head_stride.
__global__ void RopeKernel(bf16* x, int64_t heads, int64_t head_stride, int64_t offset,
                           int64_t rope_dim, const int32_t* positions, const float* inv_freq,
                           bool interleaved) {
  extern __shared__ float table[];  // cos [half], sin [half]
  const int64_t half = rope_dim / 2;
  float* cos_t = table;
  float* sin_t = table + half;
  const double pos = static_cast<double>(positions[blockIdx.x]);
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(pos * static_cast<double>(inv_freq[i]), &s, &c);
    cos_t[i] = static_cast<float>(c);
    sin_t[i] = static_cast<float>(s);
  }
  __syncthreads();
  bf16* row = x + static_cast<int64_t>(blockIdx.x) * heads * head_stride;
  for (int64_t idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int64_t h = idx / half, i = idx % half;
    bf16* part = row + h * head_stride + offset;
    const int64_t a = interleaved ? 2 * i : i;
    const int64_t b = interleaved ? 2 * i + 1 : i + half;
    const float x0 = Bf16ToF32(part[a]), x1 = Bf16ToF32(part[b]);
    part[a] = F32ToBf16(x0 * cos_t[i] - x1 * sin_t[i]);
    part[b] = F32ToBf16(x0 * sin_t[i] + x1 * cos_t[i]);
  }
}

__global__ void SiluMulKernel(const bf16* gate, const bf16* up, int64_t count, bf16* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    const float g = Bf16ToF32(gate[i]);
    out[i] = F32ToBf16(g / (1.0f + expf(-g)) * Bf16ToF32(up[i]));
  }
}

// The same expression as the CPU reference (kernels/cpu/kernels_scalar.cc GeluTanhMul).
__global__ void GeluTanhMulKernel(const bf16* gate, const bf16* up, int64_t count, bf16* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    const float g = Bf16ToF32(gate[i]);
    const float u = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = F32ToBf16(g / (1.0f + expf(-2.0f * u)) * Bf16ToF32(up[i]));
  }
}

template <typename Out>
__global__ void BiasRoundKernel(const float* sums, const float* bias, int64_t count, int64_t n,
                                Out* y) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    const float v = sums[i] + bias[i % n];
    if constexpr (sizeof(Out) == 4) {
      y[i] = v;
    } else {
      y[i] = F32ToBf16(v);
    }
  }
}

__global__ void SoftCapF32Kernel(float* x, int64_t count, float cap) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    x[i] = cap * tanhf(x[i] / cap);
  }
}

__global__ void AddKernel(const bf16* a, const bf16* b, int64_t count, bf16* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    out[i] = F32ToBf16(Bf16ToF32(a[i]) + Bf16ToF32(b[i]));
  }
}

__global__ void SumChunksKernel(const float* chunks, int64_t num_chunks, int64_t count,
                                bf16* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    float sum = chunks[i];
    for (int64_t c = 1; c < num_chunks; ++c) sum += chunks[c * count + i];
    out[i] = F32ToBf16(sum);
  }
}

__global__ void EmbeddingKernel(DeviceWeight table, int64_t first_row, const int32_t* ids,
                                bf16* out) {
  const int64_t t = blockIdx.x;
  const int64_t local = static_cast<int64_t>(ids[t]) - first_row;
  bf16* dst = out + t * table.cols;
  const bool inside = local >= 0 && local < table.rows;
  for (int64_t c = threadIdx.x; c < table.cols; c += blockDim.x) {
    dst[c] = F32ToBf16(inside ? WeightAt(table, local, c) : 0.0f);
  }
}

__global__ void GatherRowsKernel(const bf16* x, int64_t row_elems, const int32_t* rows,
                                 bf16* out) {
  const bf16* src = x + static_cast<int64_t>(rows[blockIdx.x]) * row_elems;
  bf16* dst = out + static_cast<int64_t>(blockIdx.x) * row_elems;
  for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) dst[i] = src[i];
}

__global__ void ConvertBf16Kernel(const bf16* x, int64_t count, bool out_f16, void* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    const float v = Bf16ToF32(x[i]);
    if (out_f16) {
      static_cast<__half*>(out)[i] = __float2half_rn(fminf(fmaxf(v, -65504.0f), 65504.0f));
    } else {
      static_cast<float*>(out)[i] = v;
    }
  }
}

__global__ void F16ToBf16Kernel(const __half* x, int64_t count, bf16* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    out[i] = F32ToBf16(__half2float(x[i]));
  }
}

__global__ void ScaleBf16Kernel(bf16* x, int64_t count, float scale) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) {
    x[i] = F32ToBf16(Bf16ToF32(x[i]) * scale);
  }
}

// One block per row; rows of padding sequences (table_offset -1) become zeros.
__global__ void ZeroPaddingRowsKernel(bf16* x, int64_t row_elems, DeviceStep step) {
  const int32_t seq = step.row_seq[blockIdx.x];
  if (seq < 0 || step.seqs[seq].table_offset >= 0) return;
  for (int64_t i = threadIdx.x; i < row_elems; i += blockDim.x) {
    x[blockIdx.x * row_elems + i] = F32ToBf16(0.0f);
  }
}

__global__ void F32ToBf16Kernel(const float* x, int64_t count, bf16* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) out[i] = F32ToBf16(x[i]);
}

}  // namespace

LaunchResult LaunchRmsNorm(const void* x, const float* w, int64_t rows, int64_t dim, float eps,
                           void* y, void* stream) {
  if (rows <= 0 || dim <= 0) return cudaSuccess;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(x), w, dim, eps, static_cast<bf16*>(y));
  return cudaGetLastError();
}

LaunchResult LaunchRope(void* x, int64_t rows, int64_t heads, int64_t head_dim,
                        const int32_t* positions, const float* inv_freq, bool interleaved,
                        void* stream) {
  return LaunchRopePart(x, rows, heads, head_dim, 0, head_dim, positions, inv_freq,
                        interleaved, stream);
}

LaunchResult LaunchRopePart(void* x, int64_t rows, int64_t heads, int64_t head_stride,
                            int64_t offset, int64_t rope_dim, const int32_t* positions,
                            const float* inv_freq, bool interleaved, void* stream) {
  if (rows <= 0 || heads <= 0 || rope_dim <= 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(rope_dim) * sizeof(float);  // half cos + half sin
  RopeKernel<<<static_cast<unsigned>(rows), 128, smem, AsStream(stream)>>>(
      static_cast<bf16*>(x), heads, head_stride, offset, rope_dim, positions, inv_freq,
      interleaved);
  return cudaGetLastError();
}

LaunchResult LaunchSiluMul(const void* gate, const void* up, int64_t count, void* out,
                           void* stream) {
  if (count <= 0) return cudaSuccess;
  SiluMulKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(gate), static_cast<const bf16*>(up), count,
      static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchGeluTanhMul(const void* gate, const void* up, int64_t count, void* out,
                               void* stream) {
  if (count <= 0) return cudaSuccess;
  GeluTanhMulKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(gate), static_cast<const bf16*>(up), count,
      static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchBiasRound(const float* sums, const float* bias, int64_t rows, int64_t n,
                             void* y, bool y_f32, void* stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int64_t count = rows * n;
  if (y_f32) {
    BiasRoundKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
        sums, bias, count, n, static_cast<float*>(y));
  } else {
    BiasRoundKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
        sums, bias, count, n, static_cast<bf16*>(y));
  }
  return cudaGetLastError();
}

LaunchResult LaunchSoftCapF32(float* x, int64_t count, float cap, void* stream) {
  if (count <= 0) return cudaSuccess;
  if (!(cap > 0.0f)) return cudaErrorInvalidValue;
  SoftCapF32Kernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(x, count, cap);
  return cudaGetLastError();
}

LaunchResult LaunchAdd(const void* a, const void* b, int64_t count, void* out, void* stream) {
  if (count <= 0) return cudaSuccess;
  AddKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(a), static_cast<const bf16*>(b), count, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchSumChunks(const float* chunks, int64_t num_chunks, int64_t count, void* out,
                             void* stream) {
  if (count <= 0 || num_chunks <= 0) return cudaSuccess;
  SumChunksKernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      chunks, num_chunks, count, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchEmbeddingRows(const DeviceWeight& table, int64_t first_row,
                                 const int32_t* ids, int64_t num_ids, void* out, void* stream) {
  if (num_ids <= 0 || table.cols <= 0) return cudaSuccess;
  EmbeddingKernel<<<static_cast<unsigned>(num_ids), kThreads, 0, AsStream(stream)>>>(
      table, first_row, ids, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchGatherRows(const void* x, int64_t row_elems, const int32_t* rows,
                              int64_t num_rows, void* out, void* stream) {
  if (num_rows <= 0 || row_elems <= 0) return cudaSuccess;
  GatherRowsKernel<<<static_cast<unsigned>(num_rows), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(x), row_elems, rows, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchConvertBf16(const void* x, int64_t count, bool out_f16, void* out,
                               void* stream) {
  if (count <= 0) return cudaSuccess;
  ConvertBf16Kernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(x), count, out_f16, out);
  return cudaGetLastError();
}

LaunchResult LaunchF32ToBf16(const float* x, int64_t count, void* out, void* stream) {
  if (count <= 0) return cudaSuccess;
  F32ToBf16Kernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      x, count, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchF16ToBf16(const void* x, int64_t count, void* out, void* stream) {
  if (count <= 0) return cudaSuccess;
  F16ToBf16Kernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(
      static_cast<const __half*>(x), count, static_cast<bf16*>(out));
  return cudaGetLastError();
}

LaunchResult LaunchScaleBf16(void* x, int64_t count, float scale, void* stream) {
  if (count <= 0) return cudaSuccess;
  ScaleBf16Kernel<<<ElementBlocks(count), kThreads, 0, AsStream(stream)>>>(static_cast<bf16*>(x),
                                                                         count, scale);
  return cudaGetLastError();
}

LaunchResult LaunchZeroPaddingRows(void* x, int64_t row_elems, const DeviceStep& step,
                                   void* stream) {
  if (step.num_rows <= 0) return cudaSuccess;
  ZeroPaddingRowsKernel<<<static_cast<unsigned>(step.num_rows), kThreads, 0, AsStream(stream)>>>(
      static_cast<bf16*>(x), row_elems, step);
  return cudaGetLastError();
}

}  // namespace tpserve::cuda
