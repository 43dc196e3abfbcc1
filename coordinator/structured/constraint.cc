#include "coordinator/structured/constraint.h"

#include "absl/strings/str_cat.h"
#include "base/str_cat.h"

namespace tpserve {

std::string_view ConstraintKindName(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kNone: return "none";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kGrammar: return "grammar";
    case ConstraintKind::kChoice: return "choice";
    case ConstraintKind::kStructuralTag: return "structural_tag";
  }
  return "unknown";
}

std::string ConstraintSpec::CacheKey() const {
  // Length-prefixed parts: no two different specs share a key.
  std::string key = StrCat(ConstraintKindName(kind), ":", strict ? 1 : 0, ":", text.size(),
                                 ":", text);
  for (const std::string& c : choices) absl::StrAppend(&key, ":", c.size(), ":", c);
  return key;
}

}  // namespace tpserve
