// GPT-2 byte-level alphabet: every byte 0..255 is shown as one printable code point so that
// vocabularies and merges can be stored as text ("Ġthe" is the bytes " the"). The tokenizer
// works on raw bytes internally; these functions convert vocab text at load time and back.
//
//   std::string shown = ByteLevelEncode(" the");                // "Ġthe"
//   absl::StatusOr<std::string> raw = ByteLevelDecode("Ġthe");  // " the"
//
// Threading: pure functions over constant tables, safe from any thread.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_BYTE_LEVEL_H_
#define TPSERVE_COORDINATOR_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tpserve {

// The code point that stands for `byte` (e.g. 0x20 -> U+0120 'Ġ', 0x41 -> 'A').
uint32_t ByteToCodePoint(uint8_t byte);

// Maps each byte of `bytes` to its code point, UTF-8 encoded.
std::string ByteLevelEncode(std::string_view bytes);

// Inverse of ByteLevelEncode. INVALID_ARGUMENT naming the code point and its byte offset when
// `text` is not valid UTF-8 or holds a code point outside the 256-symbol alphabet.
absl::StatusOr<std::string> ByteLevelDecode(std::string_view text);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_BYTE_LEVEL_H_
