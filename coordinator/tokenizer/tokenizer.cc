#include "coordinator/tokenizer/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/byte_level.h"
#include "coordinator/tokenizer/unicode_nfc.h"

namespace tpserve {
namespace {

std::string UnescapeSpaces(const std::string& text) {
  return absl::StrReplaceAll(
      text, {{absl::string_view(kSpmSpace.data(), kSpmSpace.size()), absl::string_view(" ")}});
}

bool IsSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

// Raw bytes of one vocabulary entry, per its type (see TokenType) and the model's spelling.
absl::StatusOr<std::string> TokenTextToBytes(int32_t id, const std::string& text, TokenType type,
                                             TokenizerModel model) {
  switch (type) {
    case TokenType::kNormal: {
      if (model != TokenizerModel::kBpe) return UnescapeSpaces(text);
      absl::StatusOr<std::string> bytes = ByteLevelDecode(text);
      if (!bytes.ok()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("tokens[%d] '%s' (normal): %s", id, text, bytes.status().message()));
      }
      return bytes;
    }
    case TokenType::kByte: {
      uint32_t value = 0;
      if (text.size() != 6 || text.rfind("<0x", 0) != 0 || text.back() != '>' ||
          !absl::SimpleHexAtoi(text.substr(3, 2), &value)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "tokens[%d] '%s' has type byte but is not of the form <0xHH>", id, text));
      }
      return std::string(1, static_cast<char>(value));
    }
    case TokenType::kUnused:
      return std::string();
    case TokenType::kUnknown:
    case TokenType::kControl:
    case TokenType::kUserDefined:
      // HF runs every token, added ones included, through the decoder's Replace.
      return model == TokenizerModel::kCharBpe ? UnescapeSpaces(text) : text;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "token_types[%d] = %d is not a known token type (1-6)", id, static_cast<int32_t>(type)));
}

absl::Status CheckSpecialId(const char* field, int32_t id, size_t vocab_size) {
  if (id < -1 || id >= static_cast<int64_t>(vocab_size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s = %d is outside the vocabulary [0, %d) (use -1 for none)", field, id, vocab_size));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tokenizer> Tokenizer::Create(TokenizerData data) {
  const size_t vocab_size = data.tokens.size();
  if (data.token_types.size() != vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "token_types has %d entries but tokens has %d", data.token_types.size(), vocab_size));
  }
  if (vocab_size == 0 || vocab_size > static_cast<size_t>(INT32_MAX / 2)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vocabulary size %d is outside [1, %d]", vocab_size, INT32_MAX / 2));
  }
  TP_RETURN_IF_ERROR(CheckSpecialId("bos_id", data.bos_id, vocab_size));
  TP_RETURN_IF_ERROR(CheckSpecialId("eos_id", data.eos_id, vocab_size));
  TP_RETURN_IF_ERROR(CheckSpecialId("unk_id", data.unk_id, vocab_size));
  TP_RETURN_IF_ERROR(CheckSpecialId("pad_id", data.pad_id, vocab_size));
  if (data.model == TokenizerModel::kBpe && !data.scores.empty() &&
      data.scores.size() != vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("scores has %d entries but tokens has %d", data.scores.size(), vocab_size));
  }

  std::vector<std::string> token_bytes(vocab_size);
  std::vector<SpecialTokenSplitter::Entry> special_entries;
  for (size_t id = 0; id < vocab_size; ++id) {
    const auto id32 = static_cast<int32_t>(id);
    TP_ASSIGN_OR_RETURN(token_bytes[id],
                        TokenTextToBytes(id32, data.tokens[id], data.token_types[id], data.model));
    const TokenType type = data.token_types[id];
    if (IsSpecialType(type)) {
      special_entries.push_back({id32, data.tokens[id], type != TokenType::kUserDefined});
    }
  }
  std::optional<BpePipeline> bpe;
  std::optional<SpmModel> spm;
  std::optional<CharBpePipeline> char_bpe;
  if (data.model == TokenizerModel::kCharBpe) {
    TP_ASSIGN_OR_RETURN(CharBpePipeline pipeline, CreateCharBpe(data));
    char_bpe.emplace(std::move(pipeline));
  } else if (data.model == TokenizerModel::kSpm) {
    absl::StatusOr<SpmModel> model = SpmModel::Create(data.tokens, data.scores);
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("SPM: ", model.status().message()));
    }
    spm.emplace(*std::move(model));
  } else {
    TP_ASSIGN_OR_RETURN(BpePipeline pipeline, CreateBpe(data, token_bytes));
    bpe.emplace(std::move(pipeline));
  }

  Tokenizer tokenizer(std::move(token_bytes), std::move(data.token_types),
                      SpecialTokenSplitter(special_entries));
  tokenizer.model_ = data.model;
  tokenizer.bpe_ = std::move(bpe);
  tokenizer.spm_ = std::move(spm);
  tokenizer.char_bpe_ = std::move(char_bpe);
  tokenizer.add_space_prefix_ = data.model == TokenizerModel::kSpm && data.add_space_prefix;
  tokenizer.decode_strips_leading_space_ =
      tokenizer.add_space_prefix_ ||
      (data.model == TokenizerModel::kCharBpe && data.decode_strips_leading_space);
  for (const auto& entry : special_entries)
    tokenizer.special_ids_.try_emplace(entry.text, entry.id);
  tokenizer.bos_id_ = data.bos_id;
  tokenizer.eos_id_ = data.eos_id;
  tokenizer.unk_id_ = data.unk_id;
  tokenizer.pad_id_ = data.pad_id;
  tokenizer.add_bos_by_default_ = data.add_bos_by_default;
  return tokenizer;
}

absl::StatusOr<Tokenizer::BpePipeline> Tokenizer::CreateBpe(
    const TokenizerData& data, const std::vector<std::string>& token_bytes) {
  std::vector<std::pair<std::string, std::string>> merges_bytes;
  merges_bytes.reserve(data.merges.size());
  for (size_t rank = 0; rank < data.merges.size(); ++rank) {
    absl::StatusOr<std::string> left = ByteLevelDecode(data.merges[rank].first);
    absl::StatusOr<std::string> right = ByteLevelDecode(data.merges[rank].second);
    if (!left.ok() || !right.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "merges[%d] '%s %s': %s", rank, data.merges[rank].first, data.merges[rank].second,
          (left.ok() ? right.status() : left.status()).message()));
    }
    merges_bytes.emplace_back(*std::move(left), *std::move(right));
  }
  TP_ASSIGN_OR_RETURN(BpeModel bpe,
                      BpeModel::Create(token_bytes, merges_bytes, data.ignore_merges));
  TP_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create(data.pre_tokenizer));
  return BpePipeline{std::move(pre), std::move(bpe), data.nfc};
}

absl::StatusOr<Tokenizer::CharBpePipeline> Tokenizer::CreateCharBpe(const TokenizerData& data) {
  // Holes (unused ids) must not collide as empty texts; BpeModel skips empty entries.
  std::vector<std::string> texts(data.tokens.size());
  for (size_t id = 0; id < texts.size(); ++id) {
    if (data.token_types[id] != TokenType::kUnused) texts[id] = data.tokens[id];
  }
  absl::StatusOr<CharBpeModel> model = CharBpeModel::Create(texts, data.merges,
                                                            {.byte_fallback = data.byte_fallback,
                                                             .unk_id = data.unk_id,
                                                             .fuse_unk = data.fuse_unk,
                                                             .ignore_merges = data.ignore_merges});
  if (!model.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("CharBpe: ", model.status().message()));
  }
  return CharBpePipeline{*std::move(model), data.space_prefix, data.split_at_spaces};
}

Tokenizer::Tokenizer(std::vector<std::string> token_bytes, std::vector<TokenType> token_types,
                     SpecialTokenSplitter splitter)
    : token_bytes_(std::move(token_bytes)),
      token_types_(std::move(token_types)),
      special_splitter_(std::move(splitter)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  if (options.add_bos) {
    if (bos_id_ < 0) {
      return absl::FailedPreconditionError("add_bos requested but the model has no BOS token");
    }
    ids.push_back(bos_id_);
  }
  // SPM's space prefix goes before text that starts the input or follows a special token.
  bool after_special = true;
  for (const auto& fragment : special_splitter_.Split(text, options.allow_special)) {
    if (fragment.special_id >= 0) {
      ids.push_back(fragment.special_id);
      after_special = true;
      continue;
    }
    if (spm_.has_value()) {
      spm_->EncodeFragment(fragment.text, add_space_prefix_ && after_special, &ids);
    } else if (char_bpe_.has_value()) {
      EncodeCharBpeFragment(fragment.text, fragment.text.data() == text.data(), &ids);
    } else {
      TP_RETURN_IF_ERROR(EncodeBpeFragment(fragment.text, &ids));
    }
    after_special = false;
  }
  return ids;
}

absl::Status Tokenizer::EncodeBpeFragment(std::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized;
  if (bpe_->nfc) {
    normalized = NfcNormalize(text);
    text = normalized;
  }
  std::vector<std::string_view> pieces;
  TP_RETURN_IF_ERROR(bpe_->pre_tokenizer.Split(text, &pieces));
  for (std::string_view piece : pieces) bpe_->bpe.EncodePiece(piece, ids);
  return absl::OkStatus();
}

void Tokenizer::EncodeCharBpeFragment(std::string_view text, bool at_input_start,
                                      std::vector<int32_t>* ids) const {
  const absl::string_view space(kSpmSpace.data(), kSpmSpace.size());
  std::string escaped =
      absl::StrReplaceAll(absl::string_view(text.data(), text.size()), {{" ", space}});
  const bool starts_with_space = absl::StartsWith(escaped, space);
  bool prefix = false;
  switch (char_bpe_->space_prefix) {
    case SpacePrefix::kNone:
      break;
    case SpacePrefix::kEveryFragment:
      prefix = !escaped.empty();
      break;
    case SpacePrefix::kEveryFragmentUnlessSpace:
      prefix = !starts_with_space;
      break;
    case SpacePrefix::kFirstFragmentUnlessSpace:
      prefix = at_input_start && !starts_with_space;
      break;
  }
  if (prefix) escaped.insert(0, kSpmSpace);
  if (!char_bpe_->split_at_spaces) {
    char_bpe_->bpe.EncodePiece(escaped, ids);
    return;
  }
  // HF Split(U+2581, MergedWithNext): each U+2581 begins a piece.
  const std::string_view all = escaped;
  size_t begin = 0;
  for (size_t at = all.find(kSpmSpace, 1); at != std::string_view::npos;
       at = all.find(kSpmSpace, at + 1)) {
    char_bpe_->bpe.EncodePiece(all.substr(begin, at - begin), ids);
    begin = at;
  }
  char_bpe_->bpe.EncodePiece(all.substr(begin), ids);
}

absl::Status Tokenizer::CheckId(int32_t id, size_t position) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token id %d at position %d is outside the vocabulary [0, %d)", id,
                        position, vocab_size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              const DecodeOptions& options) const {
  std::string text;
  for (size_t i = 0; i < ids.size(); ++i) {
    TP_ASSIGN_OR_RETURN(std::string_view piece, DecodedPiece(ids[i], i));
    if (options.skip_control && token_types_[ids[i]] == TokenType::kControl) continue;
    text += piece;
  }
  return text;
}

absl::StatusOr<std::string_view> Tokenizer::DecodedPiece(int32_t id, size_t position) const {
  TP_RETURN_IF_ERROR(CheckId(id, position));
  std::string_view piece = token_bytes_[id];
  // llama.cpp drops the space its encoder prefixed, from the first token only, whatever it is.
  if (decode_strips_leading_space_ && position == 0 && !piece.empty() && piece.front() == ' ') {
    piece.remove_prefix(1);
  }
  return piece;
}

absl::StatusOr<std::string_view> Tokenizer::TokenBytes(int32_t id) const {
  TP_RETURN_IF_ERROR(CheckId(id, 0));
  return std::string_view(token_bytes_[id]);
}

absl::StatusOr<TokenType> Tokenizer::GetTokenType(int32_t id) const {
  TP_RETURN_IF_ERROR(CheckId(id, 0));
  return token_types_[id];
}

std::optional<int32_t> Tokenizer::SpecialTokenId(std::string_view text) const {
  const auto it = special_ids_.find(absl::string_view(text.data(), text.size()));
  if (it == special_ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tpserve
