#include "coordinator/structured/schema_normalize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "coordinator/structured/schema_policy.h"
#include "uriparser/Uri.h"

namespace tpserve {
namespace {

using Json = nlohmann::ordered_json;

enum class Draft { k4, k6, k7, k2019, k2020 };

// The base URI of a document that declares none: a relative reference resolves against it
// like any other, and one that leaves the document is refused as remote.
constexpr char kDocumentUri[] = "https://tpserve.invalid/schema.json";
constexpr int kMaxDepth = 256;
// Listed annotations kept per schema (a generated schema may carry thousands of x-* keys).
constexpr size_t kMaxListedAnnotations = 64;

Draft DraftOf(const Json& root) {
  if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) {
    return Draft::k2020;
  }
  const std::string s = root["$schema"].get<std::string>();
  if (s.find("draft-03") != std::string::npos || s.find("draft-04") != std::string::npos) {
    return Draft::k4;
  }
  if (s.find("draft-06") != std::string::npos) return Draft::k6;
  if (s.find("draft-07") != std::string::npos) return Draft::k7;
  if (s.find("2019-09") != std::string::npos) return Draft::k2019;
  return Draft::k2020;
}

// "$vocabulary" naming format-assertion (2019-09's format vocabulary set to true, or 2020-12's
// format-assertion): an unknown format is then an assertion we cannot enforce.
bool DeclaresFormatAssertion(const Json& root) {
  if (!root.is_object() || !root.contains("$vocabulary") || !root["$vocabulary"].is_object()) {
    return false;
  }
  for (const auto& [uri, required] : root["$vocabulary"].items()) {
    if (uri.find("/vocab/format-assertion") != std::string::npos) return true;
    if (uri.find("2019-09/vocab/format") != std::string::npos && required == true) return true;
  }
  return false;
}

}  // namespace

bool IsWholeNumber(const Json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double d = value.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

bool JsonTypeMatches(const Json& value, std::string_view type) {
  if (type == "string") return value.is_string();
  if (type == "integer") return IsWholeNumber(value);
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  return false;
}

std::string_view KeywordInstanceType(std::string_view key) {
  static const std::set<std::string, std::less<>> kString = {"minLength", "maxLength", "pattern",
                                                             "format"};
  static const std::set<std::string, std::less<>> kNumber = {
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
  static const std::set<std::string, std::less<>> kArray = {
      "items",    "prefixItems", "minItems",    "maxItems",        "uniqueItems",
      "contains", "minContains", "maxContains", "unevaluatedItems"};
  static const std::set<std::string, std::less<>> kObject = {
      "properties",       "patternProperties", "additionalProperties", "required",
      "propertyNames",    "minProperties",     "maxProperties",        "dependentRequired",
      "dependentSchemas", "dependencies",      "unevaluatedProperties"};
  if (kString.count(key) > 0) return "string";
  if (kNumber.count(key) > 0) return "number";
  if (kArray.count(key) > 0) return "array";
  if (kObject.count(key) > 0) return "object";
  return "";
}

std::string JsonPointerChild(std::string_view pointer, std::string_view token) {
  std::string out(pointer);
  out += '/';
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string> TypeNames(const Json& type) {
  std::vector<std::string> out;
  if (type.is_string()) out.push_back(type.get<std::string>());
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string()) out.push_back(t.get<std::string>());
    }
  }
  return out;
}

bool IsSchemaMetadataKeyword(std::string_view key) {
  static const std::set<std::string> kKeys = {
      "title",     "description", "default",          "examples",        "deprecated",   "readOnly",
      "writeOnly", "$comment",    "contentMediaType", "contentEncoding", "contentSchema"};
  return kKeys.count(std::string(key)) > 0;
}

namespace {

// Keywords about the document, not the instance: identifiers, anchors, definitions.
bool IsStructural(const std::string& key, Draft draft) {
  static const std::set<std::string> kKeys = {
      "$schema",          "$id",         "$anchor", "$dynamicAnchor",
      "$recursiveAnchor", "$vocabulary", "$defs",   "definitions"};
  return kKeys.count(key) > 0 || (draft == Draft::k4 && key == "id");
}

// The assertion and applicator keywords of each draft's vocabulary.
bool IsAssertion(const std::string& key, Draft draft) {
  static const std::set<std::string> kAll = {"type",
                                             "enum",
                                             "multipleOf",
                                             "maximum",
                                             "exclusiveMaximum",
                                             "minimum",
                                             "exclusiveMinimum",
                                             "maxLength",
                                             "minLength",
                                             "pattern",
                                             "maxItems",
                                             "minItems",
                                             "uniqueItems",
                                             "maxProperties",
                                             "minProperties",
                                             "required",
                                             "properties",
                                             "patternProperties",
                                             "additionalProperties",
                                             "items",
                                             "allOf",
                                             "anyOf",
                                             "oneOf",
                                             "not",
                                             "$ref",
                                             "format"};
  if (kAll.count(key) > 0) return true;
  const bool six = draft != Draft::k4;
  const bool seven = six && draft != Draft::k6;
  const bool modern = draft == Draft::k2019 || draft == Draft::k2020;
  if (six && (key == "const" || key == "contains" || key == "propertyNames")) return true;
  if (seven && (key == "if" || key == "then" || key == "else")) return true;
  if (!modern && key == "dependencies") return true;
  // additionalItems: every draft (the array form of "items" is read in every draft, below).
  if (key == "additionalItems") return true;
  if (modern &&
      (key == "dependentRequired" || key == "dependentSchemas" || key == "unevaluatedItems" ||
       key == "unevaluatedProperties" || key == "minContains" || key == "maxContains")) {
    return true;
  }
  if (draft == Draft::k2019 && key == "$recursiveRef") return true;
  if (draft == Draft::k2020 && (key == "prefixItems" || key == "$dynamicRef")) return true;
  // prefixItems in a schema declaring 2019-09 or older is taken too: it is how the array form
  // of "items" is spelled after the rewrite below, and XGrammar reads it.
  return key == "prefixItems";
}

std::string Child(const std::string& pointer, const std::string& token) {
  return JsonPointerChild(pointer, token);
}

int64_t CountNodes(const Json& j) {
  int64_t n = 1;
  if (j.is_object() || j.is_array()) {
    for (const Json& c : j) n += CountNodes(c);
  }
  return n;
}

// RFC 3986 reference resolution (uriparser).
class Uri {
 public:
  explicit Uri(const std::string& text) {
    ok_ = uriParseSingleUriA(&uri_, text.c_str(), nullptr) == URI_SUCCESS;
  }
  Uri() = default;
  ~Uri() { uriFreeUriMembersA(&uri_); }
  Uri(const Uri&) = delete;
  Uri& operator=(const Uri&) = delete;
  bool ok() const { return ok_; }
  UriUriA* get() { return &uri_; }
  void set_ok() { ok_ = true; }
  std::string ToString() const {
    int chars = 0;
    if (uriToStringCharsRequiredA(&uri_, &chars) != URI_SUCCESS) return "";
    std::string out(chars + 1, '\0');
    if (uriToStringA(out.data(), &uri_, chars + 1, nullptr) != URI_SUCCESS) return "";
    out.resize(chars);
    return out;
  }

 private:
  UriUriA uri_{};
  bool ok_ = false;
};

std::optional<std::string> Resolve(const std::string& base, const std::string& reference) {
  Uri b(base), r(reference), out;
  if (!b.ok() || !r.ok()) return std::nullopt;
  if (uriAddBaseUriA(out.get(), r.get(), b.get()) != URI_SUCCESS) return std::nullopt;
  out.set_ok();
  uriNormalizeSyntaxA(out.get());
  return out.ToString();
}

// "doc#frag" as the document and the fragment (percent-decoded).
std::pair<std::string, std::string> SplitFragment(const std::string& uri) {
  const size_t hash = uri.find('#');
  if (hash == std::string::npos) return {uri, ""};
  std::string fragment = uri.substr(hash + 1);
  fragment.push_back('\0');
  uriUnescapeInPlaceA(fragment.data());
  fragment.resize(std::char_traits<char>::length(fragment.c_str()));
  return {uri.substr(0, hash), fragment};
}

bool IsTrueSchema(const Json& j) {
  if (j.is_boolean()) return j.get<bool>();
  if (!j.is_object()) return false;
  for (const auto& [key, value] : j.items()) {
    if (key != kOriginKey && key != kMergedKey && !IsSchemaMetadataKeyword(key)) return false;
  }
  return true;
}

bool IsFalseSchema(const Json& j) { return j.is_boolean() && !j.get<bool>(); }

// Whether `value` satisfies the keyword `key` of `node`; nullopt where that is not decided here
// (pattern, format, ...).
std::optional<bool> Satisfies(const Json& value, const Json& node, const std::string& key) {
  const Json& bound = node[key];
  if (key == "type") {
    if (bound.is_string()) return JsonTypeMatches(value, bound.get<std::string>());
    if (!bound.is_array()) return std::nullopt;
    return std::any_of(bound.begin(), bound.end(), [&](const Json& t) {
      return t.is_string() && JsonTypeMatches(value, t.get<std::string>());
    });
  }
  const std::string_view applies = KeywordInstanceType(key);
  if (applies == "string" && !value.is_string()) return true;
  if (applies == "number" && !value.is_number()) return true;
  if (applies == "array" && !value.is_array()) return true;
  if (applies == "object" && !value.is_object()) return true;
  if ((key == "minLength" || key == "maxLength") && bound.is_number()) {
    int64_t chars = 0;  // code points: the bytes that do not continue a UTF-8 sequence
    for (unsigned char c : value.get<std::string>()) chars += (c & 0xC0) != 0x80;
    return key == "minLength" ? chars >= bound.get<double>() : chars <= bound.get<double>();
  }
  if (bound.is_number() && value.is_number()) {
    const double v = value.get<double>(), b = bound.get<double>();
    if (key == "minimum") return v >= b;
    if (key == "maximum") return v <= b;
    if (key == "exclusiveMinimum") return v > b;
    if (key == "exclusiveMaximum") return v < b;
    if (key == "multipleOf" && IsWholeNumber(value) && IsWholeNumber(bound) && b > 0) {
      return std::fmod(v, b) == 0;
    }
  }
  if ((key == "minItems" || key == "maxItems" || key == "minProperties" ||
       key == "maxProperties") &&
      bound.is_number()) {
    const double n = static_cast<double>(value.size());
    return key.rfind("min", 0) == 0 ? n >= bound.get<double>() : n <= bound.get<double>();
  }
  if (key == "required" && bound.is_array()) {
    for (const Json& name : bound) {
      if (!name.is_string() || !value.contains(name.get<std::string>())) return false;
    }
    return true;
  }
  return std::nullopt;
}

// const/enum beside other keywords: XGrammar generates the values alone, so the values that
// break a keyword decided here (type, lengths, bounds, item and property counts, required
// names) are taken out and the keyword with them; `false` where no value is left.
Json FilterValues(Json node) {
  if (!node.is_object() || !(node.contains("const") || node.contains("enum"))) return node;
  const bool is_const = node.contains("const");
  if (!is_const && (!node["enum"].is_array() || node["enum"].empty())) return node;
  std::vector<Json> values =
      is_const ? std::vector<Json>{node["const"]} : node["enum"].get<std::vector<Json>>();
  std::vector<std::string> decided;
  for (const auto& item : node.items()) {
    const std::string& key = item.key();
    if (key == "const" || key == "enum" || key == kOriginKey || key == kMergedKey ||
        IsSchemaMetadataKeyword(key)) {
      continue;
    }
    const bool all = std::all_of(values.begin(), values.end(), [&](const Json& v) {
      return Satisfies(v, node, key).has_value();
    });
    if (!all) continue;
    std::vector<Json> kept;
    for (const Json& v : values) {
      if (*Satisfies(v, node, key)) kept.push_back(v);
    }
    values = std::move(kept);
    decided.push_back(key);
  }
  if (values.empty()) return Json(false);
  for (const std::string& key : decided) node.erase(key);
  if (is_const) {
    node.erase("enum");
  } else {
    node["enum"] = values;
  }
  return node;
}

// Keywords whose values are schemas: one, a list, or a map of them.
enum class Holds { kNone, kSchema, kList, kMap };
Holds ChildKind(const std::string& key) {
  static const std::set<std::string> kOne = {"additionalProperties",
                                             "additionalItems",
                                             "unevaluatedItems",
                                             "unevaluatedProperties",
                                             "not",
                                             "if",
                                             "then",
                                             "else",
                                             "contains",
                                             "propertyNames",
                                             "contentSchema"};
  static const std::set<std::string> kLists = {"allOf", "anyOf", "oneOf", "prefixItems"};
  static const std::set<std::string> kMaps = {"properties", "patternProperties", "$defs",
                                              "definitions", "dependentSchemas"};
  if (kOne.count(key) > 0) return Holds::kSchema;
  if (kLists.count(key) > 0) return Holds::kList;
  if (kMaps.count(key) > 0) return Holds::kMap;
  return Holds::kNone;
}

class Normalizer {
 public:
  Normalizer(const Json& root, bool strict, std::string_view field, std::string_view prefix)
      : root_(root),
        draft_(DraftOf(root)),
        format_assertion_(DeclaresFormatAssertion(root)),
        strict_(strict),
        field_(field),
        prefix_(prefix) {}

  absl::StatusOr<NormalizedSchema> Run() {
    IndexIds(root_, "", kDocumentUri, 0);
    NormalizedSchema result;
    TP_ASSIGN_OR_RETURN(result.schema, Node(root_, "", kDocumentUri, 0));
    // Targets found while normalizing may reach more targets.
    for (size_t i = 0; i < targets_.size(); ++i) TP_RETURN_IF_ERROR(Normalized(i).status());
    // A reference to `true` or `false` is that boolean (XGrammar refuses a $ref to `false`, and
    // the second half of the policy treats a `false` property or pattern by itself).
    InlineBooleanTargets(result.schema);
    for (Target& t : targets_) InlineBooleanTargets(t.out);
    // The table holds the targets still referred to (a merge copies the ones it reaches).
    std::set<size_t> used;
    std::vector<const Json*> pending = {&result.schema};
    while (!pending.empty()) {
      const Json* j = pending.back();
      pending.pop_back();
      if (j->is_object() && j->contains("$ref")) {
        if (std::optional<size_t> index = TableIndex((*j)["$ref"])) {
          if (used.insert(*index).second) pending.push_back(&targets_[*index].out);
        }
      }
      if (j->is_object() || j->is_array()) {
        for (const Json& child : *j) pending.push_back(&child);
      }
    }
    if (!used.empty()) {
      if (!result.schema.is_object()) {
        return absl::InternalError("a schema with references normalized to a boolean");
      }
      Json defs = Json::object();
      for (size_t i : used) defs[DefName(i)] = targets_[i].out;
      result.schema["$defs"] = std::move(defs);
    }
    // A target normalized twice (once inside a failed disjointness proof) lists once.
    for (std::vector<std::string>* list : {&annotations_, &dropped_}) {
      std::set<std::string> seen;
      list->erase(std::remove_if(list->begin(), list->end(),
                                 [&](const std::string& p) { return !seen.insert(p).second; }),
                  list->end());
    }
    if (annotations_.size() > kMaxListedAnnotations) {
      const size_t more = annotations_.size() - kMaxListedAnnotations;
      annotations_.resize(kMaxListedAnnotations);
      annotations_.push_back(StrCat("(and ", more, " more)"));
    }
    result.annotations = std::move(annotations_);
    result.dropped = std::move(dropped_);
    return result;
  }

 private:
  struct Target {
    std::string pointer;  // in the input
    std::string base;     // the base URI the target's own $id resolves against
    enum { kQueued, kRunning, kDone } state = kQueued;
    Json out;
  };

  absl::Status Error(const std::string& pointer, std::string_view rest) const {
    const std::string at = StrCat(prefix_, pointer);
    return FieldError(field_, StrCat(": at ", at.empty() ? "/" : at, rest));
  }

  std::string Shown(const std::string& pointer) const {
    const std::string at = StrCat(prefix_, pointer);
    return at.empty() ? "/" : at;
  }

  static std::string DefName(size_t i) { return StrCat("ref", i); }

  void InlineBooleanTargets(Json& j) const {
    if (j.is_object() && j.contains("$ref")) {
      if (std::optional<size_t> index = TableIndex(j["$ref"])) {
        if (targets_[*index].out.is_boolean()) {
          j = targets_[*index].out;
          return;
        }
      }
    }
    if (j.is_object() || j.is_array()) {
      for (Json& child : j) InlineBooleanTargets(child);
    }
  }

  // The table entry a rewritten reference ("#/$defs/ref<n>") names; nullopt for anything else
  // (a value in an enum or a default may look like one).
  std::optional<size_t> TableIndex(const Json& ref) const {
    constexpr std::string_view kPrefix = "#/$defs/ref";
    if (!ref.is_string()) return std::nullopt;
    const std::string& name = ref.get_ref<const std::string&>();
    size_t index = 0;
    if (name.rfind(kPrefix, 0) != 0 || !absl::SimpleAtoi(name.substr(kPrefix.size()), &index) ||
        index >= targets_.size()) {
      return std::nullopt;
    }
    return index;
  }

  // The identifier of a schema node: "$id" (draft-04: "id"), when it is a string.
  const Json* IdOf(const Json& node) const {
    const char* key = draft_ == Draft::k4 ? "id" : "$id";
    if (node.is_object() && node.contains(key) && node[key].is_string()) return &node[key];
    return nullptr;
  }

  // Every identified node and anchor, by absolute URI, with the base in effect above it.
  void IndexIds(const Json& node, const std::string& pointer, std::string base, int depth) {
    if (!node.is_object() || depth > kMaxDepth) return;
    if (const Json* id = IdOf(node)) {
      const std::string text = id->get<std::string>();
      if (std::optional<std::string> uri = Resolve(base, text)) {
        auto [document, fragment] = SplitFragment(*uri);
        if (text.rfind('#', 0) == 0 && !fragment.empty()) {
          anchors_[StrCat(document, "#", fragment)] = pointer;  // draft-06/07 "#name"
        } else {
          documents_[document] = pointer;
          base = document;
        }
      }
    }
    for (const char* key : {"$anchor", "$dynamicAnchor"}) {
      if (node.contains(key) && node[key].is_string()) {
        anchors_[StrCat(SplitFragment(base).first, "#", node[key].get<std::string>())] = pointer;
      }
    }
    for (const auto& [key, value] : node.items()) {
      const std::string at = Child(pointer, key);
      Holds holds = ChildKind(key);
      if (key == "items" || key == "dependencies")
        holds = value.is_array() ? Holds::kList : key == "items" ? Holds::kSchema : Holds::kMap;
      if (holds == Holds::kSchema) {
        IndexIds(value, at, base, depth + 1);
      } else if (holds == Holds::kList && value.is_array()) {
        for (size_t i = 0; i < value.size(); ++i) {
          IndexIds(value[i], Child(at, std::to_string(i)), base, depth + 1);
        }
      } else if (holds == Holds::kMap && value.is_object()) {
        for (const auto& [name, sub] : value.items()) {
          IndexIds(sub, Child(at, name), base, depth + 1);
        }
      }
    }
  }

  // The base URI in effect at `pointer` from the ids of the nodes above it.
  std::string BaseAbove(const std::string& pointer) const {
    std::string base = kDocumentUri;
    const Json* node = &root_;
    std::string at;
    const Json::json_pointer path(pointer);
    std::vector<std::string> tokens;
    for (Json::json_pointer p = path; !p.empty(); p = p.parent_pointer()) {
      tokens.push_back(p.back());
    }
    std::reverse(tokens.begin(), tokens.end());
    for (const std::string& token : tokens) {
      if (const Json* id = IdOf(*node)) {
        const std::string text = id->get<std::string>();
        if (text.rfind('#', 0) != 0) {
          if (std::optional<std::string> uri = Resolve(base, text)) {
            base = SplitFragment(*uri).first;
          }
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &(*node)[token];
      } else if (size_t i = 0;
                 node->is_array() && absl::SimpleAtoi(token, &i) && i < node->size()) {
        node = &(*node)[i];
      } else {
        break;
      }
    }
    return base;
  }

  // The input pointer a reference names, or an error naming where it sits.
  absl::StatusOr<std::string> RefTarget(const Json& ref, const std::string& at,
                                        const std::string& base) {
    if (!ref.is_string()) return Error(at, " must be a string");
    const std::string text = ref.get<std::string>();
    std::optional<std::string> uri = Resolve(base, text);
    if (!uri) return Error(at, StrCat(": \"", text, "\" is not a URI reference"));
    auto [document, fragment] = SplitFragment(*uri);
    std::string pointer;
    if (document == kDocumentUri) {
      pointer = "";
    } else if (auto it = documents_.find(document); it != documents_.end()) {
      pointer = it->second;
    } else {
      return Error(at,
                   StrCat(": \"", text, "\" does not resolve in this schema (it names ", document,
                          "; only this document and the schemas in it that an "
                          "\"$id\" names are resolved, nothing is fetched)"));
    }
    if (!fragment.empty() && fragment[0] == '/') {
      pointer += fragment;
    } else if (!fragment.empty()) {
      auto it = anchors_.find(StrCat(document, "#", fragment));
      if (it == anchors_.end()) {
        return Error(at, StrCat(": \"", text, "\" does not resolve in this schema (no anchor \"",
                                fragment, "\")"));
      }
      pointer = it->second;
    }
    try {
      if (!root_.contains(Json::json_pointer(pointer))) {
        return Error(at, StrCat(": \"", text, "\" does not resolve in this schema"));
      }
    } catch (const Json::exception& e) {
      return Error(at, StrCat(": \"", text, "\" is not a valid JSON pointer (", e.what(), ")"));
    }
    return pointer;
  }

  // "#" for the root, "#/$defs/ref<n>" for any other target (queued to be normalized).
  std::string RefName(const std::string& pointer) {
    if (pointer.empty()) return "#";
    return StrCat("#/$defs/", DefName(TargetIndex(pointer)));
  }

  size_t TargetIndex(const std::string& pointer) {
    auto [it, added] = target_index_.emplace(pointer, targets_.size());
    if (added) targets_.push_back(Target{pointer, BaseAbove(pointer)});
    return it->second;
  }

  // The normalized form of target `i` (the root's for pointer ""), made once.
  absl::StatusOr<Json> Normalized(size_t i) {
    Target& t = targets_[i];
    if (t.state == Target::kDone) return t.out;
    if (t.state == Target::kRunning) {
      // Content turns this into a message naming the merge; no other caller lets it through.
      return absl::FailedPreconditionError(
          StrCat("the schema at ", Shown(t.pointer), " is reached again while it is merged"));
    }
    t.state = Target::kRunning;
    const std::string pointer = t.pointer, base = t.base;
    absl::StatusOr<Json> out = Node(root_.at(Json::json_pointer(pointer)), pointer, base, 0);
    if (!out.ok()) {
      targets_[i].state = Target::kQueued;  // a later caller meets the same error, not a cycle
      return out.status();
    }
    targets_[i].out = *std::move(out);
    targets_[i].state = Target::kDone;
    return targets_[i].out;
  }

  // A node's content where a merge needs it: its $ref replaced by what the reference names.
  absl::StatusOr<Json> Content(Json node, const std::string& at) {
    for (int hops = 0; node.is_object() && node.contains("$ref"); ++hops) {
      const std::optional<size_t> entry = TableIndex(node["$ref"]);
      if (!entry.has_value()) {
        return Error(at,
                     ": merges a schema with a reference to the whole document, which "
                     "holds that merge; the result would be infinite");
      }
      const size_t index = *entry;
      absl::StatusOr<Json> target = Normalized(index);
      if (absl::IsFailedPrecondition(target.status()) || hops > kMaxDepth) {
        return Error(at, StrCat(": the merge reaches ", Shown(targets_[index].pointer),
                                " through references back to itself; the result would be "
                                "infinite"));
      }
      TP_RETURN_IF_ERROR(target.status());
      copied_ += CountNodes(*target);
      if (copied_ > kMaxMergedNodes) return OverBound(at);
      Json rest = std::move(node);
      rest.erase("$ref");
      node = *std::move(target);
      if (!IsTrueSchema(rest)) {
        TP_ASSIGN_OR_RETURN(node, Merge(std::move(node), std::move(rest), at));
      }
    }
    return node;
  }

  absl::Status OverBound(const std::string& at) const {
    return Error(at, StrCat(": merging the keywords beside its \"allOf\", \"anyOf\", \"oneOf\" "
                            "or \"$ref\" into the branches copies more than ",
                            kMaxMergedNodes, " schema nodes, over the bound"));
  }

  // Not exact: strict refuses; otherwise `side`'s keyword is dropped and listed.
  absl::Status Inexact(const std::string& at, const Json& side, const std::string& key,
                       std::string_view why) {
    if (strict_) {
      return Error(at, StrCat(": the keywords of its \"allOf\" / \"anyOf\" / \"oneOf\" / "
                              "\"$ref\" and those beside it cannot be merged exactly (",
                              why,
                              "); simplify the schema, or send it with strict=false to have "
                              "one side's \"",
                              key, "\" dropped and listed"));
    }
    const std::string origin =
        side.is_object() && side.contains(kOriginKey) ? side[kOriginKey].get<std::string>() : at;
    dropped_.push_back(Child(StrCat(prefix_, origin), key));
    return absl::OkStatus();
  }

  static bool HasAny(const Json& j, std::initializer_list<const char*> keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return j.contains(k); });
  }

  // The conjunction of two normalized nodes.
  absl::StatusOr<Json> Merge(Json a, Json b, const std::string& at) {
    if (IsFalseSchema(a) || IsFalseSchema(b)) return Json(false);
    // Either side constrains nothing: the other (an object rather than `true` where both are).
    if (IsTrueSchema(a)) return b.is_boolean() && a.is_object() ? a : b;
    if (IsTrueSchema(b)) return a;
    TP_ASSIGN_OR_RETURN(a, Content(std::move(a), at));
    TP_ASSIGN_OR_RETURN(b, Content(std::move(b), at));
    if (IsFalseSchema(a) || IsFalseSchema(b)) return Json(false);
    if (IsTrueSchema(a)) return b;
    if (IsTrueSchema(b)) return a;
    const bool a_alt = HasAny(a, {"anyOf", "oneOf"}), b_alt = HasAny(b, {"anyOf", "oneOf"});
    // The plain side's keywords come first in each branch (a base object's properties are
    // generated before a refinement's).
    if (b_alt && !a_alt) return Distribute(std::move(b), std::move(a), at, /*other_first=*/true);
    if (a_alt) return Distribute(std::move(a), std::move(b), at, /*other_first=*/false);
    return MergePlain(std::move(a), std::move(b), at);
  }

  // {anyOf|oneOf: [A...]} and b: each branch merged with b (and with each of b's branches where
  // b has them too: anyOf with anyOf, oneOf with oneOf; a oneOf pairs exactly once iff each
  // side's exactly-one holds). Branches that cannot hold are left out.
  absl::StatusOr<Json> Distribute(Json a, Json b, const std::string& at, bool other_first) {
    const std::string combinator = a.contains("anyOf") ? "anyOf" : "oneOf";
    std::vector<Json> others;
    if (HasAny(b, {"anyOf", "oneOf"})) {
      if (!b.contains(combinator)) {
        TP_RETURN_IF_ERROR(Inexact(at, b, b.contains("anyOf") ? "anyOf" : "oneOf",
                                   "an \"anyOf\" and a \"oneOf\" on the two sides"));
        b.erase(b.contains("anyOf") ? "anyOf" : "oneOf");
        others.push_back(std::move(b));
      } else {
        for (Json& branch : b[combinator]) others.push_back(std::move(branch));
      }
    } else {
      others.push_back(std::move(b));
    }
    if (a[combinator].size() * others.size() > static_cast<size_t>(kMaxMergedBranches)) {
      return Error(at, StrCat(": merging the keywords beside its \"", combinator,
                              "\" into the branches makes more than ", kMaxMergedBranches,
                              " branches, over the bound"));
    }
    Json branches = Json::array();
    for (const Json& x : a[combinator]) {
      for (const Json& y : others) {
        copied_ += CountNodes(y);
        if (copied_ > kMaxMergedNodes) return OverBound(at);
        TP_ASSIGN_OR_RETURN(Json merged, other_first ? Merge(y, x, at) : Merge(x, y, at));
        if (!IsFalseSchema(merged)) branches.push_back(std::move(merged));
      }
    }
    if (branches.empty()) return Json(false);
    Json out = Json::object();
    out[kOriginKey] = a[kOriginKey];
    out[kMergedKey] = true;
    out[combinator] = std::move(branches);
    return OneOfAsAnyOfWhereDisjoint(std::move(out));
  }

  static Json IntersectTypes(const Json& a, const Json& b) {
    const std::vector<std::string> ta = TypeNames(a), tb = TypeNames(b);
    Json out = Json::array();
    auto has = [](const std::vector<std::string>& v, const std::string& t) {
      return std::find(v.begin(), v.end(), t) != v.end();
    };
    for (const std::string& t : ta) {
      if (has(tb, t)) {
        out.push_back(t);
      } else if (t == "integer" && has(tb, "number")) {
        out.push_back("integer");
      } else if (t == "number" && has(tb, "integer")) {
        out.push_back("integer");
      }
    }
    Json unique = Json::array();
    for (const Json& t : out) {
      if (std::find(unique.begin(), unique.end(), t) == unique.end()) unique.push_back(t);
    }
    if (unique.size() == 1) return unique[0];
    return unique;
  }

  // Two nodes without alternatives, keyword by keyword.
  absl::StatusOr<Json> MergePlain(Json a, Json b, const std::string& at) {
    for (const char* k : {"unevaluatedProperties", "unevaluatedItems"}) {
      if (a.contains(k) || b.contains(k)) {
        Json& side = b.contains(k) ? b : a;
        TP_RETURN_IF_ERROR(Inexact(at, side, k,
                                   StrCat("\"", k,
                                          "\" depends on every keyword "
                                          "beside it")));
        side.erase(k);
      }
    }
    // Groups whose keywords read one another: merged together, or one side's only.
    const bool a_obj = HasAny(a, {"properties", "patternProperties", "additionalProperties"});
    const bool b_obj = HasAny(b, {"properties", "patternProperties", "additionalProperties"});
    if (a_obj && b_obj) TP_RETURN_IF_ERROR(MergeObjectGroup(a, b, at));
    const bool a_arr = HasAny(a, {"items", "prefixItems"});
    const bool b_arr = HasAny(b, {"items", "prefixItems"});
    if (a_arr && b_arr) TP_RETURN_IF_ERROR(MergeArrayGroup(a, b, at));
    for (std::initializer_list<const char*> group :
         {std::initializer_list<const char*>{"if", "then", "else"},
          std::initializer_list<const char*>{"contains", "minContains", "maxContains"}}) {
      if (HasAny(a, group) && HasAny(b, group)) {
        bool equal = true;
        for (const char* k : group) equal = equal && (a.value(k, Json()) == b.value(k, Json()));
        if (!equal) {
          TP_RETURN_IF_ERROR(Inexact(at, b, *group.begin(), "both sides have it"));
        }
        for (const char* k : group) b.erase(k);
      }
    }
    for (auto& [key, vb] : b.items()) {
      if (key == kOriginKey || key == kMergedKey) continue;
      if (!a.contains(key)) {
        a[key] = vb;
        continue;
      }
      Json& va = a[key];
      if (va == vb || IsSchemaMetadataKeyword(key)) continue;
      if (key == "type") {
        va = IntersectTypes(va, vb);
        if (va.is_array() && va.empty()) return Json(false);
      } else if (key == "const") {
        return Json(false);  // two different values
      } else if (key == "enum" && va.is_array() && vb.is_array()) {
        Json both = Json::array();
        for (const Json& v : va) {
          if (std::find(vb.begin(), vb.end(), v) != vb.end()) both.push_back(v);
        }
        if (both.empty()) return Json(false);
        va = std::move(both);
      } else if ((key == "minimum" || key == "exclusiveMinimum" || key == "minLength" ||
                  key == "minItems" || key == "minProperties") &&
                 va.is_number() && vb.is_number()) {
        if (vb.get<double>() > va.get<double>()) va = vb;
      } else if ((key == "maximum" || key == "exclusiveMaximum" || key == "maxLength" ||
                  key == "maxItems" || key == "maxProperties") &&
                 va.is_number() && vb.is_number()) {
        if (vb.get<double>() < va.get<double>()) va = vb;
      } else if (key == "multipleOf" && va.is_number_integer() && vb.is_number_integer() &&
                 va.get<int64_t>() > 0 && vb.get<int64_t>() > 0) {
        va = std::lcm(va.get<int64_t>(), vb.get<int64_t>());
      } else if (key == "required" && va.is_array() && vb.is_array()) {
        for (const Json& name : vb) {
          if (std::find(va.begin(), va.end(), name) == va.end()) va.push_back(name);
        }
      } else if (key == "uniqueItems" && va.is_boolean() && vb.is_boolean()) {
        va = va.get<bool>() || vb.get<bool>();
      } else if ((key == "propertyNames" || key == "items") && !va.is_array()) {
        TP_ASSIGN_OR_RETURN(va, Merge(va, vb, at));
      } else if (key == "not") {
        va = Json{{"anyOf", Json::array({va, vb})}};
      } else if (key == "dependentRequired" && va.is_object() && vb.is_object()) {
        for (auto& [name, list] : vb.items()) {
          if (!va.contains(name) || !va[name].is_array() || !list.is_array()) {
            va[name] = list;
            continue;
          }
          for (const Json& n : list) {
            if (std::find(va[name].begin(), va[name].end(), n) == va[name].end()) {
              va[name].push_back(n);
            }
          }
        }
      } else {
        TP_RETURN_IF_ERROR(Inexact(at, b, key, StrCat("two different \"", key, "\"")));
      }
    }
    // A required name the merged object cannot hold: nothing satisfies both sides.
    if (a.contains("required") && a["required"].is_array()) {
      for (const Json& name : a["required"]) {
        if (name.is_string() && Forbids(a, name.get<std::string>())) return Json(false);
      }
    }
    // const beside enum: the const, if the enum allows it.
    if (a.contains("const") && a.contains("enum") && a["enum"].is_array()) {
      const Json& values = a["enum"];
      if (std::find(values.begin(), values.end(), a["const"]) == values.end()) return Json(false);
      a.erase("enum");
    }
    a[kMergedKey] = true;
    return FilterValues(std::move(a));
  }

  // properties / patternProperties / additionalProperties of both sides: a name only one side
  // lists is still held to the other side's additionalProperties.
  absl::Status MergeObjectGroup(Json& a, Json& b, const std::string& at) {
    if (a.contains("patternProperties") || b.contains("patternProperties")) {
      TP_RETURN_IF_ERROR(
          Inexact(at, b, b.contains("patternProperties") ? "patternProperties" : "properties",
                  "which names the other side's properties match is a regex "
                  "question"));
      for (const char* k : {"properties", "patternProperties", "additionalProperties"}) {
        b.erase(k);
      }
      return absl::OkStatus();
    }
    const Json pa = a.value("properties", Json::object());
    const Json pb = b.value("properties", Json::object());
    if (!pa.is_object() || !pb.is_object()) {
      return Error(at, ": \"properties\" must be an object of schemas");
    }
    const Json xa = a.value("additionalProperties", Json(true));
    const Json xb = b.value("additionalProperties", Json(true));
    Json props = Json::object();
    for (const auto& [name, sa] : pa.items()) {
      if (pb.contains(name)) {
        TP_ASSIGN_OR_RETURN(props[name], Merge(sa, pb[name], at));
      } else {
        TP_ASSIGN_OR_RETURN(props[name], Merge(sa, xb, at));
      }
    }
    for (const auto& [name, sb] : pb.items()) {
      if (pa.contains(name)) continue;
      TP_ASSIGN_OR_RETURN(props[name], Merge(sb, xa, at));
    }
    TP_ASSIGN_OR_RETURN(Json extra, Merge(xa, xb, at));
    // A name held to `false` cannot appear; where other names cannot either, it is simply left
    // out, which XGrammar generates as such.
    std::vector<std::string> forbidden;
    for (const auto& [name, s] : props.items()) {
      if (IsFalseSchema(s)) forbidden.push_back(name);
    }
    for (const std::string& name : forbidden) {
      if (!IsFalseSchema(extra)) break;
      props.erase(name);
    }
    // An empty "properties" either side wrote stays (see schema_policy.cc's Adapt).
    const bool wrote_properties = a.contains("properties") || b.contains("properties");
    a.erase("properties");
    a.erase("additionalProperties");
    b.erase("properties");
    b.erase("additionalProperties");
    if (!props.empty() || wrote_properties) a["properties"] = std::move(props);
    if (!IsTrueSchema(extra)) a["additionalProperties"] = std::move(extra);
    return absl::OkStatus();
  }

  // items / prefixItems of both sides.
  absl::Status MergeArrayGroup(Json& a, Json& b, const std::string& at) {
    const Json ta = a.value("prefixItems", Json::array());
    const Json tb = b.value("prefixItems", Json::array());
    if (!ta.is_array() || !tb.is_array() || ta.size() != tb.size()) {
      TP_RETURN_IF_ERROR(Inexact(at, b, "prefixItems", "tuples of different lengths"));
      b.erase("prefixItems");
      b.erase("items");
      return absl::OkStatus();
    }
    Json tuple = Json::array();
    for (size_t i = 0; i < ta.size(); ++i) {
      TP_ASSIGN_OR_RETURN(Json item, Merge(ta[i], tb[i], at));
      tuple.push_back(std::move(item));
    }
    TP_ASSIGN_OR_RETURN(Json rest,
                        Merge(a.value("items", Json(true)), b.value("items", Json(true)), at));
    for (Json* side : {&a, &b}) {
      side->erase("prefixItems");
      side->erase("items");
    }
    if (!tuple.empty()) a["prefixItems"] = std::move(tuple);
    if (!IsTrueSchema(rest)) a["items"] = std::move(rest);
    return absl::OkStatus();
  }

  // The instance types a node admits, with "number" meaning the numbers that are not whole
  // (so "integer" and "number" do not overlap); all seven where it does not say.
  static std::set<std::string> AdmittedTypes(const Json& node) {
    static const std::set<std::string> kAll = {"string", "integer", "number", "boolean",
                                               "null",   "array",   "object"};
    std::set<std::string> out;
    auto add_value = [&](const Json& v) {
      for (const char* t : {"string", "integer", "boolean", "null", "array", "object"}) {
        if (JsonTypeMatches(v, t)) out.insert(t);
      }
      if (v.is_number() && !IsWholeNumber(v)) out.insert("number");
    };
    if (node.contains("const")) {
      add_value(node["const"]);
      return out;
    }
    if (node.contains("enum") && node["enum"].is_array()) {
      for (const Json& v : node["enum"]) add_value(v);
      return out;
    }
    if (!node.contains("type")) return kAll;
    for (const std::string& t : TypeNames(node["type"])) {
      out.insert(t);
      if (t == "number") out.insert("integer");
    }
    return out;
  }

  static bool Requires(const Json& node, const std::string& name) {
    if (!node.contains("required") || !node["required"].is_array()) return false;
    const Json& r = node["required"];
    return std::find(r.begin(), r.end(), name) != r.end();
  }

  // `node` admits no object with the property `name`.
  static bool Forbids(const Json& node, const std::string& name) {
    if (node.contains("properties") && node["properties"].is_object() &&
        node["properties"].contains(name)) {
      return IsFalseSchema(node["properties"][name]);
    }
    return !node.contains("patternProperties") && node.contains("additionalProperties") &&
           IsFalseSchema(node["additionalProperties"]);
  }

  // No instance satisfies both `a` and `b` (a proof, or false where none is found): their
  // types, their values, a required property whose schemas are disjoint or that one side
  // forbids, or numeric ranges apart.
  bool ProvablyDisjoint(const Json& a_in, const Json& b_in, int depth) {
    if (depth > 8) return false;
    if (IsFalseSchema(a_in) || IsFalseSchema(b_in)) return true;
    if (!a_in.is_object() || !b_in.is_object()) return false;
    const Json* a = &a_in;
    const Json* b = &b_in;
    Json a_target, b_target;
    for (auto [side, target] : {std::pair{&a, &a_target}, std::pair{&b, &b_target}}) {
      if (!(*side)->contains("$ref")) continue;
      const std::optional<size_t> entry = TableIndex((**side)["$ref"]);
      if (!entry.has_value()) return false;  // "#": the whole document
      const size_t index = *entry;
      if (targets_[index].state == Target::kRunning) return false;
      absl::StatusOr<Json> content = Normalized(index);
      if (!content.ok()) return false;
      *target = *std::move(content);
      *side = target;
      if (IsFalseSchema(**side)) return true;
      // A reference to `true` or to another reference: no proof sought.
      if (!(*side)->is_object() || (*side)->contains("$ref")) return false;
    }
    for (const char* combinator : {"anyOf", "oneOf"}) {
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        if (!x->contains(combinator) || !(*x)[combinator].is_array()) continue;
        for (const Json& branch : (*x)[combinator]) {
          if (!ProvablyDisjoint(branch, *y, depth + 1)) return false;
        }
        return true;
      }
    }
    const std::set<std::string> ta = AdmittedTypes(*a), tb = AdmittedTypes(*b);
    std::vector<std::string> common;
    std::set_intersection(ta.begin(), ta.end(), tb.begin(), tb.end(), std::back_inserter(common));
    if (common.empty()) return true;
    const bool a_finite = a->contains("const") || a->contains("enum");
    const bool b_finite = b->contains("const") || b->contains("enum");
    if (a_finite && b_finite) {
      const Json va = a->contains("const") ? Json::array({(*a)["const"]}) : (*a)["enum"];
      const Json vb = b->contains("const") ? Json::array({(*b)["const"]}) : (*b)["enum"];
      for (const Json& v : va) {
        if (std::find(vb.begin(), vb.end(), v) != vb.end()) return false;
      }
      return true;
    }
    if (common == std::vector<std::string>{"object"}) {
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        if (!x->contains("required") || !(*x)["required"].is_array()) continue;
        for (const Json& name_json : (*x)["required"]) {
          if (!name_json.is_string()) continue;
          const std::string name = name_json.get<std::string>();
          if (Forbids(*y, name)) return true;
          if (!Requires(*y, name)) continue;
          const Json px =
              x->contains("properties") ? x->value("properties", Json::object()) : Json::object();
          const Json py =
              y->contains("properties") ? y->value("properties", Json::object()) : Json::object();
          if (px.is_object() && py.is_object() && px.contains(name) && py.contains(name) &&
              ProvablyDisjoint(px[name], py[name], depth + 1)) {
            return true;
          }
        }
      }
    }
    if (std::all_of(common.begin(), common.end(),
                    [](const std::string& t) { return t == "integer" || t == "number"; })) {
      // [lo, hi] of each side; disjoint when one ends before the other starts.
      auto bounds = [](const Json& n, bool upper) -> std::optional<std::pair<double, bool>> {
        const char* inclusive = upper ? "maximum" : "minimum";
        const char* exclusive = upper ? "exclusiveMaximum" : "exclusiveMinimum";
        if (n.contains(exclusive) && n[exclusive].is_number()) {
          return std::pair{n[exclusive].get<double>(), true};
        }
        if (n.contains(inclusive) && n[inclusive].is_number()) {
          return std::pair{n[inclusive].get<double>(), false};
        }
        return std::nullopt;
      };
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}}) {
        const auto hi = bounds(*x, true), lo = bounds(*y, false);
        if (hi && lo &&
            (hi->first < lo->first || (hi->first == lo->first && (hi->second || lo->second)))) {
          return true;
        }
      }
    }
    return false;
  }

  // A oneOf whose branches are pairwise disjoint holds exactly where its anyOf does; XGrammar
  // enforces an anyOf exactly and a oneOf only where it proves the same itself.
  Json OneOfAsAnyOfWhereDisjoint(Json node) {
    if (!node.is_object() || !node.contains("oneOf") || !node["oneOf"].is_array() ||
        node.contains("anyOf")) {
      return node;
    }
    const Json& branches = node["oneOf"];
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        if (!ProvablyDisjoint(branches[i], branches[j], 0)) return node;
      }
    }
    Json out = Json::object();
    for (auto& [key, value] : node.items()) out[key == "oneOf" ? "anyOf" : key] = std::move(value);
    return out;
  }

  // The positive schema equal to {"not": negated}, where one exists: `not` of what admits
  // everything is `false` and of `false` is `true`; "not required [a]" is a property `a` that
  // cannot hold a value; "not type T" is every other type (except where T splits the numbers).
  static std::optional<Json> Negated(const Json& negated) {
    if (IsTrueSchema(negated)) return Json(false);
    if (IsFalseSchema(negated)) return Json(true);
    if (!negated.is_object()) return std::nullopt;
    std::vector<std::string> keys;
    for (const auto& item : negated.items()) {
      if (item.key() != kOriginKey && item.key() != kMergedKey &&
          !IsSchemaMetadataKeyword(item.key())) {
        keys.push_back(item.key());
      }
    }
    if (keys == std::vector<std::string>{"required"} && negated["required"].is_array() &&
        negated["required"].size() == 1 && negated["required"][0].is_string()) {
      return Json{{"properties", {{negated["required"][0].get<std::string>(), false}}}};
    }
    if (keys == std::vector<std::string>{"type"}) {
      std::set<std::string> excluded;
      if (negated["type"].is_string()) excluded.insert(negated["type"].get<std::string>());
      if (negated["type"].is_array()) {
        for (const Json& t : negated["type"]) {
          if (!t.is_string()) return std::nullopt;
          excluded.insert(t.get<std::string>());
        }
      }
      if (excluded.count("integer") > 0 && excluded.count("number") == 0) return std::nullopt;
      Json rest = Json::array();
      for (const char* t : {"string", "number", "boolean", "null", "array", "object"}) {
        if (excluded.count(t) == 0) rest.push_back(t);
      }
      if (rest.empty()) return Json(false);
      return Json{{"type", rest.size() == 1 ? rest[0] : rest}};
    }
    return std::nullopt;
  }

  void Annotation(const std::string& pointer) { annotations_.push_back(StrCat(prefix_, pointer)); }

  // The normalized form of the schema `in` at input pointer `pointer`.
  absl::StatusOr<Json> Node(const Json& in, const std::string& pointer, std::string base,
                            int depth) {
    if (in.is_boolean()) return in;
    if (!in.is_object()) {
      return Error(pointer,
                   StrCat(" is ", in.type_name(), ", not a schema (an object or a boolean)"));
    }
    if (depth > kMaxDepth) {
      return Error(pointer, StrCat(": schemas nested deeper than ", kMaxDepth));
    }
    if (const Json* id = IdOf(in)) {
      if (id->get<std::string>().rfind('#', 0) != 0) {
        if (std::optional<std::string> uri = Resolve(base, id->get<std::string>())) {
          base = SplitFragment(*uri).first;
        }
      }
    }
    const bool has_ref = in.contains("$ref");
    const bool ref_alone = has_ref && draft_ != Draft::k2019 && draft_ != Draft::k2020;
    Json own = Json::object();  // the assertions, in the input's order
    Json out = Json::object();
    out[kOriginKey] = pointer;
    for (const auto& [key, value] : in.items()) {
      const std::string at = Child(pointer, key);
      if (IsSchemaMetadataKeyword(key)) {
        out[key] = value;
      } else if (IsStructural(key, draft_)) {
        continue;  // definitions are reached through references only
      } else if (ref_alone && key != "$ref") {
        Annotation(at);  // up to draft-07 a $ref's siblings are ignored
      } else if (key == "format" &&
                 !(value.is_string() &&
                   (format_assertion_ || IsEnforcedStringFormat(value.get<std::string>())))) {
        Annotation(at);
      } else if (!IsAssertion(key, draft_)) {
        Annotation(at);
      } else {
        own[key] = value;
      }
    }
    RewriteOldSpellings(own);
    // The children, normalized.
    for (auto& [key, value] : own.items()) {
      const std::string at = Child(pointer, key);
      Holds holds = ChildKind(key);
      if (key == "items") holds = Holds::kSchema;
      if (key == "dependencies" && value.is_object()) holds = Holds::kMap;
      if (holds == Holds::kSchema) {
        TP_ASSIGN_OR_RETURN(value, Node(value, at, base, depth + 1));
      } else if (holds == Holds::kList) {
        if (!value.is_array() || value.empty()) {
          return Error(at, " must be a non-empty array of schemas");
        }
        for (size_t i = 0; i < value.size(); ++i) {
          TP_ASSIGN_OR_RETURN(value[i],
                              Node(value[i], Child(at, std::to_string(i)), base, depth + 1));
        }
      } else if (holds == Holds::kMap) {
        if (!value.is_object()) return Error(at, " must be an object of schemas");
        for (auto& [name, sub] : value.items()) {
          if (key == "dependencies" && sub.is_array()) continue;  // property names
          TP_ASSIGN_OR_RETURN(sub, Node(sub, Child(at, name), base, depth + 1));
        }
      }
    }
    if (has_ref && own.contains("$ref")) {
      TP_ASSIGN_OR_RETURN(std::string target, RefTarget(own["$ref"], Child(pointer, "$ref"), base));
      own["$ref"] = RefName(target);
    }
    // "not" in the shapes that have a positive spelling (an allOf branch then carries it).
    if (own.contains("not")) {
      std::optional<Json> positive = Negated(own["not"]);
      if (positive.has_value()) {
        own.erase("not");
        if (IsFalseSchema(*positive)) return Json(false);
        if (!IsTrueSchema(*positive)) {
          (*positive)[kOriginKey] = Child(pointer, "not");
          if (!own.contains("allOf")) own["allOf"] = Json::array();
          own["allOf"].push_back(std::move(*positive));
        }
      }
    }
    // One node for XGrammar: allOf and every sibling of a combinator or $ref merged.
    const int parts = (own.contains("$ref") ? 1 : 0) + (own.contains("allOf") ? 1 : 0) +
                      (own.contains("anyOf") ? 1 : 0) + (own.contains("oneOf") ? 1 : 0);
    bool plain_rest = false;
    for (const auto& [key, value] : own.items()) {
      plain_rest =
          plain_rest || (key != "$ref" && key != "allOf" && key != "anyOf" && key != "oneOf");
    }
    // Branches that admit nothing are left out (for oneOf too: they never count).
    for (const char* combinator : {"anyOf", "oneOf"}) {
      if (!own.contains(combinator)) continue;
      Json kept = Json::array();
      for (Json& branch : own[combinator]) {
        if (!IsFalseSchema(branch)) kept.push_back(std::move(branch));
      }
      if (kept.empty()) return Json(false);
      own[combinator] = std::move(kept);
    }
    if (!own.contains("allOf") && parts + (plain_rest ? 1 : 0) <= 1) {
      for (auto& [key, value] : own.items()) out[key] = std::move(value);
      return OneOfAsAnyOfWhereDisjoint(FilterValues(std::move(out)));
    }
    Json acc = out;  // metadata and origin
    std::vector<Json> conjuncts;
    Json rest = Json::object();
    rest[kOriginKey] = pointer;
    for (auto& [key, value] : own.items()) {
      if (key == "$ref") {
        conjuncts.push_back(Json{{"$ref", value}, {kOriginKey, pointer}});
      } else if (key == "allOf") {
        for (Json& branch : value) conjuncts.push_back(std::move(branch));
      } else if (key == "anyOf" || key == "oneOf") {
        conjuncts.push_back(Json{{key, std::move(value)}, {kOriginKey, pointer}});
      } else {
        rest[key] = std::move(value);
      }
    }
    TP_ASSIGN_OR_RETURN(acc, Merge(std::move(acc), std::move(rest), pointer));
    for (Json& c : conjuncts) {
      TP_ASSIGN_OR_RETURN(acc, Merge(std::move(acc), std::move(c), pointer));
    }
    if (acc.is_object()) {
      acc[kOriginKey] = pointer;
      acc[kMergedKey] = true;
    }
    return acc;
  }

  // draft-04's boolean exclusive bounds, and the array form of "items" (any draft).
  static void RewriteOldSpellings(Json& own) {
    for (auto [exclusive, bound] :
         {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
      if (!own.contains(exclusive) || !own[exclusive].is_boolean()) continue;
      if (own[exclusive].get<bool>() && own.contains(bound)) {
        own[exclusive] = own[bound];
        own.erase(bound);
      } else {
        own.erase(exclusive);
      }
    }
    if (own.contains("items") && own["items"].is_array()) {
      Json tuple = std::move(own["items"]);
      own.erase("items");
      if (own.contains("additionalItems")) {
        own["items"] = std::move(own["additionalItems"]);
        own.erase("additionalItems");
      }
      if (!own.contains("prefixItems") && !tuple.empty()) own["prefixItems"] = std::move(tuple);
    } else if (own.contains("additionalItems")) {
      own.erase("additionalItems");  // without a tuple it applies to nothing
    }
  }

  const Json& root_;
  const Draft draft_;
  const bool format_assertion_;
  const bool strict_;
  const std::string field_;
  const std::string prefix_;
  std::map<std::string, std::string> documents_;  // absolute URI (no fragment) -> pointer
  std::map<std::string, std::string> anchors_;    // absolute URI#name -> pointer
  std::vector<Target> targets_;
  std::map<std::string, size_t> target_index_;
  int64_t copied_ = 0;
  std::vector<std::string> annotations_;
  std::vector<std::string> dropped_;
};

}  // namespace

absl::StatusOr<NormalizedSchema> NormalizeSchema(const Json& root, bool strict,
                                                 std::string_view field,
                                                 std::string_view pointer_prefix) {
  Normalizer normalizer(root, strict, field, pointer_prefix);
  return normalizer.Run();
}

}  // namespace tpserve
