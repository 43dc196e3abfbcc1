#include "coordinator/tokenizer/hf_json_components.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kSpace = "\xE2\x96\x81";  // U+2581, "▁"

// Llama 3's split regex exactly as Meta's tokenizer.json spells it.
constexpr absl::string_view kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2's (Qwen2.5, Qwen3): Llama 3's with single digits, as transformers' Qwen2Converter has it.
constexpr absl::string_view kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

absl::Status Unsupported(absl::string_view path, const Json& value, absl::string_view supported) {
  return absl::UnimplementedError(absl::StrCat(path, " = ", value.dump().substr(0, 200),
                                               " is not supported (supported: ", supported, ")"));
}

bool IsNull(const Json& root, const char* key) {
  return !root.contains(key) || root[key].is_null();
}

// A member of a Sequence node (`list_key` "normalizers", "pretokenizers", "decoders").
const Json* SequenceItems(const Json& node, const char* list_key) {
  if (HfJsonType(node) != "Sequence" || !node.contains(list_key) || !node[list_key].is_array()) {
    return nullptr;
  }
  return &node[list_key];
}

bool IsByteLevel(const Json& node, bool use_regex) {
  return HfJsonType(node) == "ByteLevel" && HfJsonFlagIs(node, "add_prefix_space", false, false) &&
         HfJsonFlagIs(node, "use_regex", use_regex, true);
}

// {"String": text} or {"Regex": text} patterns of Split and Replace.
bool PatternIs(const Json& node, const char* kind, absl::string_view text) {
  return node.contains("pattern") && node["pattern"].is_object() &&
         node["pattern"].contains(kind) && node["pattern"][kind].is_string() &&
         node["pattern"][kind].get<std::string>() == text;
}

bool IsReplace(const Json& node, absl::string_view from, absl::string_view to) {
  return HfJsonType(node) == "Replace" && PatternIs(node, "String", from) &&
         node.contains("content") && node["content"].is_string() &&
         node["content"].get<std::string>() == to;
}

absl::StatusOr<PreTokenizerKind> ParseByteLevelPreTokenizer(const Json& node) {
  if (IsByteLevel(node, /*use_regex=*/true)) return PreTokenizerKind::kGpt2;
  const Json* items = SequenceItems(node, "pretokenizers");
  if (items != nullptr && items->size() == 2) {
    const Json& first = (*items)[0];
    const Json& second = (*items)[1];
    if (HfJsonType(first) == "Digits" && HfJsonFlagIs(first, "individual_digits", true, false) &&
        IsByteLevel(second, /*use_regex=*/true)) {
      return PreTokenizerKind::kSmolLm;
    }
    if (HfJsonType(first) == "Split" && first.value("behavior", "") == "Isolated" &&
        HfJsonFlagIs(first, "invert", false, true) && IsByteLevel(second, /*use_regex=*/false)) {
      if (PatternIs(first, "Regex", kLlama3SplitRegex)) return PreTokenizerKind::kLlama3;
      if (PatternIs(first, "Regex", kQwen2SplitRegex)) return PreTokenizerKind::kQwen2;
      return Unsupported("pre_tokenizer.pretokenizers[0].pattern", first.value("pattern", Json()),
                         "the Llama 3 and Qwen2 split regexes");
    }
  }
  std::string shape = HfJsonType(node);
  if (items != nullptr) {
    shape += "[";
    for (const Json& child : *items) shape += HfJsonType(child) + ",";
    shape.back() = ']';
  }
  return absl::UnimplementedError(absl::StrCat(
      "pre_tokenizer ", shape, " ", node.dump().substr(0, 300),
      " is not supported (supported: GPT-2 ByteLevel, SmolLM2 Digits+ByteLevel, Llama 3 and "
      "Qwen2 Split+ByteLevel)"));
}

struct CharBpeNormalizer {
  bool replaces_spaces = false;
  bool prepends = false;
};

absl::StatusOr<CharBpeNormalizer> ParseCharBpeNormalizer(const Json& root) {
  CharBpeNormalizer result;
  if (IsNull(root, "normalizer")) return result;
  const Json& node = root["normalizer"];
  const Json* items = SequenceItems(node, "normalizers");
  const Json single = Json::array({node});
  if (items == nullptr) items = &single;
  for (size_t i = 0; i < items->size(); ++i) {
    const Json& item = (*items)[i];
    if (IsReplace(item, " ", kSpace) && !result.replaces_spaces) {
      result.replaces_spaces = true;
    } else if (HfJsonType(item) == "Prepend" && item.value("prepend", std::string()) == kSpace &&
               !result.prepends) {
      result.prepends = true;
    } else {
      return Unsupported(
          items == &single ? "normalizer" : absl::StrCat("normalizer.normalizers[", i, "]"), item,
          "Replace(\" \", \"▁\") and Prepend(\"▁\"), each at most once");
    }
  }
  if (result.prepends && !result.replaces_spaces) {
    return Unsupported("normalizer", node, "Prepend(\"▁\") only with Replace(\" \", \"▁\")");
  }
  return result;
}

// Metaspace: sets the prefix rule and split.
absl::Status ParseMetaspace(const Json& node, TokenizerData* data) {
  if (!node.contains("replacement") || !node["replacement"].is_string() ||
      node["replacement"].get<std::string>() != kSpace) {
    return Unsupported("pre_tokenizer.replacement", node.value("replacement", Json()), "\"▁\"");
  }
  const std::string scheme = node.value("prepend_scheme", std::string("always"));
  if (node.contains("add_prefix_space") && node["add_prefix_space"].is_boolean() &&
      node["add_prefix_space"].get<bool>() != (scheme != "never")) {
    return absl::InvalidArgumentError(
        absl::StrCat("pre_tokenizer.add_prefix_space contradicts prepend_scheme '", scheme, "'"));
  }
  if (scheme == "always") {
    data->space_prefix = SpacePrefix::kEveryFragmentUnlessSpace;
  } else if (scheme == "first") {
    data->space_prefix = SpacePrefix::kFirstFragmentUnlessSpace;
  } else if (scheme == "never") {
    data->space_prefix = SpacePrefix::kNone;
  } else {
    return Unsupported("pre_tokenizer.prepend_scheme", node["prepend_scheme"],
                       "always, first, never");
  }
  data->split_at_spaces = HfJsonFlagIs(node, "split", true, true);
  return absl::OkStatus();
}

absl::Status ParseCharBpeDecoder(const Json& root, TokenizerData* data) {
  constexpr absl::string_view kSupported =
      "Sequence[Replace(\"▁\", \" \"), ByteFallback, Fuse] with an optional Strip(\" \", 1, 0)";
  const Json& node = root.contains("decoder") ? root["decoder"] : Json();
  const Json* items = SequenceItems(node, "decoders");
  if (items == nullptr || items->size() < 3 || items->size() > 4) {
    return Unsupported("decoder", node, kSupported);
  }
  const char* expected[] = {"Replace", "ByteFallback", "Fuse", "Strip"};
  for (size_t i = 0; i < items->size(); ++i) {
    const Json& item = (*items)[i];
    const bool ok = HfJsonType(item) == expected[i] && (i != 0 || IsReplace(item, kSpace, " ")) &&
                    (i != 3 || (item.value("content", "") == " " && item.value("start", -1) == 1 &&
                                item.value("stop", -1) == 0));
    if (!ok) return Unsupported(absl::StrCat("decoder.decoders[", i, "]"), item, kSupported);
  }
  data->decode_strips_leading_space = items->size() == 4;
  return absl::OkStatus();
}

absl::Status CheckNormalizedAddedTokens(const Json& root, const CharBpeNormalizer& normalizer) {
  if (!normalizer.replaces_spaces || !root.contains("added_tokens")) return absl::OkStatus();
  const Json& added = root["added_tokens"];
  for (size_t i = 0; i < added.size(); ++i) {
    if (!HfJsonFlagIs(added[i], "normalized", true,
                      !HfJsonFlagIs(added[i], "special", true, false))) {
      continue;
    }
    const std::string content = added[i].value("content", "");
    if (normalizer.prepends || absl::StrContains(content, " ") ||
        absl::StrContains(content, kSpace)) {
      return absl::UnimplementedError(
          absl::StrCat("added_tokens[", i, "] '", content,
                       "' has normalized=true, and the normalizer would change it; not supported"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string HfJsonType(const Json& node) {
  return node.is_object() && node.contains("type") && node["type"].is_string()
             ? node["type"].get<std::string>()
             : std::string("<untyped>");
}

bool HfJsonFlagIs(const Json& node, const char* key, bool expected, bool when_absent) {
  if (!node.contains(key) || node[key].is_null()) return expected == when_absent;
  return node[key].is_boolean() && node[key].get<bool>() == expected;
}

absl::Status ParseByteLevelComponents(const Json& root, TokenizerData* data) {
  if (!IsNull(root, "normalizer")) {
    if (HfJsonType(root["normalizer"]) != "NFC") {
      return Unsupported("normalizer", root["normalizer"], "NFC, for byte-level BPE");
    }
    data->nfc = true;
  }
  if (!IsNull(root, "decoder") && HfJsonType(root["decoder"]) != "ByteLevel") {
    return Unsupported("decoder", root["decoder"], "ByteLevel, for byte-level BPE");
  }
  TP_ASSIGN_OR_RETURN(data->pre_tokenizer,
                      ParseByteLevelPreTokenizer(root.value("pre_tokenizer", Json())));
  return absl::OkStatus();
}

absl::Status ParseCharBpeComponents(const Json& root, TokenizerData* data) {
  TP_ASSIGN_OR_RETURN(const CharBpeNormalizer normalizer, ParseCharBpeNormalizer(root));
  data->space_prefix = normalizer.prepends ? SpacePrefix::kEveryFragment : SpacePrefix::kNone;
  data->split_at_spaces = false;
  bool metaspace = false;
  if (!IsNull(root, "pre_tokenizer")) {
    const Json& node = root["pre_tokenizer"];
    if (HfJsonType(node) == "Metaspace" && !normalizer.replaces_spaces) {
      TP_RETURN_IF_ERROR(ParseMetaspace(node, data));
      metaspace = true;
    } else if (!(HfJsonType(node) == "Split" && PatternIs(node, "String", " ") &&
                 HfJsonFlagIs(node, "invert", false, true) && normalizer.replaces_spaces)) {
      // Split(" ") only sees text whose spaces the normalizer has already replaced: a no-op.
      return Unsupported("pre_tokenizer", node,
                         "Metaspace(\"▁\") without a space-replacing normalizer; Split(\" \") "
                         "after one");
    }
  }
  if (!metaspace && !normalizer.replaces_spaces) {
    return Unsupported("normalizer", root.value("normalizer", Json()),
                       "a Replace(\" \", \"▁\") normalizer or a Metaspace pre_tokenizer, for "
                       "byte-fallback BPE");
  }
  TP_RETURN_IF_ERROR(CheckNormalizedAddedTokens(root, normalizer));
  return ParseCharBpeDecoder(root, data);
}

}  // namespace tpserve
