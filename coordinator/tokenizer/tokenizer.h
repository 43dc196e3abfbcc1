// The tokenizer callers use, whatever the model's kind: byte-level BPE (GPT-2 / Llama 3 /
// SmolLM2 / Qwen2 family), SentencePiece-style (Llama 2 / Mistral / Gemma as llama.cpp runs them)
// or character BPE with byte fallback (the same families' HF tokenizer.json), built from plain
// data so that any source (GGUF metadata, HF tokenizer.json) can feed it through a small adapter.
// The kind is TokenizerData::model; no caller branches on it.
//
//   TP_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Create(std::move(data)));
//   TP_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.Encode("Hi <|im_end|>"));  // plain text
//
// Encode pipeline: special-token split (special_token_splitter.h), then per plain fragment
//   BPE: optional NFC (unicode_nfc.h) -> pre-tokenizer regexes (pre_tokenizer.h) -> BPE merges
//        per piece (bpe_model.h);
//   SPM: optional space prefix, spaces as U+2581 -> score-ordered merges (spm_model.h);
//   CharBpe: spaces as U+2581, a U+2581 prefix per `space_prefix`, optionally a cut before each
//        U+2581 -> rank-ordered merges over characters with byte fallback (char_bpe_model.h).
// CharBpe decodes as HF's decoder Replace(U+2581, " ") + ByteFallback + Fuse [+ Strip(" ", 1)]:
// the same as SPM, on every token type, raw bytes for byte tokens (HF turns bytes that are not
// UTF-8 into U+FFFD), and a leading space dropped from the first token when
// `decode_strips_leading_space`.
// BPE: Decode(Encode(s)) == s for every byte string s, valid UTF-8 or not. SPM, as llama.cpp:
// the same for valid UTF-8 without U+2581 (which comes back as a space), except that with
// add_space_prefix Decode drops one leading space; in invalid UTF-8 a space inside a broken
// character comes back as U+2581's three bytes.
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
#include "coordinator/tokenizer/char_bpe_model.h"
#include "coordinator/tokenizer/pre_tokenizer.h"
#include "coordinator/tokenizer/special_token_splitter.h"
#include "coordinator/tokenizer/spm_model.h"

namespace tpserve {

// Values are GGUF's `tokenizer.ggml.token_type` codes.
enum class TokenType : int32_t {
  kNormal = 1,       // BPE: text in the byte-level alphabet; SPM: UTF-8 with U+2581 for space
  kUnknown = 2,      // raw text
  kControl = 3,      // raw text; matched in input only with allow_special (<|im_start|>)
  kUserDefined = 4,  // raw text; always matched in input before pre-tokenization
  kUnused = 5,       // never produced, decodes to nothing
  kByte = 6,         // "<0xAB>": the single byte 0xAB
};

// How plain text becomes ids (GGUF `tokenizer.ggml.model`: "gpt2" or "llama").
enum class TokenizerModel {
  kBpe,  // byte-level BPE: pre-tokenizer, then ranked merges
  kSpm,  // SentencePiece-style: score-ordered merges over characters, byte fallback
  // HF BPE with byte_fallback over characters (tokenizer.json of SentencePiece models): merges
  // in rank order; normal tokens are UTF-8 with U+2581 for space.
  kCharBpe,
};

// CharBpe: which plain fragments (text between special tokens) get a U+2581 put in front.
enum class SpacePrefix {
  kNone,
  kEveryFragment,             // HF normalizer Prepend("▁") (Llama 2 / Mistral legacy)
  kEveryFragmentUnlessSpace,  // Metaspace "always": unless it starts with a space or U+2581
  kFirstFragmentUnlessSpace,  // Metaspace "first": only at the start of the input, same rule
};

struct TokenizerData {
  TokenizerModel model = TokenizerModel::kBpe;
  std::vector<std::string> tokens;     // index = id; see TokenType for the encoding
  std::vector<TokenType> token_types;  // same length as tokens
  // BPE: merge rules in rank order, each side in the byte-level alphabet ("Ġ", "t");
  // CharBpe: the same, each side as stored in `tokens` ("▁", "t").
  std::vector<std::pair<std::string, std::string>> merges;
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kGpt2;  // BPE only
  bool ignore_merges = false;  // BPE, CharBpe: a piece that is a whole token skips merging
  bool nfc = false;            // BPE: plain text is put in Unicode NFC first (Qwen2)
  // SPM only: merge priority per token (same length as tokens; higher merges first).
  std::vector<float> scores;
  // SPM only: a space is put before each plain fragment that starts the input or follows a
  // special token, and Decode drops a leading space from the first token (llama.cpp's rule).
  bool add_space_prefix = false;
  // CharBpe only (see SpacePrefix and char_bpe_model.h).
  SpacePrefix space_prefix = SpacePrefix::kNone;
  bool split_at_spaces = false;  // HF Metaspace split: each U+2581 starts a new piece
  bool byte_fallback = true;
  bool fuse_unk = false;
  bool decode_strips_leading_space = false;  // HF decoder Strip(" ", 1, 0)
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
  // INVALID_ARGUMENT naming the offending field, id and bound for: mismatched array sizes
  // (scores: for SPM), a BPE normal token outside the byte-level alphabet, a malformed byte
  // token, a special id outside the vocabulary, an empty merge side, a NaN score, or (CharBpe)
  // a merge side or result that is not a token.
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
  // What token `id` adds to Decode's output at index `position` of the ids: TokenBytes, less
  // the leading space SPM models with add_space_prefix (CharBpe: decode_strips_leading_space)
  // drop from position 0. For streaming
  // (IncrementalDetokenizer). INVALID_ARGUMENT for an unknown id.
  absl::StatusOr<std::string_view> DecodedPiece(int32_t id, size_t position) const;
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
  TokenizerModel model() const { return model_; }
  // The BPE pre-tokenizer; meaningless for SPM (which has none: it reports kGpt2).
  PreTokenizerKind pre_tokenizer_kind() const {
    return bpe_.has_value() ? bpe_->pre_tokenizer.kind() : PreTokenizerKind::kGpt2;
  }
  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  struct BpePipeline {
    PreTokenizer pre_tokenizer;
    BpeModel bpe;
    bool nfc = false;
  };
  struct CharBpePipeline {
    CharBpeModel bpe;
    SpacePrefix space_prefix;
    bool split_at_spaces;
  };

  Tokenizer(std::vector<std::string> token_bytes, std::vector<TokenType> token_types,
            SpecialTokenSplitter splitter);
  static absl::StatusOr<BpePipeline> CreateBpe(const TokenizerData& data,
                                               const std::vector<std::string>& token_bytes);
  static absl::StatusOr<CharBpePipeline> CreateCharBpe(const TokenizerData& data);
  absl::Status CheckId(int32_t id, size_t position) const;
  // Appends the ids of one plain fragment; `at_input_start`: it begins the input.
  absl::Status EncodeBpeFragment(std::string_view text, std::vector<int32_t>* ids) const;
  void EncodeCharBpeFragment(std::string_view text, bool at_input_start,
                             std::vector<int32_t>* ids) const;

  std::vector<std::string> token_bytes_;  // raw bytes per id
  std::vector<TokenType> token_types_;
  TokenizerModel model_ = TokenizerModel::kBpe;
  std::optional<BpePipeline> bpe_;            // set for kBpe
  std::optional<SpmModel> spm_;               // set for kSpm
  std::optional<CharBpePipeline> char_bpe_;   // set for kCharBpe
  bool add_space_prefix_ = false;             // kSpm only
  bool decode_strips_leading_space_ = false;  // position 0 loses a leading space
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
