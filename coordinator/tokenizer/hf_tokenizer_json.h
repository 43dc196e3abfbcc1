// Adapter from a Hugging Face `tokenizer.json` to TokenizerData. model.type "BPE" (vocab +
// merges as "a b" strings or [a, b] pairs), added_tokens (special -> control, otherwise
// user-defined; lstrip/rstrip/single_word refused), in two shapes (hf_json_components.h has
// the exact normalizers, pre-tokenizers and decoders of each):
//   * byte-level BPE: GPT-2, SmolLM2, Llama 3, Qwen2/2.5/3 (NFC + Qwen's Split regex);
//   * byte_fallback: true, BPE over characters with "▁" for space (TokenizerModel::kCharBpe):
//     Llama 2 / Mistral (Prepend + Replace normalizer, or Metaspace), Gemma 2/3 (Replace).
// Anything else is UNIMPLEMENTED naming the unsupported field, never silently approximated.
//
//   TP_ASSIGN_OR_RETURN(TokenizerData data, TokenizerDataFromHfJson(json_text));
//   TP_ASSIGN_OR_RETURN(Tokenizer tok, LoadHfTokenizerJson("/models/x/tokenizer.json"));
//
// BOS comes from a TemplateProcessing post-processor when present; tokenizer.json does not
// name an EOS token (that lives in tokenizer_config.json), so eos_id stays -1.
//
// Threading: pure functions, safe from any thread.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_HF_TOKENIZER_JSON_H_
#define TPSERVE_COORDINATOR_TOKENIZER_HF_TOKENIZER_JSON_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

// INVALID_ARGUMENT for malformed JSON or inconsistent contents (field and value named);
// UNIMPLEMENTED for valid but unsupported structure.
absl::StatusOr<TokenizerData> TokenizerDataFromHfJson(std::string_view json_text);

// Reads the file at `path` (NOT_FOUND if it cannot be opened) and builds the tokenizer.
absl::StatusOr<Tokenizer> LoadHfTokenizerJson(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_HF_TOKENIZER_JSON_H_
