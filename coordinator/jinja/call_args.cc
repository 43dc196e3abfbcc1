// Python-style argument binding.
#include "coordinator/jinja/call_args.h"

#include "absl/strings/str_cat.h"

namespace tpserve::jinja {

absl::StatusOr<BoundArgs> BindArgs(std::string_view function, CallArgs& args,
                                   std::initializer_list<std::string_view> names, size_t required,
                                   bool varargs, bool varkw, size_t receiver_count) {
  BoundArgs bound;
  const std::vector<std::string_view> params(names);
  bound.values_.resize(params.size());
  const size_t n = std::min(args.positional.size(), params.size());
  for (size_t i = 0; i < n; ++i) bound.values_[i] = args.positional[i];
  if (args.positional.size() > params.size()) {
    if (!varargs) {
      const size_t max = params.size() + receiver_count;
      const size_t min = required + receiver_count;
      const size_t given = args.positional.size() + receiver_count;
      return absl::InvalidArgumentError(
          min == max ? Cat(function, "() takes ", max, " positional argument", max == 1 ? "" : "s",
                           " but ", given, given == 1 ? " was" : " were", " given")
                     : Cat(function, "() takes from ", min, " to ", max,
                           " positional arguments but ", given, " were given"));
    }
    for (size_t i = params.size(); i < args.positional.size(); ++i) {
      bound.extra_positional_.push_back(args.positional[i]);
    }
  }
  for (auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < params.size() && params[i] != key) ++i;
    if (i == params.size()) {
      if (varkw) {
        bound.extra_keyword_.emplace_back(key, value);
        continue;
      }
      return absl::InvalidArgumentError(
          Cat(function, "() got an unexpected keyword argument '", key, "'"));
    }
    if (bound.values_[i].has_value()) {
      return absl::InvalidArgumentError(
          Cat(function, "() got multiple values for argument '", key, "'"));
    }
    bound.values_[i] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!bound.values_[i].has_value()) {
      return absl::InvalidArgumentError(
          Cat(function, "() missing 1 required positional argument: '", params[i], "'"));
    }
  }
  return bound;
}

absl::StatusOr<int64_t> IndexArg(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  return absl::InvalidArgumentError(
      Cat("'", TypeName(v), "' object cannot be interpreted as an integer"));
}

}  // namespace tpserve::jinja
