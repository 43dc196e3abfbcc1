#include "coordinator/tokenizer/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/byte_level.h"

namespace tpserve {
namespace {

bool IsSpecialType(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUserDefined ||
         type == TokenType::kUnknown;
}

// Raw bytes of one vocabulary entry, per its type (see TokenType).
absl::StatusOr<std::string> TokenTextToBytes(int32_t id, const std::string& text, TokenType type) {
  switch (type) {
    case TokenType::kNormal: {
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
      return text;
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

  std::vector<std::string> token_bytes(vocab_size);
  std::vector<SpecialTokenSplitter::Entry> special_entries;
  for (size_t id = 0; id < vocab_size; ++id) {
    const auto id32 = static_cast<int32_t>(id);
    TP_ASSIGN_OR_RETURN(token_bytes[id],
                        TokenTextToBytes(id32, data.tokens[id], data.token_types[id]));
    const TokenType type = data.token_types[id];
    if (IsSpecialType(type)) {
      special_entries.push_back({id32, data.tokens[id], type != TokenType::kUserDefined});
    }
  }
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

  Tokenizer tokenizer(std::move(token_bytes), std::move(data.token_types), std::move(bpe),
                      std::move(pre), SpecialTokenSplitter(special_entries));
  for (const auto& entry : special_entries)
    tokenizer.special_ids_.try_emplace(entry.text, entry.id);
  tokenizer.bos_id_ = data.bos_id;
  tokenizer.eos_id_ = data.eos_id;
  tokenizer.unk_id_ = data.unk_id;
  tokenizer.pad_id_ = data.pad_id;
  tokenizer.add_bos_by_default_ = data.add_bos_by_default;
  return tokenizer;
}

Tokenizer::Tokenizer(std::vector<std::string> token_bytes, std::vector<TokenType> token_types,
                     BpeModel bpe, PreTokenizer pre_tokenizer, SpecialTokenSplitter splitter)
    : token_bytes_(std::move(token_bytes)),
      token_types_(std::move(token_types)),
      bpe_(std::move(bpe)),
      pre_tokenizer_(std::move(pre_tokenizer)),
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
  std::vector<std::string_view> pieces;
  for (const auto& fragment : special_splitter_.Split(text, options.allow_special)) {
    if (fragment.special_id >= 0) {
      ids.push_back(fragment.special_id);
      continue;
    }
    pieces.clear();
    TP_RETURN_IF_ERROR(pre_tokenizer_.Split(fragment.text, &pieces));
    for (std::string_view piece : pieces) bpe_.EncodePiece(piece, &ids);
  }
  return ids;
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
    TP_RETURN_IF_ERROR(CheckId(ids[i], i));
    if (options.skip_control && token_types_[ids[i]] == TokenType::kControl) continue;
    text += token_bytes_[ids[i]];
  }
  return text;
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
