// jinja2's tests (jinja2/tests.py): `x is defined`, `x is divisibleby 3`, ...
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/call_args.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {
namespace {

absl::StatusOr<bool> NoArgs(std::string_view name, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs(name, args, {}, 0).status());
  return true;
}

#define TP_SIMPLE_TEST(fn_name, python_name, expr)                          \
  absl::StatusOr<bool> fn_name(Renderer&, const Value& v, CallArgs& args) { \
    TP_RETURN_IF_ERROR(NoArgs(python_name, args).status());                 \
    return (expr);                                                          \
  }

TP_SIMPLE_TEST(TestDefined, "test_defined", !v.is_undefined())
TP_SIMPLE_TEST(TestUndefined, "test_undefined", v.is_undefined())
TP_SIMPLE_TEST(TestNone, "test_none", v.is_none())
TP_SIMPLE_TEST(TestBoolean, "test_boolean", v.is_bool())
TP_SIMPLE_TEST(TestFalse, "test_false", v.is_bool() && !v.as_bool())
TP_SIMPLE_TEST(TestTrue, "test_true", v.is_bool() && v.as_bool())
TP_SIMPLE_TEST(TestInteger, "test_integer", v.is_int())
TP_SIMPLE_TEST(TestFloat, "test_float", v.is_float())
TP_SIMPLE_TEST(TestString, "test_string", v.is_string())
TP_SIMPLE_TEST(TestMapping, "test_mapping", v.is_dict())
TP_SIMPLE_TEST(TestNumber, "test_number", v.is_number())
TP_SIMPLE_TEST(TestEscaped, "test_escaped", v.is_markup())
// len(v) and v.__getitem__: str, list, tuple, range, dict, and Undefined (whose __getitem__
// exists and raises only when called).
TP_SIMPLE_TEST(TestSequence, "test_sequence",
               v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined())
TP_SIMPLE_TEST(TestIterable, "test_iterable",
               v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() || v.is_loop())
// callable(): functions, macros, the loop object and Undefined (it defines __call__).
TP_SIMPLE_TEST(TestCallable, "callable", v.is_callable() || v.is_loop() || v.is_undefined())

#undef TP_SIMPLE_TEST

absl::StatusOr<bool> Modulo(Renderer& r, const Value& v, const Value& n, int64_t expected) {
  TP_ASSIGN_OR_RETURN(Value rem, BinaryOperation(BinaryOp::kMod, v, n, r));
  return PyEquals(rem, Value::Int(expected));
}

absl::StatusOr<bool> TestOdd(Renderer& r, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_odd", args).status());
  return Modulo(r, v, Value::Int(2), 1);
}
absl::StatusOr<bool> TestEven(Renderer& r, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_even", args).status());
  return Modulo(r, v, Value::Int(2), 0);
}
absl::StatusOr<bool> TestDivisibleby(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("test_divisibleby", args, {"num"}, 1));
  return Modulo(r, v, *a.Get(0), 0);
}

absl::StatusOr<bool> TestLower(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_lower", args).status());
  const TString s = PyStr(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = DecodeUtf8(s.view(), pos);
    if (IsPyUpper(c) || IsPyTitle(c)) return false;
    if (IsPyLower(c)) cased = true;
  }
  return cased;
}

absl::StatusOr<bool> TestUpper(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_upper", args).status());
  const TString s = PyStr(v);
  bool cased = false;
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = DecodeUtf8(s.view(), pos);
    if (IsPyLower(c) || IsPyTitle(c)) return false;
    if (IsPyUpper(c)) cased = true;
  }
  return cased;
}

absl::StatusOr<bool> TestSameas(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("test_sameas", args, {"other"}, 1));
  const Value& other = *a.Get(0);
  // Python identity. None, True and False are singletons and small ints are cached; other
  // values are the same object only when they are the same stored value here.
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case ValueKind::kNone:
      return true;
    case ValueKind::kBool:
      return v.as_bool() == other.as_bool();
    case ValueKind::kInt:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case ValueKind::kFloat:
      return false;
    default:
      return v.identity() == other.identity();
  }
}

absl::StatusOr<bool> TestIn(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("test_in", args, {"seq"}, 1));
  return Contains(*a.Get(0), v);
}

absl::StatusOr<bool> TestFilter(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_filter", args).status());
  return v.is_string() && FindFilter(v.str()) != nullptr;
}

absl::StatusOr<bool> TestTest(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(NoArgs("test_test", args).status());
  return v.is_string() && FindTest(v.str()) != nullptr;
}

absl::StatusOr<bool> Comparison(const Value& a, CallArgs& args, std::string_view name,
                                std::string_view symbol) {
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return absl::InvalidArgumentError(
        Cat(name, " expected 2 arguments, got ", 1 + args.positional.size() + args.keyword.size()));
  }
  const Value& b = args.positional[0];
  if (symbol == "==") return PyEquals(a, b);
  if (symbol == "!=") return !PyEquals(a, b);
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  TP_ASSIGN_OR_RETURN(int c, PyCompare(a, b, symbol));
  if (c == 3) return false;
  if (symbol == "<") return c < 0;
  if (symbol == "<=") return c <= 0;
  if (symbol == ">") return c > 0;
  return c >= 0;
}

#define TP_COMPARE_TEST(fn_name, symbol)                                    \
  absl::StatusOr<bool> fn_name(Renderer&, const Value& v, CallArgs& args) { \
    return Comparison(v, args, #fn_name, symbol);                           \
  }
TP_COMPARE_TEST(TestEq, "==")
TP_COMPARE_TEST(TestNe, "!=")
TP_COMPARE_TEST(TestLt, "<")
TP_COMPARE_TEST(TestLe, "<=")
TP_COMPARE_TEST(TestGt, ">")
TP_COMPARE_TEST(TestGe, ">=")
#undef TP_COMPARE_TEST

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"odd", TestOdd},
    {"even", TestEven},
    {"divisibleby", TestDivisibleby},
    {"defined", TestDefined},
    {"undefined", TestUndefined},
    {"filter", TestFilter},
    {"test", TestTest},
    {"none", TestNone},
    {"boolean", TestBoolean},
    {"false", TestFalse},
    {"true", TestTrue},
    {"integer", TestInteger},
    {"float", TestFloat},
    {"lower", TestLower},
    {"upper", TestUpper},
    {"string", TestString},
    {"mapping", TestMapping},
    {"number", TestNumber},
    {"sequence", TestSequence},
    {"iterable", TestIterable},
    {"callable", TestCallable},
    {"sameas", TestSameas},
    {"escaped", TestEscaped},
    {"in", TestIn},
    {"==", TestEq},
    {"eq", TestEq},
    {"equalto", TestEq},
    {"!=", TestNe},
    {"ne", TestNe},
    {">", TestGt},
    {"gt", TestGt},
    {"greaterthan", TestGt},
    {"ge", TestGe},
    {">=", TestGe},
    {"<", TestLt},
    {"lt", TestLt},
    {"lessthan", TestLt},
    {"<=", TestLe},
    {"le", TestLe},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const TestEntry& e : kTests) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace tpserve::jinja
