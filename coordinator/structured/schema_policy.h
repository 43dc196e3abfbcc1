// Which JSON Schema keywords the grammar engine enforces, checked before compiling. XGrammar
// dispatches each schema node on one keyword ($ref, const, enum, anyOf, oneOf, allOf, type, ...)
// and silently ignores what it does not support (uniqueItems, not, if/then/else, a sibling of
// $ref, minLength beside a pattern, ...). A constraint we accept must be one we enforce, so
// every node is walked here with XGrammar's dispatch order and each keyword that the node's
// dispatch does not enforce is either an error naming its JSON pointer (strict) or removed from
// the schema and reported (not strict). Annotations (title, description, examples, default,
// $schema, $comment, ...) are not constraints and always pass.
//
//   TP_ASSIGN_OR_RETURN(SchemaPolicyResult r, CheckSchema(text, /*strict=*/true, "json_schema"));
//   compiler.CompileJSONSchema(r.schema, ...);
#ifndef TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_POLICY_H_
#define TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_POLICY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tpserve {

struct SchemaPolicyResult {
  std::string schema;                       // what to compile: the input less dropped keywords
  std::vector<std::string> dropped;         // JSON pointers of dropped keywords (not strict)
  std::vector<std::string> one_of_pointers; // every oneOf node (XGrammar may not prove disjoint)
};

// INVALID_ARGUMENT naming `field` for text that is not JSON, a node that is not a schema, an
// unresolvable or non-local $ref, or (strict) a keyword that would not be enforced; each names
// the JSON pointer of the offending node. `pointer_prefix` opens every pointer (in errors,
// `dropped` and `one_of_pointers`): where the schema sits inside a larger document, e.g.
// "/format/content/json_schema" in a structural tag; $refs still resolve against `text`.
absl::StatusOr<SchemaPolicyResult> CheckSchema(std::string_view text, bool strict,
                                               std::string_view field,
                                               std::string_view pointer_prefix = "");

// CheckSchema on a schema already parsed (a node of a larger document: a structural tag's
// json_schema), its dropped keywords removed in place; the result's `schema` stays empty.
absl::StatusOr<SchemaPolicyResult> CheckSchemaInPlace(nlohmann::ordered_json& schema, bool strict,
                                                      std::string_view field,
                                                      std::string_view pointer_prefix);

// `text` as JSON; INVALID_ARGUMENT naming `field` (and the byte of a syntax error) otherwise.
absl::StatusOr<nlohmann::ordered_json> ParseJsonNamingField(std::string_view text,
                                                            std::string_view field);

// The "format" values enforced for strings.
bool IsEnforcedStringFormat(std::string_view format);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_POLICY_H_
