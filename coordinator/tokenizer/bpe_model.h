// Byte-pair-encoding model: turns one pre-token (raw bytes) into token ids by repeatedly
// merging the adjacent pair with the lowest merge rank, leftmost first, exactly as llama.cpp
// and Hugging Face `tokenizers` do. Works on raw bytes; vocabularies stored in the GPT-2
// byte-level alphabet are converted by the caller (see byte_level.h).
//
//   TP_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Create(token_bytes, merges, false));
//   bpe.EncodePiece(" hello", &ids);
//
// Cost: O(n log n) in the piece length n (a heap of candidate pairs over a linked list of
// symbols), so a 200 KB piece with no spaces is fine.
//
// Threading: immutable after Create; EncodePiece may be called from many threads at once.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_BPE_MODEL_H_
#define TPSERVE_COORDINATOR_TOKENIZER_BPE_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace tpserve {

class BpeModel {
 public:
  // `token_bytes[id]` is the raw byte string of token `id` (vocab_size = its size); when two
  // tokens share bytes the first keeps them. `merges_bytes[rank]` is a pair (left, right) of
  // raw byte strings; a repeated pair keeps its first (lowest) rank. Merge operands or
  // results that are not tokens are allowed: they become internal symbols that fall back to
  // per-byte tokens if they survive to the output (llama.cpp's behaviour).
  // With `ignore_merges` (Llama 3) a piece that is itself a token is emitted whole.
  // INVALID_ARGUMENT naming the rank when a merge has an empty side.
  static absl::StatusOr<BpeModel> Create(
      const std::vector<std::string>& token_bytes,
      const std::vector<std::pair<std::string, std::string>>& merges_bytes, bool ignore_merges);

  // Appends the ids for `piece`. Bytes with no token of their own (a vocabulary lacking some
  // single-byte token) are dropped, as llama.cpp does.
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;

  // Merges `token_ids` (a piece already cut into tokens, in order) by rank exactly as
  // EncodePiece merges bytes, and appends the result. For vocabularies whose starting symbols
  // are not bytes (char_bpe_model.h starts from characters).
  // REQUIRES: every id is in [0, vocab_size).
  void MergeTokens(std::vector<int32_t> token_ids, std::vector<int32_t>* ids) const;

  // Id of the token whose bytes are exactly `bytes`, or -1.
  int32_t TokenId(std::string_view bytes) const;

  int32_t vocab_size() const { return vocab_size_; }
  int32_t num_merges() const { return static_cast<int32_t>(merges_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_symbol;
  };

  BpeModel() = default;
  int32_t InternSymbol(const std::string& bytes);
  // Merges adjacent symbols by rank and appends what is left, each through EmitSymbol.
  void MergeSymbols(std::vector<int32_t> symbol_ids, std::vector<int32_t>* ids) const;
  // Appends `symbol`, or the per-byte tokens of an internal (non-token) symbol.
  void EmitSymbol(int32_t symbol, std::vector<int32_t>* ids) const;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  int32_t vocab_size_ = 0;
  bool ignore_merges_ = false;
  // Symbol ids: [0, vocab_size) are tokens; the rest are internal merge operands/results.
  absl::flat_hash_map<std::string, int32_t> symbol_ids_;
  std::vector<std::string> internal_symbol_bytes_;  // index = symbol id - vocab_size
  int32_t byte_symbols_[256];
  absl::flat_hash_map<uint64_t, Merge> merges_;  // PairKey(left, right) -> merge
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_BPE_MODEL_H_
