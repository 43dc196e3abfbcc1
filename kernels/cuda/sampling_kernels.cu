// The device sampler: row_sampling.h's SampleRow with each pass spread over a block.
#include "kernels/cuda/sampling_kernels.h"

#include <cuda_runtime.h>

#include <cmath>

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Combines every thread's `v` with `op` and gives the result to every thread: a shuffle tree
// within each warp, then each thread folds the warps' results in warp order (the same order
// every run: a row's sums do not depend on the batch or on timing). `shared` holds 32 Ts.
template <class T, class Op>
__device__ T BlockAll(T v, Op op, T* shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // a previous call may still read `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T all = shared[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) all = op(all, shared[w]);
  return all;
}

__device__ ScoredId Better(ScoredId a, ScoredId b) {
  if (a.id < 0) return b;
  if (b.id < 0) return a;
  return a.score > b.score || (a.score == b.score && a.id < b.id) ? a : b;
}

// The passes of SampleRow over a block: thread t takes ids t, t + blockDim.x, ...
class BlockRowReducer {
 public:
  __device__ BlockRowReducer(int64_t vocab, void* shared) : vocab_(vocab), shared_(shared) {}
  __device__ int64_t vocab() const { return vocab_; }

  template <class F>
  __device__ void ForEach(F f) {
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) f(i);
    __syncthreads();
  }
  template <class F>
  __device__ void Serial(F f) {
    __syncthreads();  // every thread's reads of the row are done
    if (threadIdx.x == 0) f();
    __syncthreads();
  }
  template <class F>
  __device__ float MaxF(F f) {
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) {
      const float x = f(i);
      m = x > m ? x : m;
    }
    return BlockAll(m, [](float a, float b) { return b > a ? b : a; }, static_cast<float*>(shared_));
  }
  template <class F>
  __device__ double SumD(F f) {
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) s += f(i);
    return BlockAll(s, [](double a, double b) { return a + b; }, static_cast<double*>(shared_));
  }
  template <class F>
  __device__ int64_t Count(F f) {
    long long n = 0;
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) n += f(i) ? 1 : 0;
    return BlockAll(n, [](long long a, long long b) { return a + b; },
                    static_cast<long long*>(shared_));
  }
  template <class F>
  __device__ uint64_t MaxKey(F f) {
    unsigned long long m = 0;
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) {
      const unsigned long long k = f(i);
      m = k > m ? k : m;
    }
    return BlockAll(m, [](unsigned long long a, unsigned long long b) { return b > a ? b : a; },
                    static_cast<unsigned long long*>(shared_));
  }
  template <class F>
  __device__ ScoredId ArgMax(F f) {
    ScoredId best{-INFINITY, -1};
    for (int64_t i = threadIdx.x; i < vocab_; i += blockDim.x) {
      const double s = f(i);
      if (s > best.score) best = {s, static_cast<int32_t>(i)};
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const ScoredId other{__shfl_xor_sync(kFullMask, best.score, offset),
                           __shfl_xor_sync(kFullMask, best.id, offset)};
      best = Better(best, other);
    }
    ScoredId* shared = static_cast<ScoredId*>(shared_);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) shared[warp] = best;
    __syncthreads();
    ScoredId all = shared[0];
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) all = Better(all, shared[w]);
    return all;
  }

 private:
  int64_t vocab_;
  void* shared_;
};

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(float* logits, int64_t vocab, int64_t per_rank, int64_t layout_rows,
                     const SamplingRow* rows, RowArrays arrays, float* saved, RowSample* out) {
  __shared__ alignas(16) unsigned char shared[32 * sizeof(ScoredId)];
  const int64_t r = blockIdx.x;
  const SamplingRow row = rows[r];
  BlockRowReducer reducer(vocab, shared);
  SampleRow(reducer, row, arrays, RowView{logits, r, layout_rows, per_rank}, saved, &out[r]);
}

}  // namespace

LaunchResult LaunchSampleRows(float* logits, int64_t vocab, int64_t per_rank, int64_t layout_rows,
                              const SamplingRow* rows, int64_t num_rows, const RowArrays& arrays,
                              float* saved, RowSample* out, void* stream) {
  if (num_rows <= 0) return static_cast<int>(cudaSuccess);
  SampleRowsKernel<<<static_cast<unsigned>(num_rows), kThreads, 0,
                     static_cast<cudaStream_t>(stream)>>>(logits, vocab, per_rank, layout_rows,
                                                          rows, arrays, saved, out);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tpserve::cuda
