// Streams generated text one token at a time without ever emitting half a character:
// byte-level tokens can end in the middle of a UTF-8 sequence (a Korean syllable is 3 bytes,
// an emoji 4), so trailing bytes that may still complete are held back until they do.
//
//   IncrementalDetokenizer detok(&tokenizer);
//   TP_ASSIGN_OR_RETURN(std::string chunk, detok.Push(id));  // "" while a char is pending
//
// SentencePiece byte-fallback tokens ("<0xEC>") are single bytes, so they are held back the same
// way; pieces come from Tokenizer::DecodedPiece, so the stream drops the same leading space as
// Decode. Every returned chunk is valid UTF-8. Bytes that can never form a character are replaced
// by U+FFFD as soon as that is certain; Flush() does the same for a still-incomplete tail. When
// Decode(all ids) is valid UTF-8, the concatenation of all chunks equals it exactly.
//
// Threading: one instance per sequence, not thread-safe; the Tokenizer must outlive it.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
#define TPSERVE_COORDINATOR_TOKENIZER_INCREMENTAL_DETOKENIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer* tokenizer, DecodeOptions options = {});

  // Text completed by token `id`, possibly empty. INVALID_ARGUMENT for an unknown id (the
  // state is unchanged then).
  absl::StatusOr<std::string> Push(int32_t id);

  // Remaining held-back bytes, as U+FFFD since they never completed; resets the state (the
  // next Push starts a new sequence).
  std::string Flush();

  // Number of bytes currently held back (0 to 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;  // an incomplete UTF-8 prefix, at most 3 bytes
  size_t num_pushed_ = 0;  // ids pushed since construction or Flush: the next id's position
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_INCREMENTAL_DETOKENIZER_H_
