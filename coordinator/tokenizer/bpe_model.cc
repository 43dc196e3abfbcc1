#include "coordinator/tokenizer/bpe_model.h"

#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace tpserve {
namespace {

// One symbol of the word being merged; `length == 0` marks one absorbed by its left side.
struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t length;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index; the right one is left's successor when queued
  int32_t left_id;
  int32_t right_id;
};

// Lowest rank first; among equal ranks the leftmost pair, as llama.cpp and HF order them.
struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

}  // namespace

absl::StatusOr<BpeModel> BpeModel::Create(
    const std::vector<std::string>& token_bytes,
    const std::vector<std::pair<std::string, std::string>>& merges_bytes, bool ignore_merges) {
  BpeModel model;
  model.vocab_size_ = static_cast<int32_t>(token_bytes.size());
  model.ignore_merges_ = ignore_merges;
  model.symbol_ids_.reserve(token_bytes.size());
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (token_bytes[id].empty()) continue;
    model.symbol_ids_.try_emplace(token_bytes[id], static_cast<int32_t>(id));
  }
  for (int byte = 0; byte < 256; ++byte) {
    model.byte_symbols_[byte] = model.InternSymbol(std::string(1, static_cast<char>(byte)));
  }
  model.merges_.reserve(merges_bytes.size());
  for (size_t rank = 0; rank < merges_bytes.size(); ++rank) {
    const auto& [left, right] = merges_bytes[rank];
    if (left.empty() || right.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("merge rank %d has an empty %s side", rank,
                                                        left.empty() ? "left" : "right"));
    }
    const int32_t left_id = model.InternSymbol(left);
    const int32_t right_id = model.InternSymbol(right);
    const int32_t merged_id = model.InternSymbol(left + right);
    model.merges_.try_emplace(PairKey(left_id, right_id),
                              Merge{static_cast<int32_t>(rank), merged_id});
  }
  return model;
}

int32_t BpeModel::InternSymbol(const std::string& bytes) {
  const int32_t next_id = vocab_size_ + static_cast<int32_t>(internal_symbol_bytes_.size());
  const auto [it, inserted] = symbol_ids_.try_emplace(bytes, next_id);
  if (inserted) internal_symbol_bytes_.push_back(bytes);
  return it->second;
}

int32_t BpeModel::TokenId(std::string_view bytes) const {
  const auto it = symbol_ids_.find(absl::string_view(bytes.data(), bytes.size()));
  return (it != symbol_ids_.end() && it->second < vocab_size_) ? it->second : -1;
}

void BpeModel::EmitSymbol(int32_t symbol, std::vector<int32_t>* ids) const {
  if (symbol < vocab_size_) {
    ids->push_back(symbol);
    return;
  }
  for (const char byte : internal_symbol_bytes_[symbol - vocab_size_]) {
    const int32_t byte_symbol = byte_symbols_[static_cast<uint8_t>(byte)];
    if (byte_symbol < vocab_size_) ids->push_back(byte_symbol);
  }
}

void BpeModel::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    const int32_t whole = TokenId(piece);
    if (whole >= 0) {
      ids->push_back(whole);
      return;
    }
  }
  std::vector<int32_t> symbol_ids(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    symbol_ids[i] = byte_symbols_[static_cast<uint8_t>(piece[i])];
  }
  MergeSymbols(std::move(symbol_ids), ids);
}

void BpeModel::MergeTokens(std::vector<int32_t> token_ids, std::vector<int32_t>* ids) const {
  MergeSymbols(std::move(token_ids), ids);
}

void BpeModel::MergeSymbols(std::vector<int32_t> symbol_ids, std::vector<int32_t>* ids) const {
  if (symbol_ids.empty()) return;
  const auto n = static_cast<int32_t>(symbol_ids.size());
  std::vector<Symbol> symbols(n);
  for (int32_t i = 0; i < n; ++i) {
    symbols[i] = Symbol{symbol_ids[i], i - 1, i + 1 < n ? i + 1 : -1, 1};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateAfter> queue;
  const auto push_pair = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[l.next];
    const auto it = merges_.find(PairKey(l.id, r.id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, left, l.id, r.id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    // Stale when either side has changed since it was queued: symbols only ever grow, so
    // equal ids on both (still adjacent) sides mean the very same pair.
    if (left.length == 0 || left.next < 0 || left.id != top.left_id) continue;
    Symbol& right = symbols[left.next];
    if (right.id != top.right_id) continue;
    left.id = merges_.find(PairKey(left.id, right.id))->second.merged_symbol;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.left;
    push_pair(left.prev);
    push_pair(top.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) EmitSymbol(symbols[i].id, ids);
}

}  // namespace tpserve
