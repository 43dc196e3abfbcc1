// Adapter from GGUF metadata (llama.cpp's `tokenizer.ggml.*` keys) to the tokenizer (the chat
// template, tokenizer.chat_template, is read by coordinator/model_bundle.cc). Supports byte-level
// BPE (tokenizer.ggml.model = "gpt2") and SentencePiece-style (= "llama": Llama 2, Mistral,
// Gemma) vocabularies.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
//   TP_ASSIGN_OR_RETURN(Tokenizer tokenizer, TokenizerFromGguf(*gguf));
//
// Keys read, both kinds: tokenizer.ggml.model, .tokens, .token_type (absent = all normal),
// .bos/.eos/.unknown/.padding_token_id, .add_bos_token.
// BPE: .pre (absent = "default", as llama.cpp), .merges ("left right"); special ids absent =
// none; add_bos absent = true for Llama 3 and tekken, false otherwise. Llama 3's and tekken's
// pre-tokenizers imply ignore_merges.
// SPM (as llama.cpp): .scores (absent = all 0), .add_space_prefix (absent = true); .pre is
// ignored; absent ids default to BOS 1, EOS 2, UNK 0; add_bos absent = true.
//
// Threading: pure functions; the GgufFile is only read.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_GGUF_TOKENIZER_H_
#define TPSERVE_COORDINATOR_TOKENIZER_GGUF_TOKENIZER_H_

#include "absl/status/statusor.h"
#include "coordinator/tokenizer/tokenizer.h"
#include "formats/gguf.h"

namespace tpserve {

// UNIMPLEMENTED for another tokenizer model or pre-tokenizer (named); NOT_FOUND for a
// missing required key; INVALID_ARGUMENT naming the key, index and bound for inconsistent
// arrays (e.g. token_type or scores length differs from tokens, a merge without a space, a
// NaN score).
absl::StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& gguf);
absl::StatusOr<Tokenizer> TokenizerFromGguf(const GgufFile& gguf);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_GGUF_TOKENIZER_H_
