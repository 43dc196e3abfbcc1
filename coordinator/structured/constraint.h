// What a request constrains its output to: a JSON Schema, any JSON object, a regular
// expression, an EBNF grammar, a list of choices or an XGrammar structural tag (free text with
// constrained regions, e.g. tool calls: after "<tool_call>" the call's arguments must match the
// function's parameters schema). One type from the protocols (gRPC's
// GenerateRequest.constraint, HTTP's response_format / structured_outputs / tools) to the
// compiler.
#ifndef TPSERVE_COORDINATOR_STRUCTURED_CONSTRAINT_H_
#define TPSERVE_COORDINATOR_STRUCTURED_CONSTRAINT_H_

#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

enum class ConstraintKind {
  kNone,
  kJsonSchema,
  kJsonObject,
  kRegex,
  kGrammar,
  kChoice,
  kStructuralTag,
};

std::string_view ConstraintKindName(ConstraintKind kind);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kNone;
  // The schema, regex, grammar (kJsonSchema/kRegex/kGrammar) or structural tag JSON
  // (kStructuralTag: {"type": "structural_tag", "format": {...}}, XGrammar's format).
  std::string text;
  std::vector<std::string> choices;  // kChoice
  // kJsonSchema, and each schema inside a kStructuralTag: true rejects a schema with a keyword
  // the engine cannot enforce; false drops such keywords and reports them
  // (CompiledConstraint::dropped_keywords).
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
