// The paged KV cache's allocator: the one owner of which physical block holds which tokens of
// which sequence. Workers only store blocks; they receive block tables from here with each step.
//
//   BlockManager blocks(/*num_blocks=*/1024, /*block_size_tokens=*/16);
//   if (blocks.CanAllocate(prompt_len)) TP_RETURN_IF_ERROR(blocks.Allocate(seq_id, prompt_len));
//
// Invariant after every call: num_free_blocks() + num_used_blocks() == num_blocks().
// Threading: not thread-safe; owned by the scheduler's thread.
#ifndef TPSERVE_COORDINATOR_BLOCK_MANAGER_H_
#define TPSERVE_COORDINATOR_BLOCK_MANAGER_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

namespace tpserve {

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size_tokens);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t block_size_tokens() const { return block_size_tokens_; }
  int32_t num_free_blocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used_blocks() const { return num_blocks_ - num_free_blocks(); }

  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksFor(int64_t num_tokens) const;

  // True when `num_tokens` more tokens fit for `seq_id` (a new sequence holds 0 tokens).
  bool CanGrow(int64_t seq_id, int64_t num_tokens) const;

  // Makes room for `num_tokens` more tokens of `seq_id`, creating the sequence if new.
  // RESOURCE_EXHAUSTED (changing nothing) when the free blocks do not suffice.
  absl::Status Grow(int64_t seq_id, int64_t num_tokens);

  // Returns every block of `seq_id` to the free list; unknown ids are a no-op (a cancelled
  // request may be freed twice: by the cancel and by the step that notices it).
  void Free(int64_t seq_id);

  // Physical block ids of `seq_id` in logical order; empty for unknown ids.
  const std::vector<int32_t>& BlockTable(int64_t seq_id) const;
  int64_t NumTokens(int64_t seq_id) const;
  bool Contains(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int64_t num_tokens = 0;
  };

  const int32_t num_blocks_;
  const int32_t block_size_tokens_;
  std::vector<int32_t> free_;  // LIFO: recently freed blocks are reused first (warm in cache)
  std::unordered_map<int64_t, Sequence> seqs_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_BLOCK_MANAGER_H_
