#include "coordinator/tokenizer/incremental_detokenizer.h"

#include <string_view>

#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, DecodeOptions options)
    : tokenizer_(tokenizer), options_(options) {}

absl::StatusOr<std::string> IncrementalDetokenizer::Push(int32_t id) {
  TP_ASSIGN_OR_RETURN(std::string_view bytes, tokenizer_->DecodedPiece(id, num_pushed_));
  ++num_pushed_;
  if (options_.skip_control && *tokenizer_->GetTokenType(id) == TokenType::kControl) {
    return std::string();
  }
  std::string buffer = std::move(pending_);
  buffer.append(bytes);
  const size_t tail = IncompleteUtf8TailLength(buffer);
  pending_ = buffer.substr(buffer.size() - tail);
  buffer.resize(buffer.size() - tail);
  // Whatever is left but invalid can no longer become valid: more bytes only extend the tail.
  return SanitizeUtf8(buffer);
}

std::string IncrementalDetokenizer::Flush() {
  std::string rest = SanitizeUtf8(pending_);
  pending_.clear();
  num_pushed_ = 0;
  return rest;
}

}  // namespace tpserve
