// Adapter from GGUF metadata (llama.cpp's `tokenizer.ggml.*` keys) to the tokenizer (the chat
// template, tokenizer.chat_template, is read by coordinator/model_bundle.cc). Only byte-level
// BPE vocabularies (tokenizer.ggml.model = "gpt2") are supported.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
//   TP_ASSIGN_OR_RETURN(Tokenizer tokenizer, TokenizerFromGguf(*gguf));
//
// Keys read: tokenizer.ggml.model, .pre (absent = "default", as llama.cpp), .tokens,
// .token_type (absent = all normal), .merges ("left right"), .bos/.eos/.unknown/.padding
// _token_id (absent = none), .add_bos_token (absent = true for Llama 3, false otherwise, as
// llama.cpp). Llama 3's pre-tokenizer implies ignore_merges.
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
// arrays (e.g. token_type length differs from tokens, a merge without a space).
absl::StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& gguf);
absl::StatusOr<Tokenizer> TokenizerFromGguf(const GgufFile& gguf);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_GGUF_TOKENIZER_H_
