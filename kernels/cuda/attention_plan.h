// The launch plan of the CUDA backend's own (SIMT) attention kernels (attention_kernels.cu):
// whether a shape fits them, and how decode rows split their keys across blocks, with the f32
// scratch the splits' combine pass reads. Plain C++, built everywhere: the memory plan bounds
// that scratch from it (attention_workspace.h), and it is tested without a GPU.
//
//   const AttentionPlan plan =
//       PlanAttention(num_heads, pool, step.num_decode, step.max_decode_context, num_sms);
//
// Thread-safe: pure functions.
#ifndef TPSERVE_KERNELS_CUDA_ATTENTION_PLAN_H_
#define TPSERVE_KERNELS_CUDA_ATTENTION_PLAN_H_

#include <cstdint>

#include "kernels/cuda/device_types.h"
#include "kernels/cuda/host_device.h"

namespace tpserve::cuda {

inline constexpr int64_t kMaxAttentionHeadDim = 256;
// Shared memory one decode block may use (an opt-in above the default 48 KiB; Hopper has 227).
inline constexpr int64_t kDecodeSmemBudget = 96 * 1024;

// How the decode rows of a step are split along their keys.
struct AttentionPlan {
  int32_t num_splits = 1;      // key ranges per (decode row, KV head); 1: no combine pass
  int32_t keys_per_split = 0;  // most keys one split block holds (its shared-memory cap)
  int64_t scratch_floats = 0;  // f32 scratch the splits need (0 when num_splits == 1)
};

// Shared memory of a decode block, in bytes, and where each part starts.
struct DecodeSmem {
  int64_t q, p, slots, stat, bytes;
};
TP_HD DecodeSmem DecodeLayout(int64_t group, int64_t head_dim, int64_t keys_cap) {
  DecodeSmem l;
  l.q = 0;                                             // f32 [group][head_dim]
  l.p = l.q + group * head_dim * 4;                    // f32 [group][keys_cap]
  l.slots = (l.p + group * keys_cap * 4 + 7) / 8 * 8;  // int64 [keys_cap]
  l.stat = l.slots + keys_cap * 8;                     // f32 [group][2]
  l.bytes = l.stat + group * 2 * 4;
  return l;
}

// The most keys one decode block holds for this group size and head_dim (0: none fit).
int64_t KeysCap(int64_t group, int64_t head_dim);

// Whether the kernels handle this shape: 1 <= head_dim <= kMaxAttentionHeadDim, num_heads a
// positive multiple of the pool's KV heads, and a KV group small enough for shared memory.
bool AttentionFits(int64_t num_heads, const DeviceKvPool& pool);

// The split plan for `num_decode` one-token rows of at most `context_bound` keys each (the
// step's max_decode_context, or a larger bound that keeps the plan fixed across steps, as a
// captured step needs). REQUIRES: AttentionFits. num_sms: the device's multiprocessors (splits
// fill them).
AttentionPlan PlanAttention(int64_t num_heads, const DeviceKvPool& pool, int64_t num_decode,
                            int64_t context_bound, int num_sms);

// The most scratch bytes PlanAttention asks for over every step of at most `max_decode_rows`
// decode rows of at most `max_context` keys. REQUIRES: AttentionFits.
int64_t MaxAttentionScratchBytes(int64_t num_heads, const DeviceKvPool& pool,
                                 int64_t max_decode_rows, int64_t max_context, int num_sms);

}  // namespace tpserve::cuda

#endif  // TPSERVE_KERNELS_CUDA_ATTENTION_PLAN_H_
