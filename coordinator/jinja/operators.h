// Python's operators and object protocol for template values: arithmetic (with Python's
// floor division, modulo and power), + and * on strings/lists/tuples, `in`, len(), iter(),
// obj[key] and slicing, each with Python's TypeError/ValueError messages.
//
//   TP_ASSIGN_OR_RETURN(Value sum, BinaryOperation(BinaryOp::kAdd, a, b, renderer));
//   TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
//
// Ints are 64-bit: a result Python would hold as a big int is an error here.
// Threading: pure functions (generators are consumed: Iterate marks their items used).
#ifndef TPSERVE_COORDINATOR_JINJA_OPERATORS_H_
#define TPSERVE_COORDINATOR_JINJA_OPERATORS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/jinja/ast.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

// The UndefinedError (or SecurityError) an operation on `undefined` raises.
absl::Status UndefinedError(const Value& undefined);
// An Undefined for a failed lookup, with jinja2's message ("'dict object' has no attribute
// 'x'", "list object has no element 3").
Value MissingAttribute(const Value& object, const Value& name);
// The SecurityError-Undefined the sandbox returns for an attribute it refuses ("access to
// attribute 'append' of 'list' object is unsafe.").
Value UnsafeAttribute(const Value& object, std::string_view name);

// iter(v) drained into a vector. Strings yield their characters, dicts their keys.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v);
// len(v).
absl::StatusOr<int64_t> Length(const Value& v);
// Python's obj[key]: the value, nullopt where Python raises TypeError or LookupError (the
// sandbox then tries an attribute), or an error (an Undefined object or key).
absl::StatusOr<std::optional<Value>> PyGetItem(const Value& object, const Value& key);
// obj[start:stop:step] for str/list/tuple/range, with Python's TypeError for anything else
// (jinja2 subscripts slices directly, without the sandbox's fallback to Undefined).
absl::StatusOr<Value> PySlice(const Value& object, const Value& start, const Value& stop,
                              const Value& step);

absl::StatusOr<Value> BinaryOperation(BinaryOp op, const Value& a, const Value& b,
                                      Renderer& renderer);
absl::StatusOr<Value> UnaryOperation(ExprKind op /* kNeg or kPos */, const Value& v);
// `item in container`.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// An int index (bool counts), as Python's __index__.
std::optional<int64_t> AsIndex(const Value& v);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_OPERATORS_H_
