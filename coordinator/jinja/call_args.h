// Binding call arguments to a builtin's parameters the way Python binds them to a function
// signature, with Python's TypeError messages.
//
//   // do_indent(s, width=4, first=False, blank=False)
//   TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_indent", args, {"width", "first", "blank"}, 0));
//   const Value* width = a.Get(0);   // nullptr: not given, use the default
//
// Threading: value type.
#ifndef TPSERVE_COORDINATOR_JINJA_CALL_ARGS_H_
#define TPSERVE_COORDINATOR_JINJA_CALL_ARGS_H_

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

class BoundArgs {
 public:
  const Value* Get(size_t i) const { return values_[i] ? &*values_[i] : nullptr; }
  bool Has(size_t i) const { return values_[i].has_value(); }
  // The value, or `fallback` when not given (None counts as given).
  Value Or(size_t i, Value fallback) const { return values_[i] ? *values_[i] : fallback; }
  std::vector<Value>& extra_positional() { return extra_positional_; }
  std::vector<std::pair<std::string, Value>>& extra_keyword() { return extra_keyword_; }

 private:
  friend absl::StatusOr<BoundArgs> BindArgs(std::string_view, CallArgs&,
                                            std::initializer_list<std::string_view>, size_t, bool,
                                            bool, size_t);
  std::vector<std::optional<Value>> values_;
  std::vector<Value> extra_positional_;
  std::vector<std::pair<std::string, Value>> extra_keyword_;
};

// `names`: the parameters after the receiver (the filter's input or the method's self);
// the first `required` of them must be given. varargs/varkw: accept extra positional/keyword
// arguments (*args / **kwargs). `receiver_count` is 1 when the Python function takes the
// input as its first parameter (for the argument counts in messages), 0 otherwise.
absl::StatusOr<BoundArgs> BindArgs(std::string_view function, CallArgs& args,
                                   std::initializer_list<std::string_view> names, size_t required,
                                   bool varargs = false, bool varkw = false,
                                   size_t receiver_count = 1);

// Python's int(x) for an argument that must be an integer ("'float' object cannot be
// interpreted as an integer").
absl::StatusOr<int64_t> IndexArg(const Value& v);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_CALL_ARGS_H_
