// The first half of the schema policy (schema_policy.h): a JSON Schema rewritten into an
// equivalent one that XGrammar's per-node dispatch can take, before the second half checks what
// that dispatch enforces.
//
//   - Keywords are read in the vocabulary of the draft the schema declares ("$schema": draft-04,
//     -06, -07, 2019-09, 2020-12; 2020-12 when it declares none). What is not an assertion there
//     is an annotation: the spec's own (title, description, ...) pass unlisted; any other
//     (`example`, `x-foo`, draft-04's `const`, a `format` outside the enforced list unless the
//     schema declares the format-assertion vocabulary, the siblings of "$ref" up to draft-07) is
//     removed and listed in `annotations`.
//   - "$ref" resolves against the base URI that "$id" (draft-04: "id") sets, to a JSON pointer,
//     an "$anchor" or a draft-07 "#name" id anywhere in the document; every reference is then
//     rewritten to "#/$defs/<n>" of one table of the targets actually reached (definitions no
//     node refers to are never looked at: they constrain nothing).
//   - "allOf", and the keywords beside "allOf" / "anyOf" / "oneOf" / (from 2019-09) "$ref", are
//     merged into one node or into each branch, where that merge is exact: the conjunction of
//     two nodes keyword by keyword, "additionalProperties" applied to the names the other side
//     adds, never across "patternProperties" or "unevaluated*". Where a merge would not keep
//     the meaning, strict refuses naming the node; not strict keeps one side and lists the
//     other's keyword in `dropped`. A bound on the branches and nodes a merge makes refuses
//     past it, naming the node.
//   - draft-04's boolean exclusiveMinimum/exclusiveMaximum and the array form of "items" (with
//     "additionalItems") become their 2020-12 spellings.
//
// Every object node of the result carries the JSON pointer it came from under kOriginKey (and
// kMergedKey where a merge made it), for the second half's messages; it removes both.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_NORMALIZE_H_
#define TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_NORMALIZE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tpserve {

inline constexpr char kOriginKey[] = "\x01origin";
inline constexpr char kMergedKey[] = "\x01merged";

// The bounds on what merges may make: anyOf/oneOf branches at one node, and schema nodes copied
// into merges in one schema.
inline constexpr int kMaxMergedBranches = 64;
inline constexpr int kMaxMergedNodes = 20000;

struct NormalizedSchema {
  nlohmann::ordered_json schema;
  std::vector<std::string> annotations;  // JSON pointers of the keywords taken as annotations
  std::vector<std::string> dropped;      // not strict: keywords a merge could not keep exactly
};

// The spec's own annotations (meta-data and content vocabularies: title, description, default,
// examples, ...): they constrain nothing, so they are kept and never listed.
bool IsSchemaMetadataKeyword(std::string_view key);

// `pointer` with one more reference token, escaped ("~" as "~0", "/" as "~1"; RFC 6901).
std::string JsonPointerChild(std::string_view pointer, std::string_view token);

// The type names a "type" keyword's value holds (a name or an array of them; others skipped).
std::vector<std::string> TypeNames(const nlohmann::ordered_json& type);

// The instance type a keyword constrains ("string", "number", "array", "object"; "" for any).
std::string_view KeywordInstanceType(std::string_view key);
// A JSON number with no fractional part (1 and 1.0 alike); false for anything else.
bool IsWholeNumber(const nlohmann::ordered_json& value);
// `value` is an instance of the JSON Schema type `type` ("integer": a whole number).
bool JsonTypeMatches(const nlohmann::ordered_json& value, std::string_view type);

// INVALID_ARGUMENT naming `field` and the JSON pointer (after `pointer_prefix`) of the node for
// a node that is not a schema, a $ref that does not resolve in the document (remote documents
// are not fetched), a cyclic merge, (strict) a merge that would not be exact, and the bounds.
absl::StatusOr<NormalizedSchema> NormalizeSchema(const nlohmann::ordered_json& root, bool strict,
                                                 std::string_view field,
                                                 std::string_view pointer_prefix);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_SCHEMA_NORMALIZE_H_
