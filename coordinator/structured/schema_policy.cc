#include "coordinator/structured/schema_policy.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/str_cat.h"
#include "base/field_error.h"
#include "base/status_macros.h"
#include "coordinator/structured/schema_normalize.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

// Ordered: a schema's property order is the order its object is generated in.
using Json = nlohmann::ordered_json;

// An assertion every instance satisfies.
bool HoldsTrivially(const std::string& key, const nlohmann::ordered_json& value) {
  if (key == "uniqueItems") return value == false;
  if (key == "minLength" || key == "minItems" || key == "minProperties") return value == 0;
  if (key == "required" || key == "dependentRequired" || key == "dependencies") {
    return value.empty();
  }
  return false;
}

std::string Child(const std::string& pointer, const std::string& token) {
  return JsonPointerChild(pointer, token);
}

std::string Display(const std::string& pointer) { return pointer.empty() ? "/" : pointer; }

// Lengths beside a "pattern", folded into it. XGrammar enforces a pattern and ignores
// minLength/maxLength beside it; most such pairs in real schemas (808 nodes in JSONSchemaBench)
// have patterns that are sequences of one-character atoms (a class, an escape, ".", a literal)
// with counts, some inside groups ("^([a-z0-9-]+):([a-z0-9.-]+)$"). There the lengths become
// counts: with one variable count the rewrite is exact ("^[a-z][a-z0-9-]*$" with maxLength 63
// is "^[a-z][a-z0-9-]{0,62}$"); with several, the room is shared among them, which admits fewer
// strings, all of the right length. Every atom matches one code point. nullopt for any other
// pattern (alternation, nested groups, lookaround) or where no length fits.
namespace pattern_lengths {

constexpr int64_t kUnbounded = -1;

struct Item {
  std::string atom;
  int64_t lo, hi;  // hi: kUnbounded for no bound
};

// One atom at `i` (advanced past it), or nullopt.
std::optional<std::string> Atom(std::string_view p, size_t& i) {
  const size_t start = i;
  const char c = p[i];
  if (c == '[') {
    ++i;
    if (i < p.size() && p[i] == '^') ++i;
    if (i < p.size() && p[i] == ']') ++i;
    while (i < p.size() && p[i] != ']') i += p[i] == '\\' ? 2 : 1;
    if (i >= p.size()) return std::nullopt;
    ++i;
  } else if (c == '\\') {
    if (i + 1 >= p.size()) return std::nullopt;
    const char e = p[i + 1];
    const bool one_char = std::string_view("dDwWsStnr").find(e) != std::string_view::npos ||
                          !std::isalnum(static_cast<unsigned char>(e));
    if (!one_char) return std::nullopt;
    i += 2;
  } else if (std::string_view("()|*+?{}^$]").find(c) != std::string_view::npos) {
    return std::nullopt;
  } else {
    ++i;  // "." or a literal (a UTF-8 lead byte takes its continuation bytes along)
    while (i < p.size() && (static_cast<unsigned char>(p[i]) & 0xC0) == 0x80) ++i;
  }
  return std::string(p.substr(start, i - start));
}

// A count after an atom or group at `i` ({1,1} where there is none); false where it is not one
// we read (lazy, possessive, malformed).
bool Count(std::string_view p, size_t& i, int64_t& lo, int64_t& hi) {
  lo = hi = 1;
  if (i >= p.size()) return true;
  const char q = p[i];
  if (q == '*' || q == '+' || q == '?') {
    lo = q == '+' ? 1 : 0;
    hi = q == '?' ? 1 : kUnbounded;
    ++i;
  } else if (q == '{') {
    const size_t close = p.find('}', i);
    if (close == std::string_view::npos) return false;
    const std::string body(p.substr(i + 1, close - i - 1));
    const size_t comma = body.find(',');
    char* end = nullptr;
    lo = std::strtoll(body.c_str(), &end, 10);
    if (end == body.c_str() || lo < 0) return false;
    if (comma == std::string::npos) {
      if (*end != '\0') return false;
      hi = lo;
    } else if (comma + 1 == body.size()) {
      hi = kUnbounded;
    } else {
      const char* hi_text = body.c_str() + comma + 1;
      hi = std::strtoll(hi_text, &end, 10);
      if (end == hi_text || *end != '\0' || hi < lo) return false;
    }
    i = close + 1;
  }
  return i >= p.size() || (p[i] != '?' && p[i] != '+');
}

// A sequence of atoms and groups of atoms, until `stop` (')' inside a group).
bool Sequence(std::string_view p, size_t& i, bool in_group, std::vector<Item>& items) {
  while (i < p.size() && !(in_group && p[i] == ')')) {
    if (p[i] == '(') {
      i += p.compare(i, 3, "(?:") == 0 ? 3 : 1;
      std::vector<Item> inner;
      if (!Sequence(p, i, /*in_group=*/true, inner) || i >= p.size()) return false;
      ++i;  // ')'
      int64_t lo, hi;
      if (!Count(p, i, lo, hi)) return false;
      if (lo == 1 && hi == 1) {
        for (Item& item : inner) items.push_back(std::move(item));  // a group: its items
      } else if (lo == 0 && hi == 1 && inner.size() == 1 && inner[0].lo <= 1) {
        items.push_back({inner[0].atom, 0, inner[0].hi});  // (x{0|1,n})? is x{0,n}
      } else {
        return false;
      }
      continue;
    }
    std::optional<std::string> atom = Atom(p, i);
    if (!atom) return false;
    Item item{*std::move(atom), 1, 1};
    if (!Count(p, i, item.lo, item.hi)) return false;
    items.push_back(std::move(item));
  }
  return true;
}

std::optional<std::string> Fold(std::string_view pattern, int64_t min_length,
                                int64_t max_length) {
  if (!pattern.empty() && pattern.front() == '^') pattern.remove_prefix(1);
  if (!pattern.empty() && pattern.back() == '$' &&
      (pattern.size() == 1 || pattern[pattern.size() - 2] != '\\')) {
    pattern.remove_suffix(1);
  }
  std::vector<Item> items;
  size_t i = 0;
  if (!Sequence(pattern, i, /*in_group=*/false, items) || i != pattern.size()) {
    return std::nullopt;
  }
  int64_t base = 0;
  std::vector<Item*> variable;
  for (Item& item : items) {
    base += item.lo;
    if (item.hi != item.lo) variable.push_back(&item);
  }
  auto room = [](const Item* item) {  // how much longer it may be
    return item->hi == kUnbounded ? std::numeric_limits<int64_t>::max() : item->hi - item->lo;
  };
  if (max_length != kUnbounded) {
    if (base > max_length) return std::nullopt;
    // Each variable item gets an equal share of the room (its own bound permitting).
    const int64_t share =
        variable.empty() ? 0 : (max_length - base) / static_cast<int64_t>(variable.size());
    if (variable.size() == 1) {
      variable[0]->hi = variable[0]->lo + std::min(room(variable[0]), max_length - base);
    } else {
      for (Item* item : variable) item->hi = item->lo + std::min(room(item), share);
    }
  }
  int64_t longest = 0;  // after the shares
  for (const Item& item : items) {
    longest = item.hi == kUnbounded || longest == kUnbounded ? kUnbounded : longest + item.hi;
  }
  if (min_length > base) {
    if (longest != kUnbounded && longest < min_length) return std::nullopt;
    // The shortfall raised from the front; every item keeps its own upper bound.
    int64_t missing = min_length - base;
    for (Item* item : variable) {
      const int64_t take = std::min(missing, room(item));
      item->lo += take;
      missing -= take;
    }
    if (missing > 0) return std::nullopt;
  }
  std::string out = "^";
  for (const Item& item : items) {
    out += item.atom;
    if (item.lo == 1 && item.hi == 1) continue;
    if (item.hi == kUnbounded) {
      out += item.lo == 0 ? "*" : item.lo == 1 ? "+" : StrCat("{", item.lo, ",}");
    } else {
      out += item.lo == item.hi ? StrCat("{", item.lo, "}")
                                : StrCat("{", item.lo, ",", item.hi, "}");
    }
  }
  return out + "$";
}

}  // namespace pattern_lengths

class Walker {
 public:
  Walker(bool strict, std::string_view field, std::string_view prefix)
      : strict_(strict), field_(field), prefix_(prefix) {}

  absl::Status Walk(Json& node, std::string pointer) {
    if (node.is_boolean()) return absl::OkStatus();
    if (!node.is_object()) {
      return Error(pointer, StrCat(" is ", node.type_name(),
                                   ", not a schema (an object or a boolean)"));
    }
    // Where the node came from in the request (schema_normalize.h), and whether a merge made it.
    if (node.contains(kOriginKey)) {
      pointer = StrCat(prefix_, node[kOriginKey].get<std::string>());
      node.erase(kOriginKey);
    }
    merged_ = node.contains(kMergedKey);
    node.erase(kMergedKey);
    std::set<std::string> enforced;  // the keys this node's dispatch enforces
    std::vector<std::pair<std::string, std::string>> subschemas;  // key, kind of children
    Adapt(node);
    TP_RETURN_IF_ERROR(Dispatch(node, pointer, enforced, subschemas));

    TP_RETURN_IF_ERROR(CheckRequired(node, pointer, enforced));
    std::vector<std::string> drop;
    for (auto& [key, value] : node.items()) {
      if (IsSchemaMetadataKeyword(key) || enforced.count(key) > 0) continue;
      if (key == "$defs" && pointer == prefix_ + "") {
        subschemas.push_back({key, "map"});  // the table of reference targets
        continue;
      }
      if (HoldsTrivially(key, value) || AppliesToNoneOf(node, key)) {
        drop.push_back(key);  // holds of every instance: nothing is lost
        continue;
      }
      const std::string at = Child(pointer, key);
      if (strict_) {
        return Error(at, StrCat(": keyword \"", key, "\" is not enforced ", Why(node, key),
                                MergeNote(pointer),
                                "; remove it, or send the schema with strict=false to have "
                                "such keywords dropped and listed"));
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

  // For a node a merge made: where its keywords came from.
  std::string MergeNote(const std::string& pointer) const {
    if (!merged_) return "";
    return StrCat(" (in the keywords of ", Display(pointer), " merged with its \"allOf\", "
                  "\"anyOf\", \"oneOf\" or \"$ref\")");
  }

  // `key` applies to one instance type, and the node's "type" does not include it.
  static bool AppliesToNoneOf(const Json& node, const std::string& key) {
    const std::string type = std::string(KeywordInstanceType(key));
    if (type.empty() || !node.contains("type")) return false;
    const std::vector<std::string> types = TypeNames(node["type"]);
    for (const std::string& t : types) {
      if (t == type || (type == "number" && t == "integer")) return false;
    }
    return !types.empty();
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

  // What XGrammar (strict_mode) needs spelled out to generate what the node allows.
  void Adapt(Json& node) const {
    const bool dispatched = node.contains("$ref") || node.contains("const") ||
                            node.contains("enum") || node.contains("anyOf") ||
                            node.contains("oneOf") || node.contains("allOf");
    if (dispatched) return;
    // A node without "type" whose keywords all constrain one type is generated as that type
    // (XGrammar generates any value there and ignores them); every such value is valid.
    if (!node.contains("type")) {
      std::set<std::string> types;
      for (const auto& [key, value] : node.items()) {
        const std::string t = std::string(KeywordInstanceType(key));
        if (!t.empty()) types.insert(t);
      }
      if (types.size() == 1) node["type"] = *types.begin();
    }
    const std::vector<std::string> types =
        node.contains("type") ? TypeNames(node["type"]) : std::vector<std::string>{};
    const auto has = [&](const char* t) {
      return std::find(types.begin(), types.end(), t) != types.end();
    };
    if (has("object") && (!node.contains("properties") || node["properties"].is_object())) {
      // A patternProperties entry that admits nothing (XGrammar refuses `false` here too): the
      // names it matches may not appear. Without other patterns, in a closed object, it is
      // simply left out; otherwise the object is closed whole, which only narrows.
      if (node.contains("patternProperties") && node["patternProperties"].is_object()) {
        Json& patterns = node["patternProperties"];
        std::vector<std::string> never;
        for (const auto& [pattern, sub] : patterns.items()) {
          if (sub == false) never.push_back(pattern);
        }
        for (const std::string& pattern : never) patterns.erase(pattern);
        if (!never.empty()) {
          const bool open = node.contains("additionalProperties") &&
                            node["additionalProperties"] != false;
          if (!patterns.empty() || open) node["additionalProperties"] = false;
          node.erase("patternProperties");
        }
      }
      // An empty "properties" the schema wrote stays: XGrammar reads an object schema without
      // one differently (a structural tag's schema then admits any property).
      const bool had_properties = node.contains("properties");
      if (!had_properties) node["properties"] = Json::object();
      Json& props = node["properties"];
      const bool patterns = node.contains("patternProperties");
      const bool closed = !patterns && (!node.contains("additionalProperties") ||
                                        node["additionalProperties"] == false);
      // A required name that "properties" does not list: its value is additionalProperties'.
      if (!patterns && node.contains("required") && node["required"].is_array()) {
        for (const Json& name : node["required"]) {
          if (!name.is_string() || props.contains(name.get<std::string>())) continue;
          if (node.contains("additionalProperties") && node["additionalProperties"] != false) {
            props[name.get<std::string>()] = node["additionalProperties"];
          } else if (!node.contains("additionalProperties")) {
            props[name.get<std::string>()] = Json::object();
          }
        }
      }
      // A property that can never hold a value is left out (XGrammar refuses a `false` schema
      // even where the property is optional); where other names may appear, the object is
      // closed, as strict_mode closes one that does not say: XGrammar cannot keep that one
      // name out of the additional ones, and fewer properties are still valid.
      std::vector<std::string> never;
      for (const auto& [name, sub] : props.items()) {
        if (sub == false) never.push_back(name);
      }
      const bool required_never = std::any_of(never.begin(), never.end(), [&](const auto& n) {
        return node.contains("required") && node["required"].is_array() &&
               std::find(node["required"].begin(), node["required"].end(), n) !=
                   node["required"].end();
      });
      if (!never.empty() && !required_never) {
        for (const std::string& name : never) props.erase(name);
        if (!closed) {
          node.erase("patternProperties");
          node["additionalProperties"] = false;
        }
      }
      // strict_mode closes an object that does not say; one that must hold more properties than
      // it lists is opened instead.
      if (!node.contains("additionalProperties") && !node.contains("patternProperties") &&
          node.contains("minProperties") && node["minProperties"].is_number() &&
          node["minProperties"].get<double>() > static_cast<double>(props.size())) {
        node["additionalProperties"] = Json::object();
      }
      if (props.empty() && !had_properties) node.erase("properties");
    }
    // Likewise strict_mode's closed array against minItems.
    if (has("array") && !node.contains("items") && node.contains("minItems") &&
        node["minItems"].is_number()) {
      const size_t tuple = node.contains("prefixItems") && node["prefixItems"].is_array()
                               ? node["prefixItems"].size()
                               : 0;
      if (node["minItems"].get<double>() > static_cast<double>(tuple)) {
        node["items"] = Json::object();
      }
    }
    // XGrammar refuses integer bounds past 2^53 (where doubles stop holding every integer): a
    // bound beyond is brought to 2^53, which only narrows what is generated.
    if (has("integer") && !has("number")) {
      constexpr double kLimit = 9007199254740992.0;  // 2^53
      for (const char* key : {"minimum", "exclusiveMinimum"}) {
        if (node.contains(key) && node[key].is_number() && node[key].get<double>() < -kLimit) {
          node.erase(key);
          node["minimum"] = static_cast<int64_t>(-kLimit);
        }
      }
      for (const char* key : {"maximum", "exclusiveMaximum"}) {
        if (node.contains(key) && node[key].is_number() && node[key].get<double>() > kLimit) {
          node.erase(key);
          node["maximum"] = static_cast<int64_t>(kLimit);
        }
      }
    }
    // A NUL character in a pattern (JSON's \u0000): XGrammar refuses it raw and reads "\x00".
    if (node.contains("pattern") && node["pattern"].is_string() &&
        node["pattern"].get_ref<const std::string&>().find('\0') != std::string::npos) {
      std::string escaped;
      for (char c : node["pattern"].get<std::string>()) {
        if (c == '\0') {
          escaped += "\\x00";
        } else {
          escaped += c;
        }
      }
      node["pattern"] = escaped;
    }
    if (has("string") && node.contains("pattern") && node["pattern"].is_string() &&
        !node.contains("format") && (node.contains("minLength") || node.contains("maxLength"))) {
      const Json min = node.value("minLength", Json(0)), max = node.value("maxLength", Json(-1));
      if (IsWholeNumber(min) && IsWholeNumber(max)) {
        if (std::optional<std::string> folded = pattern_lengths::Fold(
                node["pattern"].get<std::string>(), min.get<int64_t>(), max.get<int64_t>())) {
          node["pattern"] = *folded;
          node.erase("minLength");
          node.erase("maxLength");
        }
      }
    }
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

  // References are rewritten by NormalizeSchema to "#" or "#/$defs/ref<n>".
  absl::Status CheckRef(const Json& node, const std::string& pointer) const {
    const Json& ref = node["$ref"];
    if (ref.is_string() && (ref == "#" || ref.get<std::string>().rfind("#/$defs/ref", 0) == 0)) {
      return absl::OkStatus();
    }
    return absl::InternalError(StrCat("a reference at ", Display(pointer), " was not resolved"));
  }

  // A "type" beside const/enum is enforced when every allowed value already has that type.
  static bool TypeAgrees(const Json& node, const std::vector<Json>& values) {
    if (!node.contains("type")) return false;
    const std::vector<std::string> types = TypeNames(node["type"]);
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
  absl::Status Dispatch(Json& node, const std::string& pointer,
                        std::set<std::string>& enforced,
                        std::vector<std::pair<std::string, std::string>>& subschemas) {
    if (node.contains("$ref")) {
      enforced.insert("$ref");
      return CheckRef(node, pointer);
    }
    // const and enum are generated alone; NormalizeSchema has already taken out the values that
    // break the keywords beside them that it can decide (and those keywords).
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

  const bool strict_;
  const std::string field_;
  const std::string prefix_;
  bool merged_ = false;  // the node being walked was made by a merge
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
  TP_ASSIGN_OR_RETURN(NormalizedSchema normalized,
                      NormalizeSchema(root, strict, field, pointer_prefix));
  root = std::move(normalized.schema);
  Walker walker(strict, field, pointer_prefix);
  TP_RETURN_IF_ERROR(walker.Walk(root, root_pointer));
  SchemaPolicyResult result;
  result.dropped = std::move(normalized.dropped);
  for (std::string& d : walker.dropped_) result.dropped.push_back(std::move(d));
  result.annotations = std::move(normalized.annotations);
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
