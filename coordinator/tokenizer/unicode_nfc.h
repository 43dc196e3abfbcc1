// Unicode Normalization Form C, what Hugging Face's `NFC` normalizer does to text before
// pre-tokenization (Qwen2 / Qwen2.5 / Qwen3 tokenizer.json): canonical decomposition,
// canonical ordering of combining marks, then canonical composition. Tables are generated from
// Python's unicodedata by make_unicode_nfc_tables.py (unicode_nfc_tables.inc).
//
//   NfcNormalize("cafe\u0301");  // "caf\u00e9"
//
// Bytes that are not well-formed UTF-8 are kept as they are and split the text around them:
// each valid run is normalized on its own.
//
// Threading: pure function, safe from any thread.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_UNICODE_NFC_H_
#define TPSERVE_COORDINATOR_TOKENIZER_UNICODE_NFC_H_

#include <string>
#include <string_view>

namespace tpserve {

std::string NfcNormalize(std::string_view text);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_UNICODE_NFC_H_
