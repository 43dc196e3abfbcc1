#include "coordinator/tokenizer/gguf_tokenizer.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

// Optional token id key: -1 when absent.
absl::StatusOr<int32_t> OptionalTokenId(const GgufFile& gguf, const char* key) {
  if (!gguf.HasKey(key)) return -1;
  TP_ASSIGN_OR_RETURN(uint32_t id, gguf.GetU32(key));
  if (id > static_cast<uint32_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s = %d exceeds INT32_MAX", key, id));
  }
  return static_cast<int32_t>(id);
}

absl::Status ReadTokenTypes(const GgufFile& gguf, TokenizerData* data) {
  const size_t vocab_size = data->tokens.size();
  if (!gguf.HasKey("tokenizer.ggml.token_type")) {
    data->token_types.assign(vocab_size, TokenType::kNormal);
    return absl::OkStatus();
  }
  TP_ASSIGN_OR_RETURN(std::vector<int32_t> types, gguf.GetI32Array("tokenizer.ggml.token_type"));
  if (types.size() != vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tokenizer.ggml.token_type has %d entries but tokenizer.ggml.tokens has %d",
                        types.size(), vocab_size));
  }
  data->token_types.reserve(vocab_size);
  for (size_t id = 0; id < vocab_size; ++id) {
    if (types[id] < 1 || types[id] > 6) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.token_type[%d] = %d is outside [1, 6]", id, types[id]));
    }
    data->token_types.push_back(static_cast<TokenType>(types[id]));
  }
  return absl::OkStatus();
}

// tokenizer.ggml.scores: one float per token, as many as tokens (llama.cpp also takes int32).
absl::Status ReadScores(const GgufFile& gguf, TokenizerData* data) {
  constexpr char kKey[] = "tokenizer.ggml.scores";
  const size_t vocab_size = data->tokens.size();
  if (!gguf.HasKey(kKey)) {
    data->scores.assign(vocab_size, 0.0f);  // llama.cpp's default: merges then go leftmost first
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<float>> scores = gguf.GetF32Array(kKey);
  if (!scores.ok()) {
    absl::StatusOr<std::vector<int32_t>> int_scores = gguf.GetI32Array(kKey);
    if (!int_scores.ok()) return scores.status();
    scores.emplace(int_scores->begin(), int_scores->end());
  }
  if (scores->size() != vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has %d entries but tokenizer.ggml.tokens has %d", kKey,
                        scores->size(), vocab_size));
  }
  for (size_t id = 0; id < vocab_size; ++id) {
    if (std::isnan((*scores)[id])) {
      return absl::InvalidArgumentError(absl::StrFormat("%s[%d] is NaN", kKey, id));
    }
  }
  data->scores = *std::move(scores);
  return absl::OkStatus();
}

// Special ids of an SPM vocabulary, with llama.cpp's defaults for absent keys (BOS 1, EOS 2,
// UNK 0), each dropped when outside the vocabulary as llama.cpp does.
absl::Status ReadSpmSpecialIds(const GgufFile& gguf, TokenizerData* data) {
  const auto vocab_size = static_cast<int64_t>(data->tokens.size());
  auto read = [&](const char* key, int32_t fallback) -> absl::StatusOr<int32_t> {
    TP_ASSIGN_OR_RETURN(int32_t id, OptionalTokenId(gguf, key));
    if (!gguf.HasKey(key)) id = fallback < vocab_size ? fallback : -1;
    return id;
  };
  TP_ASSIGN_OR_RETURN(data->bos_id, read("tokenizer.ggml.bos_token_id", 1));
  TP_ASSIGN_OR_RETURN(data->eos_id, read("tokenizer.ggml.eos_token_id", 2));
  TP_ASSIGN_OR_RETURN(data->unk_id, read("tokenizer.ggml.unknown_token_id", 0));
  TP_ASSIGN_OR_RETURN(data->pad_id, read("tokenizer.ggml.padding_token_id", -1));
  return absl::OkStatus();
}

absl::StatusOr<TokenizerData> SpmDataFromGguf(const GgufFile& gguf) {
  // llama.cpp ignores tokenizer.ggml.pre for SPM vocabularies (Gemma 3 files say "default").
  TokenizerData data;
  data.model = TokenizerModel::kSpm;
  data.add_bos_by_default = true;
  if (gguf.HasKey("tokenizer.ggml.add_bos_token")) {
    TP_ASSIGN_OR_RETURN(data.add_bos_by_default, gguf.GetBool("tokenizer.ggml.add_bos_token"));
  }
  data.add_space_prefix = true;
  if (gguf.HasKey("tokenizer.ggml.add_space_prefix")) {
    TP_ASSIGN_OR_RETURN(data.add_space_prefix, gguf.GetBool("tokenizer.ggml.add_space_prefix"));
  }
  TP_ASSIGN_OR_RETURN(data.tokens, gguf.GetStringArray("tokenizer.ggml.tokens"));
  TP_RETURN_IF_ERROR(ReadTokenTypes(gguf, &data));
  TP_RETURN_IF_ERROR(ReadScores(gguf, &data));
  TP_RETURN_IF_ERROR(ReadSpmSpecialIds(gguf, &data));
  return data;
}

absl::Status ReadMerges(const GgufFile& gguf, TokenizerData* data) {
  TP_ASSIGN_OR_RETURN(std::vector<std::string> merges,
                      gguf.GetStringArray("tokenizer.ggml.merges"));
  data->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    // As llama.cpp: the separator is the first space after the first byte.
    const size_t space = merges[rank].find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.merges[%d] '%s' has no space separating its two sides",
                          rank, merges[rank]));
    }
    data->merges.emplace_back(merges[rank].substr(0, space), merges[rank].substr(space + 1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerData> TokenizerDataFromGguf(const GgufFile& gguf) {
  TP_ASSIGN_OR_RETURN(std::string name, gguf.GetString("tokenizer.ggml.model"));
  // tokenizer.ggml.model names the vocabulary's kind as llama.cpp does (not the architecture:
  // "llama" is SentencePiece, whichever family's file carries it).
  struct NamedModel {
    std::string_view name;
    TokenizerModel model;
  };
  static constexpr NamedModel kModels[] = {{"gpt2", TokenizerModel::kBpe},
                                           {"llama", TokenizerModel::kSpm}};
  const auto* known = std::find_if(std::begin(kModels), std::end(kModels),
                                   [&](const NamedModel& m) { return m.name == name; });
  if (known == std::end(kModels)) {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer.ggml.model '", name,
                     "' is not supported (supported: byte-level BPE 'gpt2', ",
                     "SentencePiece 'llama')"));
  }
  if (known->model == TokenizerModel::kSpm) return SpmDataFromGguf(gguf);
  std::string pre = "default";
  if (gguf.HasKey("tokenizer.ggml.pre")) {
    TP_ASSIGN_OR_RETURN(pre, gguf.GetString("tokenizer.ggml.pre"));
  }
  TokenizerData data;
  TP_ASSIGN_OR_RETURN(data.pre_tokenizer, PreTokenizerKindFromName(pre));
  // As llama.cpp: Llama 3 and tekken emit a piece that is a whole token as is, and add a BOS.
  const bool llama3_like = data.pre_tokenizer == PreTokenizerKind::kLlama3 ||
                           data.pre_tokenizer == PreTokenizerKind::kTekken;
  data.ignore_merges = llama3_like;
  data.add_bos_by_default = llama3_like;
  if (gguf.HasKey("tokenizer.ggml.add_bos_token")) {
    TP_ASSIGN_OR_RETURN(data.add_bos_by_default, gguf.GetBool("tokenizer.ggml.add_bos_token"));
  }
  TP_ASSIGN_OR_RETURN(data.tokens, gguf.GetStringArray("tokenizer.ggml.tokens"));
  TP_RETURN_IF_ERROR(ReadTokenTypes(gguf, &data));
  TP_RETURN_IF_ERROR(ReadMerges(gguf, &data));
  TP_ASSIGN_OR_RETURN(data.bos_id, OptionalTokenId(gguf, "tokenizer.ggml.bos_token_id"));
  TP_ASSIGN_OR_RETURN(data.eos_id, OptionalTokenId(gguf, "tokenizer.ggml.eos_token_id"));
  TP_ASSIGN_OR_RETURN(data.unk_id, OptionalTokenId(gguf, "tokenizer.ggml.unknown_token_id"));
  TP_ASSIGN_OR_RETURN(data.pad_id, OptionalTokenId(gguf, "tokenizer.ggml.padding_token_id"));
  return data;
}

absl::StatusOr<Tokenizer> TokenizerFromGguf(const GgufFile& gguf) {
  TP_ASSIGN_OR_RETURN(TokenizerData data, TokenizerDataFromGguf(gguf));
  return Tokenizer::Create(std::move(data));
}

}  // namespace tpserve
