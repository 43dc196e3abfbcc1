#include "coordinator/structured/schema_policy.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/str_cat.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

// Ordered: a schema's property order is the order its object is generated in.
using Json = nlohmann::ordered_json;

// Keys that carry no constraint.
bool IsAnnotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {
      "title",    "description", "default",  "examples", "deprecated", "readOnly",
      "writeOnly", "$comment",   "$schema",  "$id",      "$anchor",    "$vocabulary",
      "contentMediaType", "contentEncoding"};
  return kAnnotations.count(key) > 0;
}

std::string EscapePointerToken(const std::string& token) {
  std::string out;
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

std::string Child(const std::string& pointer, const std::string& token) {
  return StrCat(pointer, "/", EscapePointerToken(token));
}

std::string Display(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

// A JSON number with no fractional part (1 and 1.0 alike); false for anything else.
bool IsWholeNumber(const Json& value) {
  if (value.is_number_integer()) return true;
  if (!value.is_number_float()) return false;
  const double d = value.get<double>();
  return std::isfinite(d) && d == std::floor(d);
}

bool JsonTypeMatches(const Json& value, const std::string& type) {
  if (type == "string") return value.is_string();
  if (type == "integer") return IsWholeNumber(value);
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  return false;
}

class Walker {
 public:
  Walker(Json* root, bool strict, std::string_view field)
      : root_(root), strict_(strict), field_(field) {}

  absl::Status Walk(Json& node, const std::string& pointer) {
    if (node.is_boolean()) return absl::OkStatus();
    if (!node.is_object()) {
      return Error(pointer, StrCat(" is ", node.type_name(),
                                         ", not a schema (an object or a boolean)"));
    }
    std::set<std::string> enforced;  // the keys this node's dispatch enforces
    std::vector<std::pair<std::string, std::string>> subschemas;  // key, kind of children
    TP_RETURN_IF_ERROR(Dispatch(node, pointer, enforced, subschemas));

    TP_RETURN_IF_ERROR(CheckRequired(node, pointer, enforced));
    std::vector<std::string> drop;
    for (auto& [key, value] : node.items()) {
      if (IsAnnotation(key) || enforced.count(key) > 0) continue;
      if (key == "$defs" || key == "definitions") {
        subschemas.push_back({key, "map"});
        continue;
      }
      const std::string at = Child(pointer, key);
      if (strict_) {
        return Error(at, StrCat(": keyword \"", key, "\" is not enforced ", Why(node, key),
                                      "; remove it, or send the schema with strict=false to "
                                      "have such keywords dropped and listed"));
      }
      dropped_.push_back(at);
      drop.push_back(key);
    }
    for (const std::string& key : drop) node.erase(key);

    for (const auto& [key, kind] : subschemas) {
      if (!node.contains(key)) continue;
      Json& child = node[key];
      const std::string at = Child(pointer, key);
      if (kind == "schema") {
        TP_RETURN_IF_ERROR(Walk(child, at));
      } else if (kind == "map") {
        if (!child.is_object()) return Error(at, " must be an object of schemas");
        for (auto& [name, sub] : child.items()) TP_RETURN_IF_ERROR(Walk(sub, Child(at, name)));
      } else {  // "list"
        if (!child.is_array() || child.empty()) {
          return Error(at, " must be a non-empty array of schemas");
        }
        for (size_t i = 0; i < child.size(); ++i) {
          TP_RETURN_IF_ERROR(Walk(child[i], Child(at, std::to_string(i))));
        }
      }
    }
    return absl::OkStatus();
  }

  std::vector<std::string> dropped_;
  std::vector<std::string> one_of_;

 private:
  absl::Status Error(const std::string& pointer, std::string_view rest) const {
    return FieldError(field_, StrCat(": at ", Display(pointer), rest));
  }

  // Why `key` is not enforced on `node`, for the message.
  static std::string Why(const Json& node, const std::string& key) {
    for (const char* d : {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"}) {
      if (node.contains(d) && key != d) {
        return StrCat("beside \"", d, "\" (a node with \"", d, "\" is enforced by it alone)");
      }
    }
    if ((key == "minLength" || key == "maxLength") &&
        (node.contains("pattern") || node.contains("format"))) {
      return "together with \"pattern\" or \"format\"";
    }
    if (key == "format" && node.contains("format") && node["format"].is_string()) {
      return StrCat("for the value \"", node["format"].get<std::string>(),
                          "\" (enforced: date, date-time, time, duration, email, hostname, "
                          "ipv4, ipv6, uuid, uri, uri-reference, uri-template, json-pointer, "
                          "relative-json-pointer)");
    }
    if (key == "multipleOf") return "except as a whole number on an integer";
    if (!node.contains("type")) {
      return "on a node without \"type\" (add the type it constrains)";
    }
    return "by the grammar engine for this type";
  }

  // XGrammar generates only the listed properties (strict mode), so a required name that is
  // not among them could never be produced: it would be silently unenforced.
  absl::Status CheckRequired(Json& node, const std::string& pointer,
                             const std::set<std::string>& enforced) {
    if (enforced.count("required") == 0 || !node.contains("required")) return absl::OkStatus();
    Json& required = node["required"];
    const std::string at = Child(pointer, "required");
    if (!required.is_array()) return Error(at, " must be an array of property names");
    Json kept = Json::array();
    for (size_t i = 0; i < required.size(); ++i) {
      const Json& name = required[i];
      if (!name.is_string()) return Error(Child(at, std::to_string(i)), " must be a string");
      const bool listed = node.contains("properties") && node["properties"].is_object() &&
                          node["properties"].contains(name.get<std::string>());
      if (listed) {
        kept.push_back(name);
        continue;
      }
      const std::string item = Child(at, std::to_string(i));
      if (strict_) {
        return Error(item, StrCat(": required property \"", name.get<std::string>(),
                                  "\" is not in \"properties\", so it would never be "
                                  "generated; list it there"));
      }
      dropped_.push_back(item);
    }
    required = std::move(kept);
    return absl::OkStatus();
  }

  absl::Status CheckRef(const Json& node, const std::string& pointer) {
    const std::string at = Child(pointer, "$ref");
    if (!node["$ref"].is_string()) return Error(at, " must be a string");
    const std::string ref = node["$ref"].get<std::string>();
    if (ref != "#" && ref.rfind("#/", 0) != 0) {
      return Error(at, StrCat(": \"", ref,
                                    "\" is not a local reference (only \"#\" and \"#/...\" "
                                    "into this schema are resolved)"));
    }
    try {
      const Json::json_pointer target(ref.substr(1));
      if (!root_->contains(target)) {
        return Error(at, StrCat(": \"", ref, "\" does not resolve in this schema"));
      }
    } catch (const Json::exception& e) {
      return Error(at, StrCat(": \"", ref, "\" is not a valid JSON pointer (", e.what(), ")"));
    }
    return absl::OkStatus();
  }

  // A "type" beside const/enum is enforced when every allowed value already has that type.
  static bool TypeAgrees(const Json& node, const std::vector<Json>& values) {
    if (!node.contains("type")) return false;
    std::vector<std::string> types;
    if (node["type"].is_string()) {
      types.push_back(node["type"].get<std::string>());
    } else if (node["type"].is_array()) {
      for (const Json& t : node["type"]) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    return std::all_of(values.begin(), values.end(), [&](const Json& v) {
      return std::any_of(types.begin(), types.end(),
                         [&](const std::string& t) { return JsonTypeMatches(v, t); });
    });
  }

  static void AddTypeKeywords(const std::string& type, const Json& node,
                              std::set<std::string>& enforced,
                              std::vector<std::pair<std::string, std::string>>& subschemas) {
    if (type == "integer" || type == "number") {
      enforced.insert({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"});
      if (type == "integer" && node.contains("multipleOf") && IsWholeNumber(node["multipleOf"]) &&
          node["multipleOf"].get<double>() > 0) {
        enforced.insert("multipleOf");
      }
    } else if (type == "string") {
      const bool generative =
          node.contains("pattern") ||
          (node.contains("format") && node["format"].is_string() &&
           IsEnforcedStringFormat(node["format"].get<std::string>()));
      if (!generative) enforced.insert({"minLength", "maxLength"});
      enforced.insert("pattern");
      if (node.contains("format") && node["format"].is_string() &&
          IsEnforcedStringFormat(node["format"].get<std::string>())) {
        enforced.insert("format");
      }
    } else if (type == "array") {
      enforced.insert({"items", "prefixItems", "minItems", "maxItems", "unevaluatedItems"});
      for (const char* k : {"items", "unevaluatedItems"}) {
        if (node.contains(k) && node[k].is_object()) subschemas.push_back({k, "schema"});
      }
      subschemas.push_back({"prefixItems", "list"});
    } else if (type == "object") {
      enforced.insert({"properties", "required", "additionalProperties", "unevaluatedProperties",
                       "patternProperties", "propertyNames", "minProperties", "maxProperties"});
      subschemas.push_back({"properties", "map"});
      subschemas.push_back({"patternProperties", "map"});
      for (const char* k : {"additionalProperties", "unevaluatedProperties", "propertyNames"}) {
        if (node.contains(k) && node[k].is_object()) subschemas.push_back({k, "schema"});
      }
    }
  }

  // XGrammar's order (json_schema_converter.cc, SchemaParser::Parse): the first of these
  // present decides how the node is enforced.
  absl::Status Dispatch(const Json& node, const std::string& pointer,
                        std::set<std::string>& enforced,
                        std::vector<std::pair<std::string, std::string>>& subschemas) {
    if (node.contains("$ref")) {
      enforced.insert("$ref");
      return CheckRef(node, pointer);
    }
    if (node.contains("const")) {
      enforced.insert("const");
      if (TypeAgrees(node, {node["const"]})) enforced.insert("type");
      return absl::OkStatus();
    }
    if (node.contains("enum")) {
      if (!node["enum"].is_array() || node["enum"].empty()) {
        return Error(Child(pointer, "enum"), " must be a non-empty array");
      }
      enforced.insert("enum");
      if (TypeAgrees(node, node["enum"].get<std::vector<Json>>())) enforced.insert("type");
      return absl::OkStatus();
    }
    for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
      if (node.contains(combinator)) {
        enforced.insert(combinator);
        subschemas.push_back({combinator, "list"});
        if (std::string_view(combinator) == "oneOf") one_of_.push_back(Child(pointer, "oneOf"));
        return absl::OkStatus();
      }
    }
    if (node.contains("type")) {
      enforced.insert("type");
      const Json& type = node["type"];
      std::vector<std::string> types;
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const Json& t : type) {
          if (!t.is_string()) return Error(Child(pointer, "type"), " must hold type names");
          types.push_back(t.get<std::string>());
        }
      } else {
        return Error(Child(pointer, "type"), " must be a type name or a non-empty array of them");
      }
      static const std::set<std::string> kTypes = {"string", "integer", "number", "boolean",
                                                   "null",   "array",   "object"};
      for (const std::string& t : types) {
        if (kTypes.count(t) == 0) {
          return Error(Child(pointer, "type"), StrCat(": \"", t, "\" is not a JSON Schema type"));
        }
        AddTypeKeywords(t, node, enforced, subschemas);
      }
      return absl::OkStatus();
    }
    if (node.contains("properties") || node.contains("additionalProperties") ||
        node.contains("unevaluatedProperties")) {
      AddTypeKeywords("object", node, enforced, subschemas);
    } else if (node.contains("items") || node.contains("prefixItems") ||
               node.contains("unevaluatedItems")) {
      AddTypeKeywords("array", node, enforced, subschemas);
    }
    return absl::OkStatus();
  }

  Json* root_;
  const bool strict_;
  const std::string field_;
};

}  // namespace

bool IsEnforcedStringFormat(std::string_view format) {
  static const std::set<std::string, std::less<>> kFormats = {
      "date",  "date-time", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uuid",
      "uri",   "uri-reference", "uri-template", "json-pointer", "relative-json-pointer"};
  return kFormats.count(format) > 0;
}

absl::StatusOr<Json> ParseJsonNamingField(std::string_view text, std::string_view field) {
  Json root = Json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (!root.is_discarded()) return root;
  // Parse again for the position of the error.
  try {
    (void)Json::parse(text);
  } catch (const Json::parse_error& e) {
    return FieldError(field, StrCat(": not valid JSON at byte ", e.byte, " (counting from 1)"));
  }
  return FieldError(field, ": not valid JSON");
}

absl::StatusOr<SchemaPolicyResult> CheckSchemaInPlace(Json& root, bool strict,
                                                      std::string_view field,
                                                      std::string_view pointer_prefix) {
  const std::string root_pointer(pointer_prefix);
  if (!root.is_object() && !root.is_boolean()) {
    return FieldError(field, StrCat(": at ", Display(root_pointer), " is ", root.type_name(),
                                    ", not a schema (an object or a boolean)"));
  }
  Walker walker(&root, strict, field);
  TP_RETURN_IF_ERROR(walker.Walk(root, root_pointer));
  SchemaPolicyResult result;
  result.dropped = std::move(walker.dropped_);
  result.one_of_pointers = std::move(walker.one_of_);
  return result;
}

absl::StatusOr<SchemaPolicyResult> CheckSchema(std::string_view text, bool strict,
                                               std::string_view field,
                                               std::string_view pointer_prefix) {
  TP_ASSIGN_OR_RETURN(Json root, ParseJsonNamingField(text, field));
  TP_ASSIGN_OR_RETURN(SchemaPolicyResult result,
                      CheckSchemaInPlace(root, strict, field, pointer_prefix));
  result.schema = root.dump();
  return result;
}

}  // namespace tpserve
