// The paged KV cache's allocator: the one owner of which physical block holds which tokens of
// which sequence. Workers only store blocks; they receive block tables with each step, so a
// block shared by two tables here is shared on every rank's KV slice.
//
//   BlockManager blocks(/*num_blocks=*/1024, /*block_size_tokens=*/16);
//   PrefixMatch hit = blocks.MatchPrefix(prompt);  // full blocks another sequence computed
//   if (blocks.CanAdmit(hit, n)) TP_RETURN_IF_ERROR(blocks.Admit(seq_id, hit, n));
//   ... the step ran ...  blocks.MarkComputed(seq_id, computed_tokens);
//
// Prefix caching (automatic, like vLLM's): a *full* block whose KV has been computed is
// registered under a key, a hash chain over the token ids of it and of every block before it.
// Blocks are reference counted; a sequence that starts with the same full blocks takes
// references to them instead of computing them. A registered block that no sequence references
// stays "cached": it still holds valid KV and may be revived by a lookup, until an allocation
// that finds the free list empty evicts it (least recently released first) and drops its key.
//
// Every block is in exactly one of three places:
//   free list       no key, no references;
//   evictable LRU   registered (has a key), no references;
//   in use          referenced by >= 1 sequence's table (refcount = number of tables holding it).
// Invariant after every call: num_free_blocks() + num_used_blocks() == num_blocks(), where
// num_free_blocks() counts the free list *and* the evictable blocks (both can be allocated) and
// num_used_blocks() counts distinct blocks referenced by at least one table.
//
// Partitions (data-parallel attention, model/sharding.h): the blocks may be split into
// num_partitions() equal pools, one per rank, each rank's KV cache holding only its own. A
// sequence lives in one partition (chosen when it is admitted: PrefixMatch::partition) and every
// block it takes is of that partition; blocks are numbered across partitions (partition p holds
// [p * blocks_per_partition(), (p + 1) * blocks_per_partition())), and the prefix cache keys each
// partition's chains apart, so a prefix is found only in the partition that computed it.
//
// Threading: not thread-safe; the engine owns it and uses it (directly and through the
// scheduler) from its step thread only.
#ifndef TPSERVE_COORDINATOR_BLOCK_MANAGER_H_
#define TPSERVE_COORDINATOR_BLOCK_MANAGER_H_

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace tpserve {

// The cached full blocks a new sequence can start with. Valid until the next call that changes
// the block manager (an allocation may evict the blocks it names).
struct PrefixMatch {
  int64_t num_tokens = 0;       // == blocks.size() * block_size_tokens
  std::vector<int32_t> blocks;  // physical ids, in logical order
  uint64_t last_key = 0;        // key of the last block (the chain's seed when empty)
  int32_t partition = 0;        // where the blocks are, and where the sequence will live
};

class BlockManager {
 public:
  // REQUIRES: num_partitions >= 1 divides num_blocks.
  BlockManager(int32_t num_blocks, int32_t block_size_tokens, bool enable_prefix_caching = true,
               int32_t num_partitions = 1);

  int32_t num_blocks() const { return num_blocks_; }
  int32_t num_partitions() const { return static_cast<int32_t>(free_.size()); }
  int32_t blocks_per_partition() const { return num_blocks_ / num_partitions(); }
  // The partition of physical block `block`, and its number within that partition's pool.
  int32_t PartitionOfBlock(int32_t block) const { return block / blocks_per_partition(); }
  int32_t LocalBlock(int32_t block) const { return block % blocks_per_partition(); }
  // The partition `seq_id` lives in (0 for unknown ids).
  int32_t PartitionOf(int64_t seq_id) const;
  int32_t block_size_tokens() const { return block_size_tokens_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks an allocation may take: unregistered free ones plus evictable cached ones.
  int32_t num_free_blocks() const;
  int32_t num_free_blocks(int32_t partition) const {
    return static_cast<int32_t>(free_[partition].size() + evictable_[partition].size());
  }
  // Distinct blocks in the sequences' tables, counted from the tables (O(blocks held)): not
  // derived from the free count, so free + used == total checks that no block is lost.
  int32_t num_used_blocks() const;
  // Of num_free_blocks(): registered blocks no sequence references (still hold valid KV).
  int32_t num_cached_blocks() const;
  // Tables referencing physical block `block` (0 when free or evictable).
  int32_t RefCount(int32_t block) const { return blocks_.at(block).ref_count; }

  // Blocks needed to hold `num_tokens` tokens.
  int32_t BlocksFor(int64_t num_tokens) const;

  // True when `num_tokens` more tokens fit for `seq_id` in its partition (a new sequence holds 0
  // tokens, in partition 0).
  bool CanGrow(int64_t seq_id, int64_t num_tokens) const;

  // Makes room for `num_tokens` more tokens of `seq_id`, creating the sequence if new. Takes
  // free blocks first, then evicts the least recently released cached ones.
  // RESOURCE_EXHAUSTED (changing nothing) when the free blocks do not suffice.
  absl::Status Grow(int64_t seq_id, int64_t num_tokens);

  // Gives back `seq_id`'s room beyond its first `num_tokens` tokens (speculative decoding
  // rolling back rejected drafted tokens): blocks past BlocksFor(num_tokens) are freed. Those
  // blocks were never registered (only computed, known tokens are), so the prefix cache is
  // untouched; a registered block is never given back this way (the sequence keeps at least
  // the tokens of its registered blocks). No-op for unknown ids or when the sequence holds no
  // more than `num_tokens`.
  void Shrink(int64_t seq_id, int64_t num_tokens);

  // The longest chain of cached full blocks that `tokens` starts with, capped at
  // floor((tokens.size() - 1) / block_size_tokens) blocks so that at least one token is always
  // left to compute (its logits are needed) and a sequence never writes into a shared block.
  // Empty when prefix caching is off. Looks in `partition` only, and the match names it.
  PrefixMatch MatchPrefix(absl::Span<const int32_t> tokens, int32_t partition = 0) const;

  // True when a new sequence can start with `match` and then grow by `num_tokens` tokens in the
  // match's partition: the match's evictable blocks stop being free once referenced.
  bool CanAdmit(const PrefixMatch& match, int64_t num_tokens) const;

  // Creates `seq_id` holding a reference to each block of `match` (its first match.num_tokens
  // tokens are computed), then grows it by `num_tokens`. INVALID_ARGUMENT if `seq_id` exists;
  // RESOURCE_EXHAUSTED (changing nothing) when !CanAdmit.
  absl::Status Admit(int64_t seq_id, const PrefixMatch& match, int64_t num_tokens);

  // The KV of `computed_tokens` (the first tokens of `seq_id`) is now written: registers each
  // of its full blocks not registered yet. A block whose key is already registered to another
  // block (two sequences computed the same prefix at once) stays unregistered. No-op when
  // prefix caching is off or `seq_id` is unknown.
  void MarkComputed(int64_t seq_id, absl::Span<const int32_t> computed_tokens);

  // Drops `seq_id`'s reference to each of its blocks. A block nobody references any more goes
  // to the evictable LRU if registered (the sequence's last blocks first, so a prefix's head
  // outlives its tail), else to the free list. Unknown ids are a no-op (a cancelled request
  // may be freed twice: by the cancel and by the step that notices it).
  void Free(int64_t seq_id);

  // Forgets every cached prefix: the ranks' KV is gone (a rank was replaced), so no registered
  // block may be matched again; they all become plain free blocks. REQUIRES: no sequence holds
  // blocks (Free them first).
  void ForgetCachedPrefixes();

  // Physical block ids of `seq_id` in logical order; empty for unknown ids.
  const std::vector<int32_t>& BlockTable(int64_t seq_id) const;
  int64_t NumTokens(int64_t seq_id) const;
  bool Contains(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }

 private:
  struct Block {
    int32_t ref_count = 0;
    bool registered = false;
    uint64_t key = 0;
    // What the key stands for, compared on lookup so a 64-bit collision cannot return another
    // prefix's KV: the parent block's key and this block's token ids.
    uint64_t parent_key = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru_pos;  // valid while evictable
  };
  struct Sequence {
    std::vector<int32_t> blocks;
    int64_t num_tokens = 0;
    int32_t num_registered = 0;  // leading blocks whose key is known (registered or duplicate)
    uint64_t last_key = 0;       // key of block num_registered - 1 (the seed when none)
    int32_t partition = 0;
  };

  // The registered block for (parent_key, tokens), or -1.
  int32_t Lookup(uint64_t parent_key, absl::Span<const int32_t> tokens) const;
  // REQUIRES: num_free_blocks(partition) > 0.
  int32_t TakeFreeBlock(int32_t partition);
  // Back to its partition's free list or, registered, its evictable LRU.
  void Release(int32_t block);
  void Reference(int32_t block);

  const int32_t num_blocks_;
  const int32_t block_size_tokens_;
  const bool prefix_caching_;
  std::vector<Block> blocks_;
  // Per partition. LIFO: recently freed blocks are reused first (warm in cache).
  std::vector<std::vector<int32_t>> free_;
  std::vector<std::list<int32_t>> evictable_;  // per partition; front = least recently released
  std::unordered_map<uint64_t, int32_t> cached_;  // key -> registered block
  std::unordered_map<int64_t, Sequence> seqs_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_BLOCK_MANAGER_H_
