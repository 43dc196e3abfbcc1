// The CUDA backend's own mixture-of-experts kernels (launchers: moe_kernels.h).
//
// CPU reference of what each computes (kernels/expert_routing.cc, kernels/cpu/cpu_moe.cc):
//   Route:    per token, RouteTokens' rule (moe_routing.h's RouteToken, the same operations)
//   Group:    counts, offsets and positions of the slots by expert, then slot index
//             (moe_plan.h: GroupSlotsByExpert, here in tiles without atomics)
//   Gather:   x_rows[position[s]] = x[s / top_k] (* w[s], Llama 4)
//   Combine:  out[c, r] = w[r,0] * slot(r,0)[c] + w[r,1] * slot(r,1)[c] + ...   (in j order)
//   Write:    slots[slot_pos[s], c] = slot s's chunk c
// No CUTLASS / CuTe headers: this file compiles in seconds.
#include "kernels/cuda/moe_kernels.h"

#include <algorithm>

#include "kernels/cuda/device_math.cuh"

namespace tpserve::cuda {
namespace {

constexpr int kThreads = 256;
static_assert(kMoeTileSlots <= 1024, "one thread per slot of a tile");

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

__global__ void RouteKernel(RoutingRule rule, const float* logits, int64_t rows,
                            const float* bias, int32_t* ids, float* weights) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows) return;
  RouteToken(rule, logits + t * rule.num_experts, bias, ids + t * rule.top_k,
             weights + t * rule.top_k);
}

// The tile's local expert indices in shared memory (-1: outside the range); returns its size.
__device__ int32_t LoadTile(const int32_t* ids, int64_t slots, ExpertRange range,
                            int32_t* local) {
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kMoeTileSlots;
  const int64_t left = slots - begin;
  const int32_t n = left < kMoeTileSlots ? static_cast<int32_t>(left) : kMoeTileSlots;
  if (threadIdx.x < n) local[threadIdx.x] = LocalExpert(ids[begin + threadIdx.x], range);
  __syncthreads();
  return n;
}

// Step 1: per tile, each expert's count and the tile's bad ids (column `range.count`).
__global__ void TileCountsKernel(const int32_t* ids, int64_t slots, ExpertRange range,
                                 bool refuse_foreign, int32_t* tile_counts) {
  __shared__ int32_t local[kMoeTileSlots];
  const int32_t n = LoadTile(ids, slots, range, local);
  int32_t* counts = tile_counts + static_cast<int64_t>(blockIdx.x) * (range.count + 1);
  for (int32_t e = threadIdx.x; e < range.count; e += blockDim.x) {
    counts[e] = CountInTile(local, n, e);
  }
  if (threadIdx.x == 0) {
    const int64_t begin = static_cast<int64_t>(blockIdx.x) * kMoeTileSlots;
    int32_t bad = 0;
    for (int32_t i = 0; i < n; ++i) {
      bad += local[i] < 0 && (refuse_foreign || ids[begin + i] < 0) ? 1 : 0;
    }
    counts[range.count] = bad;
  }
}

// Step 2 (one block): per expert the total over tiles, the offsets, and each tile's base.
__global__ void ScanTilesKernel(int32_t experts, int32_t num_tiles, int32_t* offsets,
                                int32_t* bad_ids, int32_t* tile_counts) {
  extern __shared__ int32_t totals[];  // [experts + 1]
  const int32_t stride = experts + 1;
  for (int32_t e = threadIdx.x; e <= experts; e += blockDim.x) {
    int32_t total = 0;
    for (int32_t t = 0; t < num_tiles; ++t) total += tile_counts[t * stride + e];
    totals[e] = total;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ExclusiveScan(totals, experts, offsets);
    *bad_ids = totals[experts];
  }
  __syncthreads();
  for (int32_t e = threadIdx.x; e < experts; e += blockDim.x) {
    TileBasesForExpert(tile_counts, num_tiles, stride, e, offsets[e]);
  }
}

// Step 3: each slot's grouped row (its tile's base for its expert plus its rank in the tile).
__global__ void ScatterKernel(const int32_t* ids, int64_t slots, ExpertRange range,
                              const int32_t* tile_bases, int32_t* position, int32_t* order) {
  __shared__ int32_t local[kMoeTileSlots];
  const int32_t n = LoadTile(ids, slots, range, local);
  const int32_t i = threadIdx.x;
  if (i >= n) return;
  const int64_t s = static_cast<int64_t>(blockIdx.x) * kMoeTileSlots + i;
  const int32_t e = local[i];
  if (e < 0) {
    position[s] = -1;
    return;
  }
  const int32_t p =
      tile_bases[static_cast<int64_t>(blockIdx.x) * (range.count + 1) + e] + RankInTile(local, i);
  position[s] = p;
  order[p] = static_cast<int32_t>(s);
}

// One block per slot: its row into its grouped place.
__global__ void GatherKernel(const bf16* x, int64_t top_k, int64_t hidden,
                             const int32_t* position, const float* input_weights, bf16* x_rows) {
  const int64_t s = blockIdx.x;
  const int32_t p = position[s];
  if (p < 0) return;
  const bf16* src = x + (s / top_k) * hidden;
  bf16* dst = x_rows + static_cast<int64_t>(p) * hidden;
  if (input_weights == nullptr) {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) dst[i] = src[i];
    return;
  }
  const float w = input_weights[s];
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    dst[i] = F32ToBf16(Bf16ToF32(src[i]) * w);
  }
}

// Chunk c of slot s's down output.
__device__ __forceinline__ const float* SlotRow(const SlotOutputs& o, int64_t s,
                                                int64_t num_chunks, int64_t c, int64_t hidden) {
  if (o.slot_pos != nullptr) return o.data + (o.slot_pos[s] * num_chunks + c) * hidden;
  const int32_t e = o.ids[s] - o.first_expert;
  return o.data + GroupedDownRow(o.offsets, e, o.position[s], num_chunks, c) * hidden;
}

// One block per (token, chunk); each thread sums its elements over the token's slots in order.
__global__ void CombineKernel(SlotOutputs o, int64_t rows, int64_t top_k, int64_t num_chunks,
                              int64_t hidden, const float* weights, float* out) {
  const int64_t r = blockIdx.x, c = blockIdx.y;
  float* dst = out + (c * rows + r) * hidden;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t s = r * top_k + j;
      const float v = SlotRow(o, s, num_chunks, c, hidden)[d];
      if (weights == nullptr) {
        acc = j == 0 ? v : __fadd_rn(acc, v);
      } else {
        acc = j == 0 ? __fmul_rn(weights[s], v) : __fmaf_rn(weights[s], v, acc);
      }
    }
    dst[d] = acc;
  }
}

// One block per (slot, chunk): a local slot's chunk copied to its place in the slot buffer.
__global__ void WriteSlotsKernel(SlotOutputs grouped, int64_t num_chunks, int64_t hidden,
                                 const int32_t* slot_pos, float* out) {
  const int64_t s = blockIdx.x, c = blockIdx.y;
  if (grouped.position[s] < 0 || slot_pos[s] < 0) return;  // another rank's slot; or no place
  const float* src = SlotRow(grouped, s, num_chunks, c, hidden);
  float* dst = out + (static_cast<int64_t>(slot_pos[s]) * num_chunks + c) * hidden;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) dst[d] = src[d];
}

__global__ void AddF32Kernel(const float* a, const float* b, int64_t count, float* out) {
  for (int64_t i = GlobalThread(); i < count; i += GlobalThreads()) out[i] = __fadd_rn(a[i], b[i]);
}

}  // namespace

LaunchResult LaunchRouteExperts(const RoutingRule& rule, const float* logits, int64_t rows,
                                const float* bias, int32_t* ids, float* weights, void* stream) {
  if (rows <= 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>((rows + 127) / 128);
  RouteKernel<<<blocks, 128, 0, AsStream(stream)>>>(rule, logits, rows, bias, ids, weights);
  return cudaGetLastError();
}

LaunchResult LaunchGroupByExpert(const int32_t* ids, int64_t slots, ExpertRange range,
                                 bool refuse_foreign, int32_t* plan, void* stream) {
  if (slots <= 0) return cudaSuccess;
  const MoePlanLayout l = MoePlanLayoutFor(slots, range.count);
  const unsigned tiles = static_cast<unsigned>(l.num_tiles);
  int32_t* tile_counts = plan + l.tile_counts;
  TileCountsKernel<<<tiles, kMoeTileSlots, 0, AsStream(stream)>>>(ids, slots, range,
                                                                  refuse_foreign, tile_counts);
  const size_t smem = static_cast<size_t>(range.count + 1) * sizeof(int32_t);
  ScanTilesKernel<<<1, kThreads, smem, AsStream(stream)>>>(
      range.count, static_cast<int32_t>(l.num_tiles), plan + l.offsets, plan + l.bad_ids,
      tile_counts);
  ScatterKernel<<<tiles, kMoeTileSlots, 0, AsStream(stream)>>>(
      ids, slots, range, tile_counts, plan + l.position, plan + l.order);
  return cudaGetLastError();
}

LaunchResult LaunchGatherExpertRows(const void* x, int64_t slots, int64_t top_k, int64_t hidden,
                                    const int32_t* position, const float* input_weights,
                                    void* x_rows, void* stream) {
  if (slots <= 0 || hidden <= 0) return cudaSuccess;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (hidden + 31) / 32 * 32));
  GatherKernel<<<static_cast<unsigned>(slots), threads, 0, AsStream(stream)>>>(
      static_cast<const bf16*>(x), top_k, hidden, position, input_weights,
      static_cast<bf16*>(x_rows));
  return cudaGetLastError();
}

LaunchResult LaunchCombineExperts(const SlotOutputs& slots, int64_t rows, int64_t top_k,
                                  int64_t num_chunks, int64_t hidden, const float* weights,
                                  float* out, void* stream) {
  if (rows <= 0 || hidden <= 0) return cudaSuccess;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (hidden + 31) / 32 * 32));
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(num_chunks));
  CombineKernel<<<grid, threads, 0, AsStream(stream)>>>(slots, rows, top_k, num_chunks, hidden,
                                                         weights, out);
  return cudaGetLastError();
}

LaunchResult LaunchWriteExpertSlots(const SlotOutputs& grouped, int64_t slots,
                                    int64_t num_chunks, int64_t hidden, const int32_t* slot_pos,
                                    float* out, void* stream) {
  if (slots <= 0 || hidden <= 0) return cudaSuccess;
  const int threads = static_cast<int>(std::min<int64_t>(kThreads, (hidden + 31) / 32 * 32));
  const dim3 grid(static_cast<unsigned>(slots), static_cast<unsigned>(num_chunks));
  WriteSlotsKernel<<<grid, threads, 0, AsStream(stream)>>>(grouped, num_chunks, hidden, slot_pos,
                                                           out);
  return cudaGetLastError();
}

LaunchResult LaunchAddF32(const float* a, const float* b, int64_t count, float* out,
                          void* stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned blocks =
      static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, 132 * 32));
  AddF32Kernel<<<blocks, kThreads, 0, AsStream(stream)>>>(a, b, count, out);
  return cudaGetLastError();
}

}  // namespace tpserve::cuda
