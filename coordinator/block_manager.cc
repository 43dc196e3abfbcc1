#include "coordinator/block_manager.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/splitmix.h"

namespace tpserve {
namespace {

// The key of a block: its parent's key (0 for the first block) and its token ids, chained, so
// equal keys mean (barring a collision, which Lookup rules out) equal token prefixes.
uint64_t ChainKey(uint64_t parent_key, absl::Span<const int32_t> tokens) {
  uint64_t h = SplitMix64(parent_key);
  for (int32_t t : tokens) h = SplitMix64(h ^ static_cast<uint32_t>(t));
  return h;
}

// The parent key of a partition's first blocks: chains of different partitions never meet.
uint64_t PartitionSeed(int32_t partition) { return static_cast<uint64_t>(partition); }

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size_tokens,
                           bool enable_prefix_caching, int32_t num_partitions)
    : num_blocks_(num_blocks),
      block_size_tokens_(block_size_tokens),
      prefix_caching_(enable_prefix_caching),
      blocks_(num_blocks),
      free_(num_partitions),
      evictable_(num_partitions) {
  const int32_t per = num_blocks / num_partitions;
  for (int32_t p = 0; p < num_partitions; ++p) {
    free_[p].reserve(per);
    for (int32_t b = (p + 1) * per - 1; b >= p * per; --b) free_[p].push_back(b);
  }
}

int32_t BlockManager::num_free_blocks() const {
  int32_t n = 0;
  for (int32_t p = 0; p < num_partitions(); ++p) n += num_free_blocks(p);
  return n;
}

int32_t BlockManager::num_cached_blocks() const {
  int32_t n = 0;
  for (const std::list<int32_t>& lru : evictable_) n += static_cast<int32_t>(lru.size());
  return n;
}

int32_t BlockManager::PartitionOf(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.partition;
}

int32_t BlockManager::BlocksFor(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_tokens_ - 1) / block_size_tokens_);
}

bool BlockManager::CanGrow(int64_t seq_id, int64_t num_tokens) const {
  const int64_t have_tokens = NumTokens(seq_id);
  const int32_t have_blocks = BlocksFor(have_tokens);
  return BlocksFor(have_tokens + num_tokens) - have_blocks <= num_free_blocks(PartitionOf(seq_id));
}

int32_t BlockManager::TakeFreeBlock(int32_t partition) {
  std::vector<int32_t>& free = free_[partition];
  if (!free.empty()) {
    const int32_t b = free.back();
    free.pop_back();
    return b;
  }
  // Evict the least recently released cached block: its KV is about to be overwritten.
  const int32_t b = evictable_[partition].front();
  evictable_[partition].pop_front();
  Block& block = blocks_[b];
  cached_.erase(block.key);
  block.registered = false;
  block.tokens.clear();
  return b;
}

void BlockManager::Reference(int32_t b) {
  Block& block = blocks_[b];
  if (block.ref_count == 0) {  // only registered blocks are shared
    evictable_[PartitionOfBlock(b)].erase(block.lru_pos);
  }
  ++block.ref_count;
}

void BlockManager::Release(int32_t b) {
  Block& block = blocks_[b];
  const int32_t p = PartitionOfBlock(b);
  if (block.registered) {
    block.lru_pos = evictable_[p].insert(evictable_[p].end(), b);
  } else {
    free_[p].push_back(b);
  }
}

absl::Status BlockManager::Grow(int64_t seq_id, int64_t num_tokens) {
  if (!CanGrow(seq_id, num_tokens)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache: sequence ", seq_id, " needs ",
        BlocksFor(NumTokens(seq_id) + num_tokens) - BlocksFor(NumTokens(seq_id)),
        " more blocks of ", block_size_tokens_, " tokens, ",
        num_free_blocks(PartitionOf(seq_id)), " of ", blocks_per_partition(),
        num_partitions() > 1 ? absl::StrCat(" of its partition ", PartitionOf(seq_id)) : "",
        " are free"));
  }
  Sequence& seq = seqs_[seq_id];
  seq.num_tokens += num_tokens;
  while (static_cast<int32_t>(seq.blocks.size()) < BlocksFor(seq.num_tokens)) {
    const int32_t b = TakeFreeBlock(seq.partition);
    blocks_[b].ref_count = 1;
    seq.blocks.push_back(b);
  }
  return absl::OkStatus();
}

void BlockManager::Shrink(int64_t seq_id, int64_t num_tokens) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second.num_tokens <= num_tokens) return;
  Sequence& seq = it->second;
  // Registered blocks hold computed tokens: never shrunk away.
  seq.num_tokens = std::max<int64_t>(num_tokens, int64_t{seq.num_registered} * block_size_tokens_);
  while (static_cast<int32_t>(seq.blocks.size()) > BlocksFor(seq.num_tokens)) {
    if (--blocks_[seq.blocks.back()].ref_count == 0) Release(seq.blocks.back());
    seq.blocks.pop_back();
  }
}

int32_t BlockManager::Lookup(uint64_t parent_key, absl::Span<const int32_t> tokens) const {
  auto it = cached_.find(ChainKey(parent_key, tokens));
  if (it == cached_.end()) return -1;
  const Block& block = blocks_[it->second];
  if (block.parent_key != parent_key || !std::equal(tokens.begin(), tokens.end(),
                                                     block.tokens.begin(), block.tokens.end())) {
    return -1;  // a hash collision: another prefix's KV
  }
  return it->second;
}

PrefixMatch BlockManager::MatchPrefix(absl::Span<const int32_t> tokens,
                                      int32_t partition) const {
  PrefixMatch match;
  match.partition = partition;
  match.last_key = PartitionSeed(partition);
  if (!prefix_caching_ || tokens.empty()) return match;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / block_size_tokens_;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const int32_t b =
        Lookup(match.last_key, tokens.subspan(i * block_size_tokens_, block_size_tokens_));
    if (b < 0) break;
    match.blocks.push_back(b);
    match.last_key = blocks_[b].key;
  }
  match.num_tokens = static_cast<int64_t>(match.blocks.size()) * block_size_tokens_;
  return match;
}

bool BlockManager::CanAdmit(const PrefixMatch& match, int64_t num_tokens) const {
  int32_t revived = 0;  // evictable now, in use once referenced
  for (int32_t b : match.blocks) revived += blocks_[b].ref_count == 0 ? 1 : 0;
  const int32_t needed =
      BlocksFor(match.num_tokens + num_tokens) - static_cast<int32_t>(match.blocks.size());
  return needed <= num_free_blocks(match.partition) - revived;
}

absl::Status BlockManager::Admit(int64_t seq_id, const PrefixMatch& match, int64_t num_tokens) {
  if (Contains(seq_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache: sequence ", seq_id, " already holds blocks"));
  }
  if (!CanAdmit(match, num_tokens)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache: sequence ", seq_id, " needs ",
        BlocksFor(match.num_tokens + num_tokens) - static_cast<int32_t>(match.blocks.size()),
        " more blocks of ", block_size_tokens_, " tokens after ", match.blocks.size(),
        " cached ones, ", num_free_blocks(match.partition), " of ", blocks_per_partition(),
        num_partitions() > 1 ? absl::StrCat(" of partition ", match.partition) : "", " are free"));
  }
  Sequence& seq = seqs_[seq_id];
  seq.partition = match.partition;
  for (int32_t b : match.blocks) Reference(b);
  seq.blocks = match.blocks;
  seq.num_tokens = match.num_tokens;
  seq.num_registered = static_cast<int32_t>(match.blocks.size());
  seq.last_key = match.last_key;
  return Grow(seq_id, num_tokens);  // CanAdmit checked that it fits
}

void BlockManager::MarkComputed(int64_t seq_id, absl::Span<const int32_t> computed_tokens) {
  auto it = seqs_.find(seq_id);
  if (!prefix_caching_ || it == seqs_.end()) return;
  Sequence& seq = it->second;
  const int32_t full = static_cast<int32_t>(std::min<int64_t>(
      static_cast<int64_t>(computed_tokens.size()) / block_size_tokens_, seq.blocks.size()));
  for (; seq.num_registered < full; ++seq.num_registered) {
    const absl::Span<const int32_t> tokens =
        computed_tokens.subspan(int64_t{seq.num_registered} * block_size_tokens_,
                                block_size_tokens_);
    const uint64_t key = ChainKey(seq.last_key, tokens);
    const int32_t b = seq.blocks[seq.num_registered];
    // A duplicate keeps its block private (freed to the free list); the chain goes on by key.
    if (cached_.emplace(key, b).second) {
      Block& block = blocks_[b];
      block.registered = true;
      block.key = key;
      block.parent_key = seq.last_key;
      block.tokens.assign(tokens.begin(), tokens.end());
    }
    seq.last_key = key;
  }
}

void BlockManager::ForgetCachedPrefixes() {
  for (size_t p = 0; p < evictable_.size(); ++p) {
    for (int32_t b : evictable_[p]) free_[p].push_back(b);
    evictable_[p].clear();
  }
  for (Block& block : blocks_) {
    block.registered = false;
    block.key = block.parent_key = 0;
    block.tokens.clear();
  }
  cached_.clear();
}

void BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) {
    if (--blocks_[*b].ref_count > 0) continue;  // another sequence still reads it
    Release(*b);
  }
  seqs_.erase(it);
}

int32_t BlockManager::num_used_blocks() const {
  std::vector<bool> seen(num_blocks_, false);
  int32_t used = 0;
  for (const auto& [id, seq] : seqs_) {
    for (int32_t b : seq.blocks) {
      if (!seen[b]) {
        seen[b] = true;
        ++used;
      }
    }
  }
  return used;
}

const std::vector<int32_t>& BlockManager::BlockTable(int64_t seq_id) const {
  static const std::vector<int32_t> kEmpty;
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? kEmpty : it->second.blocks;
}

int64_t BlockManager::NumTokens(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

}  // namespace tpserve
