#include "coordinator/tokenizer/hf_tokenizer_json.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/hf_json_components.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

std::string TypeOf(const Json& node) { return HfJsonType(node); }
bool FlagIs(const Json& node, const char* key, bool expected, bool when_absent) {
  return HfJsonFlagIs(node, key, expected, when_absent);
}

// With byte fallback, vocabulary entries spelled "<0xAB>" are the byte tokens HF's ByteFallback
// decoder turns into single bytes.
void MarkByteTokens(TokenizerData* data) {
  for (size_t id = 0; id < data->tokens.size(); ++id) {
    const std::string& text = data->tokens[id];
    if (data->token_types[id] == TokenType::kNormal && text.size() == 6 &&
        text.rfind("<0x", 0) == 0 && text.back() == '>' && absl::ascii_isxdigit(text[3]) &&
        absl::ascii_isxdigit(text[4])) {
      data->token_types[id] = TokenType::kByte;
    }
  }
}

absl::Status CheckModel(const Json& model) {
  if (TypeOf(model) != "BPE") {
    return absl::UnimplementedError(
        absl::StrCat("model.type '", TypeOf(model), "' is not supported (only BPE)"));
  }
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return absl::UnimplementedError("model.dropout is set; BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      return absl::UnimplementedError(absl::StrCat("model.", key, " is not supported"));
    }
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return absl::InvalidArgumentError("model.vocab is missing or not an object");
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return absl::InvalidArgumentError("model.merges is missing or not an array");
  }
  return absl::OkStatus();
}

absl::Status ParseMerges(const Json& merges, TokenizerData* data) {
  data->merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const Json& merge = merges[rank];
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ', 1);
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "model.merges[%d] '%s' is not two symbols separated by one space", rank, text));
      }
      data->merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      data->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]: %s", rank, merge.dump()));
    }
  }
  return absl::OkStatus();
}

// Writes vocab and added tokens into dense tokens/token_types; ids nobody names become
// unused entries.
absl::Status ParseVocab(const Json& vocab, const Json& added_tokens, TokenizerData* data) {
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("model.vocab['%s'] = %s is not an id in [0, 2^24]", text, id.dump()));
    }
    max_id = std::max(max_id, id.get<int64_t>());
  }
  for (const Json& added : added_tokens) {
    if (!added.is_object() || !added.contains("id") || !added["id"].is_number_integer() ||
        added["id"].get<int64_t>() < 0 || added["id"].get<int64_t>() > (1 << 24) ||
        !added.contains("content") || !added["content"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "added_tokens entry lacks an id in [0, 2^24] or a content string: ", added.dump()));
    }
    max_id = std::max(max_id, added["id"].get<int64_t>());
  }
  data->tokens.assign(max_id + 1, std::string());
  data->token_types.assign(max_id + 1, TokenType::kUnused);
  for (const auto& [text, id] : vocab.items()) {
    const int64_t index = id.get<int64_t>();
    if (data->token_types[index] != TokenType::kUnused) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "model.vocab gives id %d to both '%s' and '%s'", index, data->tokens[index], text));
    }
    data->tokens[index] = text;
    data->token_types[index] = TokenType::kNormal;
  }
  for (const Json& added : added_tokens) {
    const std::string content = added["content"].get<std::string>();
    for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
      if (FlagIs(added, flag, true, false)) {
        return absl::UnimplementedError(absl::StrCat("added token '", content, "' sets ", flag,
                                                     "=true, which is not supported"));
      }
    }
    const int64_t index = added["id"].get<int64_t>();
    data->tokens[index] = content;
    data->token_types[index] =
        FlagIs(added, "special", true, false) ? TokenType::kControl : TokenType::kUserDefined;
  }
  return absl::OkStatus();
}

// Finds BOS in (possibly nested Sequence) post-processors; sets add_bos_by_default.
absl::Status ParsePostProcessor(const Json& node, const Json& added_tokens, TokenizerData* data) {
  if (node.is_null() || TypeOf(node) == "ByteLevel") return absl::OkStatus();
  if (TypeOf(node) == "Sequence" && node.contains("processors") && node["processors"].is_array()) {
    for (const Json& child : node["processors"]) {
      TP_RETURN_IF_ERROR(ParsePostProcessor(child, added_tokens, data));
    }
    return absl::OkStatus();
  }
  if (TypeOf(node) == "TemplateProcessing" && node.contains("single") &&
      node["single"].is_array() && !node["single"].empty()) {
    const Json& single = node["single"];
    const Json& first = single[0];
    const bool bos_then_text =
        single.size() == 2 && first.contains("SpecialToken") && single[1].contains("Sequence");
    if (single.size() == 1 && single[0].contains("Sequence")) return absl::OkStatus();
    if (bos_then_text) {
      const std::string bos = first["SpecialToken"].value("id", "");
      for (const Json& added : added_tokens) {
        if (added["content"] == bos) {
          data->bos_id = added["id"].get<int32_t>();
          data->add_bos_by_default = true;
          return absl::OkStatus();
        }
      }
      return absl::InvalidArgumentError(absl::StrCat("post_processor.single names special token '",
                                                     bos, "' that is not an added token"));
    }
  }
  return absl::UnimplementedError(absl::StrCat("post_processor ", node.dump().substr(0, 300),
                                               " is not supported (only BOS + text)"));
}

absl::StatusOr<TokenizerData> ParseRoot(const Json& root) {
  if (!root.is_object()) return absl::InvalidArgumentError("tokenizer.json is not an object");
  if (!root.contains("model")) return absl::InvalidArgumentError("tokenizer.json has no model");
  const Json& model = root["model"];
  TP_RETURN_IF_ERROR(CheckModel(model));
  const Json added_tokens = root.value("added_tokens", Json::array());
  if (!added_tokens.is_array()) return absl::InvalidArgumentError("added_tokens is not an array");

  TokenizerData data;
  // byte_fallback marks the SentencePiece-converted shape: BPE over characters, "▁" for space.
  const bool char_bpe = FlagIs(model, "byte_fallback", true, false);
  if (char_bpe) {
    data.model = TokenizerModel::kCharBpe;
    data.byte_fallback = true;
    data.fuse_unk = FlagIs(model, "fuse_unk", true, false);
    TP_RETURN_IF_ERROR(ParseCharBpeComponents(root, &data));
  } else {
    TP_RETURN_IF_ERROR(ParseByteLevelComponents(root, &data));
  }
  TP_RETURN_IF_ERROR(ParseVocab(model["vocab"], added_tokens, &data));
  if (char_bpe) MarkByteTokens(&data);
  TP_RETURN_IF_ERROR(ParseMerges(model["merges"], &data));
  TP_RETURN_IF_ERROR(ParsePostProcessor(root.value("post_processor", Json()), added_tokens, &data));
  data.ignore_merges = FlagIs(model, "ignore_merges", true, false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    const auto it = model["vocab"].find(model["unk_token"].get<std::string>());
    if (it != model["vocab"].end()) data.unk_id = it->get<int32_t>();
  }
  return data;
}

}  // namespace

absl::StatusOr<TokenizerData> TokenizerDataFromHfJson(std::string_view json_text) {
  Json root;
  try {
    root = Json::parse(json_text.begin(), json_text.end());
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json does not parse: ", e.what()));
  }
  try {
    return ParseRoot(root);
  } catch (const Json::exception& e) {
    // A field of an unexpected JSON type that the checks above did not anticipate.
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json has a malformed field: ", e.what()));
  }
}

absl::StatusOr<Tokenizer> LoadHfTokenizerJson(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open tokenizer.json at ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  TP_ASSIGN_OR_RETURN(TokenizerData data, TokenizerDataFromHfJson(contents.str()));
  return Tokenizer::Create(std::move(data));
}

}  // namespace tpserve
