#include "coordinator/tokenizer/char_bpe_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {

absl::StatusOr<CharBpeModel> CharBpeModel::Create(
    const std::vector<std::string>& texts,
    const std::vector<std::pair<std::string, std::string>>& merges, const Options& options) {
  if (options.unk_id < -1 || options.unk_id >= static_cast<int64_t>(texts.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unk_id = %d is outside the vocabulary [0, %d)", options.unk_id, texts.size()));
  }
  TP_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::Create(texts, merges, options.ignore_merges));
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    for (const std::string& text : {left, right, left + right}) {
      if (bpe.TokenId(text) < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "merges[%d] '%s %s': '%s' is not in the vocabulary", rank, left, right, text));
      }
    }
  }
  CharBpeModel model(std::move(bpe));
  model.options_ = options;
  for (int byte = 0; byte < 256; ++byte) {
    model.byte_ids_[byte] =
        options.byte_fallback ? model.bpe_.TokenId(absl::StrFormat("<0x%02X>", byte)) : -1;
  }
  return model;
}

void CharBpeModel::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    const int32_t whole = bpe_.TokenId(piece);
    if (whole >= 0) {
      ids->push_back(whole);
      return;
    }
  }
  std::vector<int32_t> tokens;
  tokens.reserve(piece.size());
  // Hugging Face's order, kept exactly: a pending unknown is written before the next known
  // character, but byte-fallback tokens go out at once, ahead of it.
  bool unk_pending = false;
  for (size_t at = 0; at < piece.size();) {
    const size_t length = std::max<size_t>(Utf8SequenceLength(piece, at), 1);
    const std::string_view character = piece.substr(at, length);
    at += length;
    const int32_t id = bpe_.TokenId(character);
    if (id >= 0) {
      if (unk_pending) tokens.push_back(options_.unk_id);
      unk_pending = false;
      tokens.push_back(id);
      continue;
    }
    bool all_bytes = options_.byte_fallback;
    for (const char byte : character) {
      all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(byte)] >= 0;
    }
    if (all_bytes) {
      for (const char byte : character) tokens.push_back(byte_ids_[static_cast<uint8_t>(byte)]);
      continue;
    }
    if (options_.unk_id < 0) continue;
    if (unk_pending && !options_.fuse_unk) tokens.push_back(options_.unk_id);
    unk_pending = true;
  }
  if (unk_pending) tokens.push_back(options_.unk_id);
  bpe_.MergeTokens(std::move(tokens), ids);
}

}  // namespace tpserve
