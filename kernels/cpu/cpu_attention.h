// CPU paged attention and KV-cache writes (CpuBackend::PagedAttention / WriteKv).
//
//   CpuAttention attn(kernels, &pool);
//   attn.Run(q, num_heads, {.scale = 1 / sqrt(head_dim)}, seqs, pool_view, out);
//
// Work is split into tasks of (sequence, KV head, chunk of query rows). A task computes the
// scores of all query heads sharing that KV head, for all its rows (a verification step's
// drafts, a prefill chunk) together, so each K and V block is read once for the group's heads
// times its rows (rows are grouped up to a bound on the scores' memory). Each row still gets
// the floats it would get alone: a key's score and a value's sums do not depend on which
// queries share a kernel call. Keys are visited block by block through the block table,
// contiguous within a block. f16 caches are read in place (the kernels widen in registers);
// bf16 and fp8 blocks are widened to f32 once per block and head for all of a group's rows.
// Threading: not thread-safe (owns per-thread score buffers); one call at a time.
#ifndef TPSERVE_KERNELS_CPU_CPU_ATTENTION_H_
#define TPSERVE_KERNELS_CPU_CPU_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/thread_pool.h"

namespace tpserve {

class CpuAttention {
 public:
  CpuAttention(const CpuKernels& kernels, ThreadPool* pool);

  // See Backend::WriteKv and Backend::PagedAttention for the contracts.
  void WriteKv(const float* k_new, const float* v_new, absl::Span<const AttentionSequence> seqs,
               const KvPoolView& pool) const;
  void Run(const float* q, int64_t num_heads, const Backend::AttentionParams& params,
           absl::Span<const AttentionSequence> seqs, const KvPoolView& pool, float* out);
  // Backend::PrefillAttention: one task per (sequence, head), keys and values read in place
  // from the step's rows.
  void RunPrefill(const float* q, const float* k, const float* v, int64_t num_heads,
                  int64_t key_dim, int64_t value_dim, float scale,
                  absl::Span<const AttentionSequence> seqs, float* out);

 private:
  struct Task {
    int64_t seq;
    int64_t kv_head;
    int64_t row_begin;   // within the sequence
    int64_t row_end;
    int64_t head_begin;  // query heads within the KV group
    int64_t head_end;
  };
  void RunTask(const Task& task, const float* q, int64_t num_heads,
               const Backend::AttentionParams& params,
               absl::Span<const AttentionSequence> seqs, const KvPoolView& pool, float* out,
               std::vector<float>* scores, std::vector<float>* kv) const;
  // Widens `count` rows of head_dim elements of a bf16 or fp8 pool, starting at element `offset`
  // and `stride` elements apart, into out [count, head_dim] f32.
  void RowsToF32(const KvPoolView& pool, const void* base, int64_t offset, int64_t count,
                 int64_t stride, float scale, float* out) const;

  const CpuKernels& kernels_;
  ThreadPool* pool_;
  std::vector<std::vector<float>> scores_;  // per thread: [heads of a task, context] scores
  std::vector<std::vector<float>> kv_scratch_;  // per thread: one block of K or V rows in f32
  std::vector<Task> tasks_;
  std::vector<const AttentionSequence*> fresh_;  // RunPrefill's sequences
};

}  // namespace tpserve

#endif  // TPSERVE_KERNELS_CPU_CPU_ATTENTION_H_
