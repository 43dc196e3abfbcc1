// The normalizer / pre_tokenizer / decoder sections of a Hugging Face tokenizer.json, read into
// TokenizerData (used by hf_tokenizer_json.cc). Two shapes are understood, each exactly:
//
//   Byte-level BPE (model.byte_fallback false):
//     normalizer    null | NFC (Qwen2)
//     pre_tokenizer ByteLevel (GPT-2) | Sequence[Digits(individual), ByteLevel] (SmolLM2) |
//                   Sequence[Split(Llama 3 or Qwen2 regex, Isolated), ByteLevel(no regex)]
//     decoder       null | ByteLevel
//   Character BPE with byte fallback (model.byte_fallback true; SentencePiece models converted
//   by transformers: Llama 2 / Mistral legacy, Mistral v0.3, Gemma 2/3):
//     normalizer    null | Replace(" ", "▁") | Sequence[Prepend("▁"), Replace(" ", "▁")]
//     pre_tokenizer null | Metaspace("▁", prepend_scheme, split) |
//                   Split(" ", any behaviour) when the normalizer already replaced every space
//     decoder       Sequence[Replace("▁", " "), ByteFallback, Fuse(, Strip(" ", 1, 0))]
//   and spaces must become "▁" exactly once (the normalizer's Replace or Metaspace).
//
// Anything else is UNIMPLEMENTED naming the JSON path and (the start of) its value.
//
//   TP_RETURN_IF_ERROR(ParseCharBpeComponents(root, &data));
//
// Threading: pure functions.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_HF_JSON_COMPONENTS_H_
#define TPSERVE_COORDINATOR_TOKENIZER_HF_JSON_COMPONENTS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

// node["type"] when it is a string, else "<untyped>".
std::string HfJsonType(const nlohmann::json& node);

// Whether node[key] is the boolean `expected`; an absent or null key counts as `when_absent`.
bool HfJsonFlagIs(const nlohmann::json& node, const char* key, bool expected, bool when_absent);

// Sets data->pre_tokenizer and data->nfc from the root object.
absl::Status ParseByteLevelComponents(const nlohmann::json& root, TokenizerData* data);

// Sets data->space_prefix, split_at_spaces and decode_strips_leading_space from the root object.
// Added tokens with normalized=true are refused where the normalizer would change their text
// (HF matches them in normalized text): one holding a space or "▁", or any under Prepend.
absl::Status ParseCharBpeComponents(const nlohmann::json& root, TokenizerData* data);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_HF_JSON_COMPONENTS_H_
