// Byte-pair encoding over Unicode characters with byte fallback, as Hugging Face `tokenizers`
// runs model.type "BPE" with `byte_fallback: true` (the tokenizer.json of SentencePiece models
// converted by transformers: Llama 2, Mistral, Gemma). A piece is cut into UTF-8 characters; a
// character that is a token starts as that token, one that is not becomes its bytes' "<0xAB>"
// tokens (byte fallback) or, failing that, the unknown token (runs of them fused into one with
// `fuse_unk`). Then adjacent tokens are merged by merge rank (lowest first, leftmost on a tie),
// not by score as SentencePiece and llama.cpp do (spm_model.h).
//
//   TP_ASSIGN_OR_RETURN(CharBpeModel bpe, CharBpeModel::Create(texts, merges, options));
//   bpe.EncodePiece("▁Hello▁world", &ids);  // spaces are already U+2581 here
//
// Cost: O(n log n) in the piece length (BpeModel's merge heap).
//
// Threading: immutable after Create; EncodePiece may be called from many threads at once.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_CHAR_BPE_MODEL_H_
#define TPSERVE_COORDINATOR_TOKENIZER_CHAR_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/tokenizer/bpe_model.h"

namespace tpserve {

class CharBpeModel {
 public:
  struct Options {
    bool byte_fallback = true;   // a character that is no token becomes its "<0xAB>" tokens
    int32_t unk_id = -1;         // what is left unknown becomes this; -1: it is dropped
    bool fuse_unk = false;       // consecutive unknown characters make one unknown token
    bool ignore_merges = false;  // a piece that is itself a token is emitted whole
  };

  // `texts[id]` is the vocabulary entry as stored (spaces as U+2581); empty texts are holes.
  // `merges[rank]` is a pair of entries whose concatenation is an entry. INVALID_ARGUMENT
  // naming the rank and text when a merge side or result is not in the vocabulary (Hugging
  // Face refuses such files too), or an unk_id outside the vocabulary.
  static absl::StatusOr<CharBpeModel> Create(
      const std::vector<std::string>& texts,
      const std::vector<std::pair<std::string, std::string>>& merges, const Options& options);

  // Appends the ids for one piece, already normalized and pre-tokenized. Bytes that are not
  // well-formed UTF-8 are characters of their own (so they take the byte fallback).
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;

 private:
  explicit CharBpeModel(BpeModel bpe) : bpe_(std::move(bpe)) {}

  BpeModel bpe_;  // keyed by stored text; every merge side and result is a token
  Options options_;
  std::array<int32_t, 256> byte_ids_{};  // byte -> its "<0xAB>" token, or -1
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_CHAR_BPE_MODEL_H_
