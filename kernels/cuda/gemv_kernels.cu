// Weight-streaming GEMV for decode-sized batches (launchers: gemv_kernels.h).
//
// CPU reference (x bf16 [m, k], W [n, k], f32 sums, y rounded once):
//   fp8 per channel: y[t, r] = s[r] * sum_c x[t, c] * e4m3(W[r, c])          (s = 1 for plain)
//   fp8 128x128:     y[t, r] = sum_{c16} s[r/128][c/128] * sum_{c in c16} x[t, c] * e4m3(W[r, c])
//   int4 groups:     y[t, r] = sum_{c32} s[r][g] * sum_{c in c32} x[t, c] * (code[r, c] - z[r][g])
//                    (g = c / group; codes in GGML Q4_0 nibble order per 32 columns)
//   with a bias:     y[t, r] = (the above) + bias[r], added to the f32 sum before the rounding
//
// Chunked form (MatMulChunked): the columns cut into equal chunks, each summed exactly as a
// call on that chunk alone would sum it, into f32 [chunk, m, n]; one launch streams the whole
// matrix once.
//
// Layout: a warp owns R whole weight rows; each lane reads 16 bytes of each row per step (fp8:
// 16 values, int4: one 32-column chunk) and the warp walks k in steps of 512 bytes, U steps of
// loads in flight before any arithmetic. Lanes keep f32 partial sums for each (row, token),
// reduced across the warp at the end. Weights are read with L1::no_allocate (read once per
// call); x rows are small and shared by all warps, so they stay in L1/L2.
#include "kernels/cuda/gemv_kernels.h"

#include "kernels/cuda/device_math.cuh"

namespace tpserve::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int64_t kLaneBytes = 16;
constexpr int64_t kWarpStepBytes = 32 * kLaneBytes;

__device__ __forceinline__ uint4 LoadStreaming(const uint8_t* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// 16 bf16 values (32 bytes at p, 16-byte aligned) to floats.
__device__ __forceinline__ void LoadX16(const bf16* p, float (&out)[16]) {
  const uint4 a = __ldg(reinterpret_cast<const uint4*>(p));
  const uint4 b = __ldg(reinterpret_cast<const uint4*>(p) + 1);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 lo = Bf16x2ToF32x2(Word(a, i));
    const float2 hi = Bf16x2ToF32x2(Word(b, i));
    out[2 * i] = lo.x;
    out[2 * i + 1] = lo.y;
    out[8 + 2 * i] = hi.x;
    out[8 + 2 * i + 1] = hi.y;
  }
}

__device__ __forceinline__ void StoreY(void* y, bool y_f32, int64_t index, float v) {
  if (y_f32) {
    static_cast<float*>(y)[index] = v;
  } else {
    static_cast<bf16*>(y)[index] = F32ToBf16(v);
  }
}

// M: activation rows the kernel is compiled for (m <= M at run time); R: weight rows per warp;
// U: 512-byte steps whose loads are issued together.
template <int M, int R, int U, bool kBlockScale>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Fp8GemvKernel(const bf16* __restrict__ x, int m, int64_t k, const uint8_t* __restrict__ w,
                  int64_t row_bytes, int64_t n, const float* __restrict__ scales,
                  int64_t scale_stride, const float* __restrict__ bias, int num_chunks,
                  int64_t chunk_cols, void* y, bool y_f32) {
  const int lane = threadIdx.x % 32;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * R;
  if (row0 >= n) return;  // the whole warp leaves together
  // Chunk c covers columns [c * chunk_cols, (c + 1) * chunk_cols) and is summed exactly as a
  // call with that chunk alone would sum it (same lanes, same order), into output c.
  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const int64_t c0 = chunk * chunk_cols;
    const uint8_t* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = w + min(row0 + r, n - 1) * row_bytes + c0;
    float acc[R][M];
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int t = 0; t < M; ++t) acc[r][t] = 0.0f;
    }
    for (int64_t base = lane * kLaneBytes; base < chunk_cols; base += kWarpStepBytes * U) {
      uint4 raw[U][R];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = base + u * kWarpStepBytes;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          raw[u][r] = c < chunk_cols ? LoadStreaming(rows[r] + c) : make_uint4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = base + u * kWarpStepBytes;
        if (c >= chunk_cols) break;
        float wf[R][16];
#pragma unroll
        for (int r = 0; r < R; ++r) {
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const float2 v =
                Fp8x2ToF32x2(static_cast<uint16_t>(Word(raw[u][r], i / 2) >> (16 * (i % 2))));
            wf[r][2 * i] = v.x;
            wf[r][2 * i + 1] = v.y;
          }
        }
        float tile_scale[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
          tile_scale[r] = kBlockScale ? __ldg(scales + (min(row0 + r, n - 1) / 128) * scale_stride +
                                              (c0 + c) / 128)
                                      : 1.0f;
        }
#pragma unroll
        for (int t = 0; t < M; ++t) {
          if (t < m) {
            float xf[16];
            LoadX16(x + t * k + c0 + c, xf);
#pragma unroll
            for (int r = 0; r < R; ++r) {
              float dot = 0.0f;
#pragma unroll
              for (int i = 0; i < 16; ++i) dot = fmaf(wf[r][i], xf[i], dot);
              acc[r][t] = kBlockScale ? fmaf(dot, tile_scale[r], acc[r][t]) : acc[r][t] + dot;
            }
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = row0 + r;
      const float row_scale = (!kBlockScale && scales != nullptr && row < n) ? scales[row] : 1.0f;
#pragma unroll
      for (int t = 0; t < M; ++t) {
        const float sum = WarpSum(acc[r][t]);
        if (lane == 0 && row < n && t < m) {
          const float v = sum * row_scale;
          StoreY(y, y_f32, (static_cast<int64_t>(chunk) * m + t) * n + row,
                 bias != nullptr ? v + __ldg(bias + row) : v);
        }
      }
    }
  }
}

template <int M, int U>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    Int4GemvKernel(const bf16* __restrict__ x, int m, int64_t k, const uint8_t* __restrict__ w,
                   int64_t row_bytes, int64_t n, const uint16_t* __restrict__ scales,
                   const uint16_t* __restrict__ zeros, int64_t scale_stride, int64_t group,
                   const float* __restrict__ bias, int num_chunks, int64_t chunk_cols, void* y,
                   bool y_f32) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const int64_t chunk_bytes = chunk_cols / 2;
  for (int chunk = 0; chunk < num_chunks; ++chunk) {  // as Fp8GemvKernel: each chunk alone
    const int64_t c0 = chunk * chunk_cols;
    const uint8_t* codes = w + row * row_bytes + c0 / 2;
    float acc[M];
#pragma unroll
    for (int t = 0; t < M; ++t) acc[t] = 0.0f;
    for (int64_t base = lane * kLaneBytes; base < chunk_bytes; base += kWarpStepBytes * U) {
      uint4 raw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t b = base + u * kWarpStepBytes;
        raw[u] = b < chunk_bytes ? LoadStreaming(codes + b) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t b = base + u * kWarpStepBytes;
        if (b >= chunk_bytes) break;
        const int64_t col0 = c0 + b * 2;  // this lane's 32-column chunk
        const int64_t g = row * scale_stride + col0 / group;
        const float scale = F16BitsToF32(__ldg(scales + g));
        const float zero = F16BitsToF32(__ldg(zeros + g));
        // wf[j] = code of column col0 + j, minus the zero point (as the CPU's dequantization).
        float wf[32];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const uint32_t byte = (Word(raw[u], j / 4) >> (8 * (j % 4))) & 0xFFu;
          // 2^23 + code as float bits, minus 2^23: the code exactly, without an int conversion.
          wf[j] = (__uint_as_float(0x4B000000u | (byte & 0x0Fu)) - 8388608.0f) - zero;
          wf[j + 16] = (__uint_as_float(0x4B000000u | (byte >> 4)) - 8388608.0f) - zero;
        }
#pragma unroll
        for (int t = 0; t < M; ++t) {
          if (t < m) {
            float lo[16], hi[16];
            LoadX16(x + t * k + col0, lo);
            LoadX16(x + t * k + col0 + 16, hi);
            float dot = 0.0f;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
              dot = fmaf(wf[j], lo[j], dot);
              dot = fmaf(wf[j + 16], hi[j], dot);
            }
            acc[t] = fmaf(dot, scale, acc[t]);
          }
        }
      }
    }
#pragma unroll
    for (int t = 0; t < M; ++t) {
      const float sum = WarpSum(acc[t]);
      if (lane == 0 && t < m) {
        StoreY(y, y_f32, (static_cast<int64_t>(chunk) * m + t) * n + row,
               bias != nullptr ? sum + __ldg(bias + row) : sum);
      }
    }
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <int M, int R, int U>
LaunchResult LaunchFp8(const void* x, int64_t m, const DeviceWeight& w, int num_chunks,
                       int64_t chunk_cols, void* y, bool y_f32, cudaStream_t stream) {
  const int64_t warps = (w.rows + R - 1) / R;
  const unsigned blocks = static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wb = static_cast<const uint8_t*>(w.data);
  const auto* s = static_cast<const float*>(w.scales);
  if (w.kind == WeightKind::kFp8Block128) {
    Fp8GemvKernel<M, R, U, true><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
        xb, static_cast<int>(m), w.cols, wb, w.row_bytes, w.rows, s, w.scale_stride, w.bias,
        num_chunks, chunk_cols, y, y_f32);
  } else {
    Fp8GemvKernel<M, R, U, false><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
        xb, static_cast<int>(m), w.cols, wb, w.row_bytes, w.rows,
        w.kind == WeightKind::kFp8 ? nullptr : s, 0, w.bias, num_chunks, chunk_cols, y, y_f32);
  }
  return cudaGetLastError();
}

template <int M, int U>
LaunchResult LaunchInt4(const void* x, int64_t m, const DeviceWeight& w, int num_chunks,
                        int64_t chunk_cols, void* y, bool y_f32, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  Int4GemvKernel<M, U><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
      static_cast<const bf16*>(x), static_cast<int>(m), w.cols,
      static_cast<const uint8_t*>(w.data), w.row_bytes, w.rows,
      static_cast<const uint16_t*>(w.scales), static_cast<const uint16_t*>(w.zeros),
      w.scale_stride, w.group_size, w.bias, num_chunks, chunk_cols, y, y_f32);
  return cudaGetLastError();
}

// The chunk count and width the kernels take: `num_chunks` equal chunks of whole 16-byte lane
// steps (fp8: 16 columns, int4: 32) that start on 128-column tiles for fp8 tiles.
bool ChunksFit(const DeviceWeight& w, int64_t num_chunks) {
  if (num_chunks > 1 && w.bias != nullptr) return false;  // a bias belongs to the whole sum
  if (num_chunks < 1 || w.cols % num_chunks != 0 || num_chunks > (1 << 20)) return false;
  const int64_t kc = w.cols / num_chunks;
  switch (w.kind) {
    case WeightKind::kInt4Group: return kc % 32 == 0 && kc % w.group_size == 0;
    case WeightKind::kFp8Block128: return kc % 128 == 0;
    default: return kc % 16 == 0;
  }
}

}  // namespace

bool Fp8GemvFits(const DeviceWeight& w, int64_t m, const void* x, int64_t num_chunks) {
  const bool fp8 = w.kind == WeightKind::kFp8 || w.kind == WeightKind::kFp8PerChannel ||
                   w.kind == WeightKind::kFp8Block128;
  return fp8 && m >= 1 && m <= kGemvMaxRows && w.cols % 16 == 0 && w.row_bytes % 16 == 0 &&
         Aligned16(w.data) && Aligned16(x) && w.rows > 0 && ChunksFit(w, num_chunks);
}

bool Int4GemvFits(const DeviceWeight& w, int64_t m, const void* x, int64_t num_chunks) {
  return w.kind == WeightKind::kInt4Group && m >= 1 && m <= kGemvMaxRows && w.cols % 32 == 0 &&
         w.group_size % 32 == 0 && w.group_size > 0 && w.row_bytes % 16 == 0 &&
         Aligned16(w.data) && Aligned16(x) && w.rows > 0 && ChunksFit(w, num_chunks);
}

LaunchResult LaunchFp8Gemv(const void* x, int64_t m, const DeviceWeight& w, int64_t num_chunks,
                           void* y, bool y_f32, void* stream) {
  if (!Fp8GemvFits(w, m, x, num_chunks)) return cudaErrorInvalidValue;
  const auto s = static_cast<cudaStream_t>(stream);
  const int nc = static_cast<int>(num_chunks);
  const int64_t kc = w.cols / num_chunks;
  // Two rows per warp halve the x traffic for large matrices; small ones keep one row per warp
  // so that there are enough warps to fill the GPU.
  const bool two_rows = w.rows >= 8192;
  if (m == 1) return two_rows ? LaunchFp8<1, 2, 4>(x, m, w, nc, kc, y, y_f32, s)
                              : LaunchFp8<1, 1, 8>(x, m, w, nc, kc, y, y_f32, s);
  if (m == 2) return two_rows ? LaunchFp8<2, 2, 4>(x, m, w, nc, kc, y, y_f32, s)
                              : LaunchFp8<2, 1, 8>(x, m, w, nc, kc, y, y_f32, s);
  if (m <= 4) return LaunchFp8<4, 1, 8>(x, m, w, nc, kc, y, y_f32, s);
  if (m <= 8) return LaunchFp8<8, 1, 4>(x, m, w, nc, kc, y, y_f32, s);
  return LaunchFp8<16, 1, 4>(x, m, w, nc, kc, y, y_f32, s);
}

LaunchResult LaunchInt4Gemv(const void* x, int64_t m, const DeviceWeight& w, int64_t num_chunks,
                            void* y, bool y_f32, void* stream) {
  if (!Int4GemvFits(w, m, x, num_chunks)) return cudaErrorInvalidValue;
  const auto s = static_cast<cudaStream_t>(stream);
  const int nc = static_cast<int>(num_chunks);
  const int64_t kc = w.cols / num_chunks;
  if (m == 1) return LaunchInt4<1, 8>(x, m, w, nc, kc, y, y_f32, s);
  if (m == 2) return LaunchInt4<2, 8>(x, m, w, nc, kc, y, y_f32, s);
  if (m <= 4) return LaunchInt4<4, 4>(x, m, w, nc, kc, y, y_f32, s);
  if (m <= 8) return LaunchInt4<8, 4>(x, m, w, nc, kc, y, y_f32, s);
  return LaunchInt4<16, 2>(x, m, w, nc, kc, y, y_f32, s);
}

}  // namespace tpserve::cuda
