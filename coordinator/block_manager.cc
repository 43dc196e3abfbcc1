#include "coordinator/block_manager.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace tpserve {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size_tokens)
    : num_blocks_(num_blocks), block_size_tokens_(block_size_tokens) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::BlocksFor(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + block_size_tokens_ - 1) / block_size_tokens_);
}

bool BlockManager::CanGrow(int64_t seq_id, int64_t num_tokens) const {
  const int64_t have_tokens = NumTokens(seq_id);
  const int32_t have_blocks = BlocksFor(have_tokens);
  return BlocksFor(have_tokens + num_tokens) - have_blocks <= num_free_blocks();
}

absl::Status BlockManager::Grow(int64_t seq_id, int64_t num_tokens) {
  if (!CanGrow(seq_id, num_tokens)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache: sequence ", seq_id, " needs ",
        BlocksFor(NumTokens(seq_id) + num_tokens) - BlocksFor(NumTokens(seq_id)),
        " more blocks of ", block_size_tokens_, " tokens, ", num_free_blocks(), " of ",
        num_blocks_, " are free"));
  }
  Sequence& seq = seqs_[seq_id];
  seq.num_tokens += num_tokens;
  while (static_cast<int32_t>(seq.blocks.size()) < BlocksFor(seq.num_tokens)) {
    seq.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return absl::OkStatus();
}

void BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) free_.push_back(*b);
  seqs_.erase(it);
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
