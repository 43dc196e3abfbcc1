#include "coordinator/tokenizer/spm_model.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace tpserve {
namespace {

// One symbol of the text being merged: a byte range, linked to its current neighbours.
struct Symbol {
  size_t begin;
  size_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;   // -1 at the ends
};

// A candidate merge of two adjacent symbols whose concatenation is a vocabulary entry.
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  size_t length;  // of the concatenation when queued; a mismatch later means it is stale
};

// Max-heap order: the highest score first, then the leftmost pair (llama.cpp's order).
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

// llama.cpp's character length from the lead byte alone: continuation and invalid bytes count
// as one-byte characters, and a lead byte claims its full length even if what follows is not a
// continuation. Matching it byte for byte keeps ids identical on invalid UTF-8.
size_t LeadByteLength(unsigned char byte) {
  static constexpr size_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[byte >> 4];
}

}  // namespace

absl::StatusOr<SpmModel> SpmModel::Create(const std::vector<std::string>& texts,
                                          const std::vector<float>& scores) {
  if (scores.size() != texts.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "scores has %d entries but the vocabulary has %d", scores.size(), texts.size()));
  }
  SpmModel model;
  model.scores_ = scores;
  model.ids_.reserve(texts.size());
  for (size_t id = 0; id < texts.size(); ++id) {
    if (std::isnan(scores[id])) {
      return absl::InvalidArgumentError(absl::StrFormat("scores[%d] is NaN", id));
    }
    model.ids_.try_emplace(texts[id], static_cast<int32_t>(id));
  }
  for (int byte = 0; byte < 256; ++byte) {
    int32_t id = model.TokenId(absl::StrFormat("<0x%02X>", byte));
    if (id < 0) id = model.TokenId(std::string(1, static_cast<char>(byte)));
    model.byte_ids_[byte] = id;
  }
  return model;
}

int32_t SpmModel::TokenId(std::string_view text) const {
  const auto it = ids_.find(absl::string_view(text.data(), text.size()));
  return it == ids_.end() ? -1 : it->second;
}

void SpmModel::EncodeFragment(std::string_view text, bool add_space_prefix,
                              std::vector<int32_t>* ids) const {
  std::string escaped;
  escaped.reserve(text.size() + kSpmSpace.size() * 4);
  if (add_space_prefix) escaped.append(kSpmSpace);
  for (const char c : text) {
    if (c == ' ') {
      escaped.append(kSpmSpace);
    } else {
      escaped.push_back(c);
    }
  }
  EncodeEscaped(escaped, ids);
}

void SpmModel::EncodeEscaped(std::string_view escaped, std::vector<int32_t>* ids) const {
  if (escaped.empty()) return;
  std::vector<Symbol> symbols;
  for (size_t at = 0; at < escaped.size();) {
    const size_t length =
        std::min(LeadByteLength(static_cast<unsigned char>(escaped[at])), escaped.size() - at);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({at, length, index - 1, at + length == escaped.size() ? -1 : index + 1});
    at += length;
  }

  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t length = symbols[left].length + symbols[right].length;
    const int32_t id = TokenId(escaped.substr(symbols[left].begin, length));
    if (id >= 0) queue.push({scores_[id], left, right, length});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Symbols only grow, so a changed total length means one side merged since it was queued.
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  // Every merge made an entry, so a final symbol is either an entry or one unmerged character.
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = escaped.substr(symbols[i].begin, symbols[i].length);
    const int32_t id = TokenId(piece);
    if (id >= 0) {
      ids->push_back(id);
      continue;
    }
    for (const char byte : piece) {
      const int32_t byte_id = byte_ids_[static_cast<unsigned char>(byte)];
      if (byte_id >= 0) ids->push_back(byte_id);
    }
  }
}

}  // namespace tpserve
