// UTF-8 helpers shared by the pre-tokenizer and the incremental detokenizer: how long a
// sequence is, whether bytes are valid, and how to make arbitrary bytes displayable.
//
//   size_t n = Utf8SequenceLength(text, 0);           // 0 when text[0] starts no valid char
//   std::string shown = SanitizeUtf8("\xff" "a");   // "\xEF\xBF\xBD" "a"
//
// Threading: pure functions, safe from any thread.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_UTF8_H_
#define TPSERVE_COORDINATOR_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace tpserve {

// The replacement character U+FFFD, encoded.
inline constexpr std::string_view kUtf8Replacement = "\xEF\xBF\xBD";

// Length in bytes (1-4) of the well-formed UTF-8 sequence starting at `text[pos]`, or 0 if
// the bytes there are not one (bad lead byte, bad or missing continuation, overlong form,
// surrogate, above U+10FFFF). A sequence cut short by the end of `text` counts as invalid.
// REQUIRES: pos < text.size().
size_t Utf8SequenceLength(std::string_view text, size_t pos);

// True when every byte of `text` belongs to a well-formed UTF-8 sequence.
bool IsValidUtf8(std::string_view text);

// Number of trailing bytes of `text` that form a proper prefix of some well-formed sequence
// (a lead byte plus fewer continuation bytes than it needs, each in its allowed range), i.e.
// bytes that may still become a character once more bytes arrive. 0 to 3.
size_t IncompleteUtf8TailLength(std::string_view text);

// Copy of `text` with each maximal ill-formed subsequence replaced by U+FFFD (the WHATWG /
// Unicode "substitution of maximal subparts" practice).
std::string SanitizeUtf8(std::string_view text);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_UTF8_H_
