#include "coordinator/structured/structural_tag_policy.h"

#include <string>
#include <utility>

#include "base/field_error.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "coordinator/structured/schema_normalize.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

// Ordered: a schema's property order is the order its object is generated in.
using Json = nlohmann::ordered_json;

// Deeper than XGrammar's own bound on nested formats (100), so it is the one that refuses a tag
// deep in formats; this bound only keeps the walk's recursion short.
constexpr int kMaxDepth = 256;

// The keys under which XGrammar's parser (structural_tag.cc) reads formats: the top level's
// "format", tag/optional/plus/star/repeat's "content", sequence/or's "elements",
// triggered_tags/tags_with_separator's "tags", dispatch's "rules" ([trigger, format] pairs).
bool HoldsFormats(const std::string& key) {
  return key == "format" || key == "content" || key == "elements" || key == "tags" ||
         key == "rules";
}

// A "json_schema" format (or "qwen_xml_parameter", a json_schema with its own style); without
// "type" XGrammar guesses the format from its keys, so any object with a "json_schema" is taken
// as one: a schema checked that XGrammar would not use costs nothing, one missed would be
// enforced loosely.
bool IsSchemaFormat(const Json& node) {
  if (!node.contains("json_schema")) return false;
  if (!node.contains("type")) return true;
  const Json& type = node["type"];
  return type == "json_schema" || type == "qwen_xml_parameter";
}

std::string Child(const std::string& pointer, const std::string& token) {
  return JsonPointerChild(pointer, token);
}

class TagWalker {
 public:
  TagWalker(bool strict, std::string_view field) : strict_(strict), field_(field) {}

  absl::Status Walk(Json& node, const std::string& pointer, int depth) {
    if (depth > kMaxDepth) {
      return FieldError(field_, StrCat(": at ", pointer, " formats are nested deeper than ",
                                       kMaxDepth, " levels"));
    }
    if (node.is_array()) {
      for (size_t i = 0; i < node.size(); ++i) {
        TP_RETURN_IF_ERROR(Walk(node[i], Child(pointer, std::to_string(i)), depth + 1));
      }
      return absl::OkStatus();
    }
    if (!node.is_object()) return absl::OkStatus();
    if (IsSchemaFormat(node)) TP_RETURN_IF_ERROR(CheckEmbedded(node, pointer));
    for (auto& [key, value] : node.items()) {
      if (HoldsFormats(key)) TP_RETURN_IF_ERROR(Walk(value, Child(pointer, key), depth + 1));
    }
    return absl::OkStatus();
  }

  SchemaPolicyResult result_;

 private:
  // Replaces the format's schema with what the policy keeps of it.
  absl::Status CheckEmbedded(Json& format, const std::string& pointer) {
    Json& schema = format["json_schema"];
    // Not a schema at all (a string, a number): XGrammar refuses the format, in its words.
    if (!schema.is_object() && !schema.is_boolean()) return absl::OkStatus();
    TP_ASSIGN_OR_RETURN(SchemaPolicyResult checked,
                        CheckSchemaInPlace(schema, strict_, field_, Child(pointer, "json_schema")));
    for (std::string& d : checked.dropped) result_.dropped.push_back(std::move(d));
    for (std::string& a : checked.annotations) result_.annotations.push_back(std::move(a));
    for (std::string& p : checked.one_of_pointers) result_.one_of_pointers.push_back(std::move(p));
    return absl::OkStatus();
  }

  const bool strict_;
  const std::string field_;
};

}  // namespace

absl::StatusOr<SchemaPolicyResult> CheckStructuralTagSchemas(std::string_view text, bool strict,
                                                             std::string_view field) {
  TP_ASSIGN_OR_RETURN(Json root, ParseJsonNamingField(text, field));
  TagWalker walker(strict, field);
  TP_RETURN_IF_ERROR(walker.Walk(root, "", 0));
  walker.result_.schema = root.dump();
  return std::move(walker.result_);
}

}  // namespace tpserve
