// The names a template can use beyond the syntax: jinja2's filters (x|upper), tests
// (x is defined), globals (range, namespace, raise_exception...) and the methods of Python's
// str/dict/list/int/float that templates call (x.strip(), d.items()...), each implemented as
// Python and jinja2 3.1 implement them.
//
//   FilterFn upper = FindFilter("upper");          // nullptr: no such filter
//   TP_ASSIGN_OR_RETURN(Value v, upper(renderer, input, args));
//
// Errors are INVALID_ARGUMENT with Python's message (the renderer adds the location).
// Threading: stateless functions; state lives in the Renderer passed in.
#ifndef TPSERVE_COORDINATOR_JINJA_BUILTINS_H_
#define TPSERVE_COORDINATOR_JINJA_BUILTINS_H_

#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

using FilterFn = absl::StatusOr<Value> (*)(Renderer& renderer, const Value& input, CallArgs& args);
using TestFn = absl::StatusOr<bool> (*)(Renderer& renderer, const Value& input, CallArgs& args);

// nullptr when jinja2 (as transformers sets it up) has no such filter / test.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);
// A filter jinja2 has but this interpreter does not (Parse refuses it with that reason).
bool IsUnsupportedFilter(std::string_view name);

// The global `name` (range, dict, namespace, raise_exception, strftime_now, lipsum, cycler,
// joiner), or Undefined.
Value FindGlobal(std::string_view name);

// Attribute lookup on a str/dict/list/tuple/int/float/bool/loop value as Python's getattr
// does it: a bound method, a plain attribute (loop.index, x.real), or nullopt when Python has
// no such attribute. For the mutating methods the immutable sandbox refuses (list.append,
// dict.update...) it returns the SecurityError-Undefined of UnsafeAttribute (operators.h).
std::optional<Value> GetBuiltinAttribute(const Value& object, std::string_view name);
// Calls a bound method from GetBuiltinAttribute.
absl::StatusOr<Value> CallMethod(Renderer& renderer, const CallableData& method, CallArgs& args);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_BUILTINS_H_
