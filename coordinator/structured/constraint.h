// What a request constrains its output to: a JSON Schema, any JSON object, a regular
// expression, an EBNF grammar or a list of choices. One type from the protocols (gRPC's
// GenerateRequest.constraint, HTTP's response_format / structured_outputs) to the compiler.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_CONSTRAINT_H_
#define TPSERVE_COORDINATOR_STRUCTURED_CONSTRAINT_H_

#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

enum class ConstraintKind { kNone, kJsonSchema, kJsonObject, kRegex, kGrammar, kChoice };

std::string_view ConstraintKindName(ConstraintKind kind);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kNone;
  std::string text;                  // the schema, regex or grammar (kJsonSchema/kRegex/kGrammar)
  std::vector<std::string> choices;  // kChoice
  // kJsonSchema: true rejects a schema with a keyword the engine cannot enforce; false drops
  // such keywords and reports them (CompiledConstraint::dropped_keywords).
  bool strict = true;
  // The request field that carried the constraint, named by every error about it, in the
  // public request's proto path ("json_schema", "choice.choices").
  std::string field;

  bool empty() const { return kind == ConstraintKind::kNone; }
  // Equal keys compile to the same grammar (the compiler's cache key). `field` is not part.
  std::string CacheKey() const;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_STRUCTURED_CONSTRAINT_H_
