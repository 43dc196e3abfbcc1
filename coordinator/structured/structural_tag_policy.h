// The schema policy (schema_policy.h) for the JSON Schemas inside an XGrammar structural tag.
// A structural tag ({"type": "structural_tag", "format": {...}}) is a tree of formats (sequence,
// or, tag, triggered_tags, ...) whose leaves may be "json_schema" formats; XGrammar compiles
// each of those schemas as a json_schema constraint would be compiled, so each must pass the
// same check: strict, a keyword that would not be enforced is an error; not strict, it is
// dropped and reported. Pointers are from the tag's root, through the schema's own:
// "/format/tags/0/content/json_schema/properties/city/uniqueItems".
//
//   TP_ASSIGN_OR_RETURN(SchemaPolicyResult r,
//                       CheckStructuralTagSchemas(text, /*strict=*/true, "structural_tag"));
//   xgrammar::Grammar::FromStructuralTag(r.schema, ...);   // the tag, schemas rewritten
//
// Threading: a pure function.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_STRUCTURAL_TAG_POLICY_H_
#define TPSERVE_COORDINATOR_STRUCTURED_STRUCTURAL_TAG_POLICY_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/structured/schema_policy.h"

namespace tpserve {

// On success `schema` holds the whole tag (not one schema) with every embedded schema less its
// dropped keywords, and `dropped` / `one_of_pointers` gather those of all its schemas.
// INVALID_ARGUMENT naming `field` for text that is not JSON and for any embedded schema that
// CheckSchema refuses. The rest of the tag (format types, required fields) is XGrammar's to
// check; what is not a format XGrammar reads is not walked.
absl::StatusOr<SchemaPolicyResult> CheckStructuralTagSchemas(std::string_view text, bool strict,
                                                             std::string_view field);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_STRUCTURAL_TAG_POLICY_H_
