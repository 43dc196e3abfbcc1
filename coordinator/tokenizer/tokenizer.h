// Byte-level BPE tokenizer (GPT-2 / Llama 3 / SmolLM2 family), built from plain data so that
// any source (GGUF metadata, HF tokenizer.json) can feed it through a small adapter.
//
//   TP_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Create(std::move(data)));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode("Hi <|im_end|>"));  // plain text
//
// Encode pipeline: special-token split (special_token_splitter.h) -> pre-tokenizer regexes
// (pre_tokenizer.h) -> BPE merges per piece (bpe_model.h). Decode(Encode(s)) == s for every
// byte string s, valid UTF-8 or not.
//
// Threading: immutable after Create; every method is const and safe from many threads.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_TOKENIZER_H_
#define TPSERVE_COORDINATOR_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/tokenizer/bpe_model.h"
#include "coordinator/tokenizer/pre_tokenizer.h"
#include "coordinator/tokenizer/special_token_splitter.h"

namespace tpserve {

// Values are GGUF's `tokenizer.ggml.token_type` codes.
enum class TokenType : int32_t {
  kNormal = 1,       // text in the byte-level alphabet, produced by BPE
  kUnknown = 2,      // raw text
  kControl = 3,      // raw text; matched in input only with allow_special (<|im_start|>)
  kUserDefined = 4,  // raw text; always matched in input before pre-tokenization
  kUnused = 5,       // never produced, decodes to nothing
  kByte = 6,         // "<0xAB>": the single byte 0xAB
};

struct TokenizerData {
  std::vector<std::string> tokens;     // index = id; see TokenType for the encoding
  std::vector<TokenType> token_types;  // same length as tokens
  // Merge rules in rank order, each side in the byte-level alphabet ("Ġ", "t").
  std::vector<std::pair<std::string, std::string>> merges;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kGpt2;
  bool ignore_merges = false;  // Llama 3: a piece that is a whole token skips merging
  bool add_bos_by_default = false;
  int32_t bos_id = -1;  // -1: the model has none
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
};

struct EncodeOptions {
  // When false, control-token text in the input ("<|im_end|>") is encoded as plain text.
  bool allow_special = false;
  bool add_bos = false;
};

struct DecodeOptions {
  bool skip_control = false;  // drop control tokens (BOS, <|im_end|>, ...) from the text
};

class Tokenizer {
 public:
  // INVALID_ARGUMENT naming the offending field, id and bound for: mismatched array sizes,
  // a normal token outside the byte-level alphabet, a malformed byte token, a special id
  // outside the vocabulary, or an empty merge side.
  static absl::StatusOr<Tokenizer> Create(TokenizerData data);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // FAILED_PRECONDITION when add_bos is set but the model has no BOS token; INTERNAL only if
  // the regex engine fails.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options = {}) const;

  // Concatenated bytes of `ids` (possibly invalid UTF-8 when a character is split across a
  // cut). INVALID_ARGUMENT naming the id, its position and vocab_size for an unknown id.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     const DecodeOptions& options = {}) const;

  // Raw bytes that token `id` decodes to; INVALID_ARGUMENT for an unknown id.
  absl::StatusOr<std::string_view> TokenBytes(int32_t id) const;
  absl::StatusOr<TokenType> GetTokenType(int32_t id) const;

  // `text` split at every special token (control and user-defined), as Encode does with
  // allow_special: the fragments concatenate to `text`.
  std::vector<SpecialTokenSplitter::Fragment> SplitSpecialTokens(std::string_view text) const {
    return special_splitter_.Split(text, /*match_control=*/true);
  }

  // Id of the control/user-defined token whose text is exactly `text`.
  std::optional<int32_t> SpecialTokenId(std::string_view text) const;

  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  int32_t unk_id() const { return unk_id_; }
  int32_t pad_id() const { return pad_id_; }
  bool add_bos_by_default() const { return add_bos_by_default_; }
  PreTokenizerKind pre_tokenizer_kind() const { return pre_tokenizer_.kind(); }

 private:
  Tokenizer(std::vector<std::string> token_bytes, std::vector<TokenType> token_types, BpeModel bpe,
            PreTokenizer pre_tokenizer, SpecialTokenSplitter splitter);
  absl::Status CheckId(int32_t id, size_t position) const;

  std::vector<std::string> token_bytes_;  // raw bytes per id
  std::vector<TokenType> token_types_;
  BpeModel bpe_;
  PreTokenizer pre_tokenizer_;
  SpecialTokenSplitter special_splitter_;
  absl::flat_hash_map<std::string, int32_t> special_ids_;  // control + user-defined text
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t unk_id_ = -1;
  int32_t pad_id_ = -1;
  bool add_bos_by_default_ = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_TOKENIZER_H_
