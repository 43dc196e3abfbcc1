// SentencePiece-style model as llama.cpp runs it for `tokenizer.ggml.model = "llama"` (Llama 2,
// Mistral v0.1-v0.3, Gemma 1-3): text is split into UTF-8 characters, then adjacent symbols
// whose concatenation is a vocabulary entry are merged, highest score first (leftmost on a tie),
// until no pair forms an entry. A final symbol that is no entry becomes its byte tokens
// ("<0xAB>"), so every byte string can be encoded.
//
//   TP_ASSIGN_OR_RETURN(SpmModel spm, SpmModel::Create(texts, scores));
//   spm.EncodeFragment("Hello world", /*add_space_prefix=*/true, &ids);  // "▁Hello", "▁world"
//
// Cost: O(n log n) in the fragment length (a heap of candidate pairs over a linked list).
//
// Threading: immutable after Create; EncodeFragment may be called from many threads at once.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_SPM_MODEL_H_
#define TPSERVE_COORDINATOR_TOKENIZER_SPM_MODEL_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace tpserve {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's spelling of a space inside a vocabulary entry.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

class SpmModel {
 public:
  // `texts[id]` is the vocabulary entry as stored (spaces as U+2581, bytes as "<0xAB>"), of any
  // token type: like llama.cpp, merges may form any entry, control ones included. `scores[id]` is
  // its merge priority. When two ids share a text the first keeps it. INVALID_ARGUMENT naming
  // the sizes when scores and texts differ in length, or the id of a NaN score (NaN would make
  // the merge order undefined).
  static absl::StatusOr<SpmModel> Create(const std::vector<std::string>& texts,
                                         const std::vector<float>& scores);

  // Appends the ids for one plain-text fragment (no special tokens in it). With
  // `add_space_prefix` a space is put in front first. Spaces become U+2581 before merging.
  // Bytes left without a token of their own, whose vocabulary has neither "<0xAB>" nor the
  // single byte as an entry, are dropped (llama.cpp would abort).
  void EncodeFragment(std::string_view text, bool add_space_prefix,
                      std::vector<int32_t>* ids) const;

  // Id of the vocabulary entry `text` (as stored), or -1.
  int32_t TokenId(std::string_view text) const;

 private:
  SpmModel() = default;
  // Appends the ids for `escaped` (spaces already U+2581).
  void EncodeEscaped(std::string_view escaped, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> ids_;  // text -> first id with it
  std::vector<float> scores_;                        // index = id
  std::array<int32_t, 256> byte_ids_;                // byte -> its fallback token, or -1
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_SPM_MODEL_H_
