// Which JSON Schema keywords the grammar engine enforces, checked before compiling, in two steps:
//
//   1. NormalizeSchema (schema_normalize.h) reads the schema in its draft's vocabulary: what is
//      not an assertion there is an annotation (accepted, not enforced, listed in
//      `annotations`); "$ref" resolves against "$id" to one table of targets; "allOf" and the
//      siblings of a combinator (or of a 2019-09+ "$ref") are merged where that is exact.
//   2. Every node of that equivalent schema is walked with XGrammar's dispatch order. XGrammar
//      dispatches each node on one keyword ($ref, const, enum, anyOf, oneOf, allOf, type, ...)
//      and silently ignores what it does not support (uniqueItems, not, if/then/else, minLength
//      beside a pattern, ...). A constraint we accept must be one we enforce, so each assertion
//      the node's dispatch does not enforce is either an error naming its JSON pointer (strict)
//      or removed from the schema and listed in `dropped` (not strict). An assertion that holds
//      of every instance (minLength 0, a string keyword on an integer) is removed unlisted.
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
  std::string schema;                       // what to compile: the equivalent schema, less
                                            // annotations and dropped keywords
  std::vector<std::string> dropped;         // JSON pointers of dropped assertions (not strict)
  std::vector<std::string> annotations;     // JSON pointers of keywords taken as annotations
  std::vector<std::string> one_of_pointers; // every oneOf node (XGrammar may not prove disjoint)
};

// INVALID_ARGUMENT naming `field` for text that is not JSON, a node that is not a schema, a $ref
// that does not resolve in the document, a merge past its bounds, or (strict) an assertion that
// would not be enforced or a merge that would not be exact; each names the JSON pointer of the
// offending node. `pointer_prefix` opens every pointer (in errors, `dropped`, `annotations` and
// `one_of_pointers`): where the schema sits inside a larger document, e.g.
// "/format/content/json_schema" in a structural tag; $refs resolve within the schema.
absl::StatusOr<SchemaPolicyResult> CheckSchema(std::string_view text, bool strict,
                                               std::string_view field,
                                               std::string_view pointer_prefix = "");

// CheckSchema on a schema already parsed (a node of a larger document: a structural tag's
// json_schema), replaced in place by what is to be compiled; the result's `schema` stays empty.
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
