// Paged KV writes and causal GQA attention (launchers: attention_kernels.h).
//
// CPU reference (kernels/cpu/cpu_attention.cc), per row at position p of a sequence, per query
// head h with KV head g = h / group, all in f32, with f = max(0, p - window + 1) under a
// sliding window (0 without one) and cap the logit soft-cap (none when 0):
//   s[t] = scale * dot(q[h], K[g][t]) for f <= t <= p;  s[t] = cap * tanh(s[t] / cap) if cap > 0
//   m = max s;  e[t] = exp(s[t] - m);  out[h] = sum_t e[t] V[g][t] / sum_t e[t]
// where K[g][t] is read through the block table: block table[t / bs], slot t % bs; an fp8 pool
// stores value / scale and is read back as code * scale.
//
// Decode (one-token rows): one block per (row, KV head, key split) computes the scores of all
// `group` query heads from one read of each key, keeps them in shared memory, and writes either
// the final output (one split) or (sum_t e[t] V[t], m, sum_t e[t]) for a combine pass that
// rescales the splits by exp(m_s - max m); a window splits keys f..p instead of 0..p.
// Prefill (multi-token rows): one block per (32-query tile, query head) walks key tiles of 32
// from the tile holding its first row's first key up to the tile's last position with an
// online softmax, masking keys outside each row's causal window; warp w owns query rows w,
// w+8, w+16, w+24, lane j scores key j of the tile.
#include "kernels/cuda/attention_kernels.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "kernels/cuda/attention_math.h"
#include "kernels/cuda/device_math.cuh"

namespace tpserve::cuda {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int kPrefillThreads = 256;
constexpr int kPrefillKeys = 32;  // keys per prefill tile (= lanes)
constexpr int64_t kDefaultSmem = 48 * 1024;
constexpr int kMaxRegisterDims = 8;  // prefill: head_dim <= 32 * 8 in registers per lane
static_assert(kMaxRegisterDims * 32 == kMaxAttentionHeadDim, "prefill registers cover hd");

struct AttnArgs {
  const bf16* q;
  bf16* out;
  DeviceKvPool pool;
  DeviceStep step;
  int32_t num_heads;
  int32_t group;
  float scale;
  int64_t window;  // sliding window in keys; 0: none
  float softcap;   // logit soft-cap; 0: none
  int32_t num_splits;
  int32_t keys_cap;
  float* part_out;   // [decode rows][num_heads][splits][head_dim]
  float* part_stat;  // [decode rows][num_heads][splits][2]: max, sum
};

template <KvKind kKv>
__device__ __forceinline__ float LoadKv(const void* pool, int64_t i, float scale) {
  if constexpr (kKv == KvKind::kF32) {
    return static_cast<const float*>(pool)[i];
  } else if constexpr (kKv == KvKind::kF16) {
    return __half2float(static_cast<const __half*>(pool)[i]);
  } else if constexpr (kKv == KvKind::kBF16) {
    return Bf16ToF32(static_cast<const bf16*>(pool)[i]);
  } else {
    return Fp8ToF32(static_cast<const uint8_t*>(pool)[i]) * scale;
  }
}

// Element offset of (position, kv head g, d = 0) of a sequence in the pool.
__device__ __forceinline__ int64_t SlotOffset(const DeviceKvPool& pool, const int32_t* table,
                                              int64_t position, int64_t g) {
  const int64_t block = table[position / pool.block_size];
  const int64_t slot = block * pool.block_size + position % pool.block_size;
  return (slot * pool.num_kv_heads + g) * pool.head_dim;
}

__global__ void WriteKvKernel(const bf16* k_new, const bf16* v_new, DeviceKvPool pool,
                              DeviceStep step) {
  const int64_t row = blockIdx.x;
  const int32_t seq = step.row_seq[row];
  if (seq < 0) return;
  const DeviceSeq s = step.seqs[seq];
  if (s.table_offset < 0) return;  // a padding row owns no slot
  const int64_t position = s.start_position + (row - s.first_row);
  const int64_t base = SlotOffset(pool, step.block_tables + s.table_offset, position, 0);
  const int64_t row_elems = pool.num_kv_heads * pool.head_dim;
  for (int64_t e = threadIdx.x; e < row_elems; e += blockDim.x) {
    const float kv[2] = {Bf16ToF32(k_new[row * row_elems + e]),
                         Bf16ToF32(v_new[row * row_elems + e])};
    void* dst[2] = {pool.k, pool.v};
    const float scale[2] = {pool.k_scale, pool.v_scale};
    for (int i = 0; i < 2; ++i) {
      switch (pool.kind) {
        case KvKind::kF32:
          static_cast<float*>(dst[i])[base + e] = kv[i];
          break;
        case KvKind::kF16:
          static_cast<__half*>(dst[i])[base + e] = __float2half_rn(kv[i]);
          break;
        case KvKind::kBF16:
          static_cast<bf16*>(dst[i])[base + e] = F32ToBf16(kv[i]);
          break;
        case KvKind::kFp8:
          static_cast<uint8_t*>(dst[i])[base + e] = F32ToFp8(kv[i] / scale[i]);
          break;
      }
    }
  }
}

template <KvKind kKv>
__global__ void __launch_bounds__(kDecodeThreads) DecodeKernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t hd = a.pool.head_dim;
  const int group = a.group, cap = a.keys_cap;
  const DecodeSmem layout = DecodeLayout(group, hd, cap);
  float* q_s = reinterpret_cast<float*>(smem + layout.q);
  float* p_s = reinterpret_cast<float*>(smem + layout.p);
  int64_t* slot_s = reinterpret_cast<int64_t*>(smem + layout.slots);
  float* stat_s = reinterpret_cast<float*>(smem + layout.stat);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int num_warps = blockDim.x / 32;

  const int64_t item = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
  const DeviceSeq s = a.step.seqs[a.step.decode_seqs[item]];
  if (s.table_offset < 0) {  // padding row: zeros (with splits, the combine pass writes them)
    if (a.num_splits == 1) {
      for (int64_t i = threadIdx.x; i < group * hd; i += blockDim.x) {
        a.out[(static_cast<int64_t>(s.first_row) * a.num_heads + g * group) * hd + i] =
            F32ToBf16(0.0f);
      }
    }
    return;
  }
  const int64_t row = s.first_row, context = s.start_position + 1;
  const int64_t first_key = WindowFirstKey(s.start_position, a.window);
  const KeyRange keys = SplitKeys(context - first_key, a.num_splits, split);
  const int64_t begin = first_key + keys.begin, n = keys.count;
  if (n > cap) __trap();  // the plan guarantees chunk <= cap; never read past shared memory
  const int64_t head0 = g * group;

  for (int64_t i = threadIdx.x; i < group * hd; i += blockDim.x) {
    q_s[i] = Bf16ToF32(a.q[(row * a.num_heads + head0) * hd + i]);
  }
  const int32_t* table = a.step.block_tables + s.table_offset;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    slot_s[j] = SlotOffset(a.pool, table, begin + j, g);
  }
  __syncthreads();

  // Scores: a warp per key, lanes over head_dim; the key is read once for all group heads.
  for (int64_t j = warp; j < n; j += num_warps) {
    float kr[kMaxAttentionHeadDim / 32];
#pragma unroll
    for (int i = 0; i < kMaxAttentionHeadDim / 32; ++i) {
      const int64_t d = lane + 32 * i;
      kr[i] = d < hd ? LoadKv<kKv>(a.pool.k, slot_s[j] + d, a.pool.k_scale) : 0.0f;
    }
    for (int h = 0; h < group; ++h) {
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxAttentionHeadDim / 32; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < hd) dot = fmaf(q_s[h * hd + d], kr[i], dot);
      }
      dot = WarpSum(dot);
      if (lane == 0) p_s[h * cap + j] = SoftCapScore(a.scale * dot, a.softcap);
    }
  }
  __syncthreads();

  // Softmax numerators per head: a warp per head.
  for (int h = warp; h < group; h += num_warps) {
    float mx = -INFINITY;
    for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, p_s[h * cap + j]);
    mx = WarpMax(mx);
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
      const float e = ExpShifted(p_s[h * cap + j], mx);
      p_s[h * cap + j] = e;
      sum += e;
    }
    sum = WarpSum(sum);
    if (lane == 0) {
      stat_s[2 * h] = mx;
      stat_s[2 * h + 1] = sum;
    }
  }
  __syncthreads();

  // Weighted values: a thread per (head, dim); consecutive threads read consecutive dims.
  for (int64_t idx = threadIdx.x; idx < group * hd; idx += blockDim.x) {
    const int64_t h = idx / hd, d = idx % hd;
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      acc = fmaf(p_s[h * cap + j], LoadKv<kKv>(a.pool.v, slot_s[j] + d, a.pool.v_scale), acc);
    }
    const int64_t head = head0 + h;
    if (a.num_splits == 1) {
      a.out[(row * a.num_heads + head) * hd + d] = F32ToBf16(acc / stat_s[2 * h + 1]);
    } else {
      const int64_t part = (item * a.num_heads + head) * a.num_splits + split;
      a.part_out[part * hd + d] = acc;
      if (d == 0) {
        a.part_stat[2 * part] = stat_s[2 * h];  // -inf for an empty split
        a.part_stat[2 * part + 1] = stat_s[2 * h + 1];
      }
    }
  }
}

// One block per (decode row, query head): out = sum_s w_s o_s / sum_s w_s l_s with
// w_s = exp(m_s - max m). Split 0 always holds the row's first key, so max m is finite.
__global__ void __launch_bounds__(kDecodeThreads) CombineKernel(AttnArgs a) {
  extern __shared__ float weights[];  // [num_splits]
  __shared__ float scratch[32];
  const int64_t item = blockIdx.x, head = blockIdx.y, hd = a.pool.head_dim;
  const DeviceSeq s = a.step.seqs[a.step.decode_seqs[item]];
  bf16* out = a.out + (static_cast<int64_t>(s.first_row) * a.num_heads + head) * hd;
  if (s.table_offset < 0) {  // padding row
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) out[d] = F32ToBf16(0.0f);
    return;
  }
  const int64_t part0 = (item * a.num_heads + head) * a.num_splits;
  float mx = -INFINITY;
  for (int sp = threadIdx.x; sp < a.num_splits; sp += blockDim.x) {
    mx = fmaxf(mx, a.part_stat[2 * (part0 + sp)]);
  }
  mx = BlockMax(mx, scratch);
  float total = 0.0f;
  for (int sp = threadIdx.x; sp < a.num_splits; sp += blockDim.x) {
    const float w = CombineWeight(a.part_stat[2 * (part0 + sp)], mx);
    weights[sp] = w;
    total += w * a.part_stat[2 * (part0 + sp) + 1];
  }
  total = BlockSum(total, scratch);  // its barriers also publish `weights`
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int sp = 0; sp < a.num_splits; ++sp) acc = fmaf(weights[sp], a.part_out[(part0 + sp) * hd + d], acc);
    out[d] = F32ToBf16(acc / total);
  }
}

int64_t PrefillSmemBytes(int64_t hd) {
  // q [32][hd], k [32][hd + 1], v [32][hd] floats, then int64 slots [32].
  return (32 * hd + 32 * (hd + 1) + 32 * hd) * 4 + kPrefillKeys * 8;
}

template <KvKind kKv, int kDims>
__global__ void __launch_bounds__(kPrefillThreads) PrefillKernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t hd = a.pool.head_dim, hdp = hd + 1;  // k rows padded: no bank conflicts
  float* q_s = reinterpret_cast<float*>(smem);
  float* k_s = q_s + 32 * hd;
  float* v_s = k_s + 32 * hdp;
  int64_t* slot_s = reinterpret_cast<int64_t*>(v_s + 32 * hd);  // 32 * (3 hd + 1) floats: even
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kRowsPerWarp = kPrefillTileRows / (kPrefillThreads / 32);

  const int64_t tile = blockIdx.x, head = blockIdx.y;
  const int32_t seq = a.step.prefill_tiles[2 * tile];
  const int64_t i0 = a.step.prefill_tiles[2 * tile + 1];
  const DeviceSeq s = a.step.seqs[seq];
  const int64_t rows_here = min(int64_t{kPrefillTileRows}, s.num_tokens - i0);
  const int64_t g = head / a.group;
  const int32_t* table = a.step.block_tables + s.table_offset;

  for (int64_t idx = threadIdx.x; idx < kPrefillTileRows * hd; idx += blockDim.x) {
    const int64_t qi = idx / hd, d = idx % hd;
    q_s[idx] = qi < rows_here
                   ? Bf16ToF32(a.q[((s.first_row + i0 + qi) * a.num_heads + head) * hd + d])
                   : 0.0f;
  }
  // Rows past the sequence's end reuse the last row's position (never written back). Under a
  // window a row may see no key in the first tiles (its running max stays -inf, Rescale keeps
  // the zero sums); every row sees its own position, so its final sum is positive.
  int64_t qpos[kRowsPerWarp];
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDims];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    qpos[r] = s.start_position + i0 + min(int64_t{warp + 8 * r}, rows_here - 1);
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDims; ++c) acc[r][c] = 0.0f;
  }
  const int64_t last_position = s.start_position + i0 + rows_here - 1;
  const int64_t num_key_tiles = last_position / kPrefillKeys + 1;
  const int64_t first_key_tile = WindowFirstKey(s.start_position + i0, a.window) / kPrefillKeys;

  for (int64_t kt = first_key_tile; kt < num_key_tiles; ++kt) {
    __syncthreads();  // the previous tile's k_s / v_s reads are done
    if (threadIdx.x < kPrefillKeys) {
      const int64_t kpos = kt * kPrefillKeys + threadIdx.x;
      slot_s[threadIdx.x] = kpos <= last_position ? SlotOffset(a.pool, table, kpos, g) : -1;
    }
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < kPrefillKeys * hd; idx += blockDim.x) {
      const int64_t kj = idx / hd, d = idx % hd;
      const int64_t off = slot_s[kj];
      k_s[kj * hdp + d] = off >= 0 ? LoadKv<kKv>(a.pool.k, off + d, a.pool.k_scale) : 0.0f;
      v_s[kj * hd + d] = off >= 0 ? LoadKv<kKv>(a.pool.v, off + d, a.pool.v_scale) : 0.0f;
    }
    __syncthreads();
    const int64_t kpos = kt * kPrefillKeys + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t qi = warp + 8 * r;
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot = fmaf(q_s[qi * hd + d], k_s[lane * hdp + d], dot);
      const bool valid = KeyVisible(kpos, qpos[r], a.window);
      const float score = valid ? SoftCapScore(a.scale * dot, a.softcap) : -INFINITY;
      const float m_new = fmaxf(m[r], WarpMax(score));  // -inf only before the row's window
      const float p = valid ? ExpShifted(score, m_new) : 0.0f;
      const float correction = Rescale(m[r], m_new);  // 0 on the row's first seen key
      l[r] = l[r] * correction + WarpSum(p);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kDims; ++c) acc[r][c] *= correction;
      for (int kj = 0; kj < kPrefillKeys; ++kj) {
        const float pk = __shfl_sync(0xFFFFFFFFu, p, kj);
#pragma unroll
        for (int c = 0; c < kDims; ++c) {
          const int64_t d = lane + 32 * c;
          if (d < hd) acc[r][c] = fmaf(pk, v_s[kj * hd + d], acc[r][c]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t qi = warp + 8 * r;
    if (qi >= rows_here) continue;
    bf16* o = a.out + ((s.first_row + i0 + qi) * a.num_heads + head) * hd;
#pragma unroll
    for (int c = 0; c < kDims; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < hd) o[d] = F32ToBf16(acc[r][c] / l[r]);
    }
  }
}

// Raises a kernel's dynamic shared memory limit past the default 48 KiB, once per kernel,
// device and size (so not while a stream is being captured, after the first eager run).
cudaError_t AllowSmem(const void* kernel, int64_t bytes) {
  if (bytes <= kDefaultSmem) return cudaSuccess;
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int64_t> allowed;
  std::lock_guard<std::mutex> lock(mu);
  int64_t& have = allowed[{kernel, device}];
  if (have >= bytes) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
  if (e == cudaSuccess) have = bytes;
  return e;
}

template <KvKind kKv>
cudaError_t LaunchDecode(const AttnArgs& a, cudaStream_t stream) {
  const int64_t bytes = DecodeLayout(a.group, a.pool.head_dim, a.keys_cap).bytes;
  if (cudaError_t e = AllowSmem(reinterpret_cast<const void*>(DecodeKernel<kKv>), bytes); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.step.num_decode),
                  static_cast<unsigned>(a.pool.num_kv_heads), static_cast<unsigned>(a.num_splits));
  DecodeKernel<kKv><<<grid, kDecodeThreads, bytes, stream>>>(a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || a.num_splits == 1) return e;
  const dim3 combine(static_cast<unsigned>(a.step.num_decode), static_cast<unsigned>(a.num_heads));
  const int64_t combine_bytes = a.num_splits * 4;
  if (cudaError_t e = AllowSmem(reinterpret_cast<const void*>(CombineKernel), combine_bytes); e != cudaSuccess) return e;
  CombineKernel<<<combine, kDecodeThreads, combine_bytes, stream>>>(a);
  return cudaGetLastError();
}

template <KvKind kKv, int kDims>
cudaError_t LaunchPrefillDims(const AttnArgs& a, cudaStream_t stream) {
  const int64_t bytes = PrefillSmemBytes(a.pool.head_dim);
  if (cudaError_t e = AllowSmem(reinterpret_cast<const void*>(PrefillKernel<kKv, kDims>), bytes); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(a.step.num_prefill_tiles),
                  static_cast<unsigned>(a.num_heads));
  PrefillKernel<kKv, kDims><<<grid, kPrefillThreads, bytes, stream>>>(a);
  return cudaGetLastError();
}

template <KvKind kKv>
cudaError_t LaunchPrefill(const AttnArgs& a, cudaStream_t stream) {
  switch ((a.pool.head_dim + 31) / 32) {
    case 1: return LaunchPrefillDims<kKv, 1>(a, stream);
    case 2: return LaunchPrefillDims<kKv, 2>(a, stream);
    case 3: return LaunchPrefillDims<kKv, 3>(a, stream);
    case 4: return LaunchPrefillDims<kKv, 4>(a, stream);
    case 5: return LaunchPrefillDims<kKv, 5>(a, stream);
    case 6: return LaunchPrefillDims<kKv, 6>(a, stream);
    case 7: return LaunchPrefillDims<kKv, 7>(a, stream);
    case 8: return LaunchPrefillDims<kKv, 8>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <KvKind kKv>
cudaError_t LaunchAttention(const AttnArgs& a, cudaStream_t stream) {
  if (a.step.num_decode > 0) {
    if (cudaError_t e = LaunchDecode<kKv>(a, stream); e != cudaSuccess) return e;
  }
  if (a.step.num_prefill_tiles > 0) return LaunchPrefill<kKv>(a, stream);
  return cudaSuccess;
}

}  // namespace

LaunchResult LaunchWriteKv(const void* k_new, const void* v_new, const DeviceKvPool& pool,
                           const DeviceStep& step, void* stream) {
  if (step.num_rows <= 0) return cudaSuccess;
  WriteKvKernel<<<static_cast<unsigned>(step.num_rows), 128, 0,
                  static_cast<cudaStream_t>(stream)>>>(static_cast<const bf16*>(k_new),
                                                       static_cast<const bf16*>(v_new), pool,
                                                       step);
  return cudaGetLastError();
}

LaunchResult LaunchPagedAttention(const void* q, int64_t num_heads,
                                  const AttentionScores& scores, const DeviceKvPool& pool,
                                  const DeviceStep& step, const AttentionPlan& plan,
                                  float* scratch, void* out, void* stream) {
  if (!AttentionFits(num_heads, pool) || plan.keys_per_split <= 0) return cudaErrorInvalidValue;
  if (scores.window < 0 || scores.softcap < 0.0f) return cudaErrorInvalidValue;
  if (plan.num_splits > 1 && scratch == nullptr) return cudaErrorInvalidValue;
  AttnArgs a;
  a.q = static_cast<const bf16*>(q);
  a.out = static_cast<bf16*>(out);
  a.pool = pool;
  a.step = step;
  a.num_heads = static_cast<int32_t>(num_heads);
  a.group = static_cast<int32_t>(num_heads / pool.num_kv_heads);
  a.scale = scores.scale;
  a.window = scores.window;
  a.softcap = scores.softcap;
  a.num_splits = plan.num_splits;
  a.keys_cap = plan.keys_per_split;
  const int64_t parts = static_cast<int64_t>(step.num_decode) * num_heads * plan.num_splits;
  a.part_out = scratch;
  a.part_stat = scratch == nullptr ? nullptr : scratch + parts * pool.head_dim;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (pool.kind) {
    case KvKind::kF32: return LaunchAttention<KvKind::kF32>(a, s);
    case KvKind::kF16: return LaunchAttention<KvKind::kF16>(a, s);
    case KvKind::kBF16: return LaunchAttention<KvKind::kBF16>(a, s);
    case KvKind::kFp8: return LaunchAttention<KvKind::kFp8>(a, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace tpserve::cuda
