// Python operator semantics for template values.
#include "coordinator/jinja/operators.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/format.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/string_ops.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {
namespace {

absl::Status TypeError(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

absl::Status Overflow() {
  return absl::InvalidArgumentError(
      "integer overflow: the result does not fit in 64 bits (Python would use a big int)");
}

const char* OpSymbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "** or pow()";
  }
  return "?";
}

absl::Status Unsupported(BinaryOp op, const Value& a, const Value& b) {
  return TypeError(Cat("unsupported operand type(s) for ", OpSymbol(op), ": '", TypeName(a),
                       "' and '", TypeName(b), "'"));
}

bool IsPlainSeq(const Value& v, SeqKind kind) { return v.is_list() && v.as_list().kind == kind; }

absl::StatusOr<Value> FloatOp(BinaryOp op, double x, double y, bool from_input) {
  switch (op) {
    case BinaryOp::kAdd:
      return Value::Float(x + y, from_input);
    case BinaryOp::kSub:
      return Value::Float(x - y, from_input);
    case BinaryOp::kMul:
      return Value::Float(x * y, from_input);
    case BinaryOp::kDiv:
      if (y == 0) return absl::InvalidArgumentError("float division by zero");
      return Value::Float(x / y, from_input);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) {
        return absl::InvalidArgumentError(op == BinaryOp::kMod ? "float modulo"
                                                               : "float floor division by zero");
      }
      // float_divmod from Objects/floatobject.c.
      double mod = std::fmod(x, y);
      double div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) {
          mod += y;
          div -= 1.0;
        }
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv;
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      } else {
        floordiv = std::copysign(0.0, x / y);
      }
      return Value::Float(op == BinaryOp::kMod ? mod : floordiv, from_input);
    }
    case BinaryOp::kPow: {
      if (x == 0 && y < 0) {
        return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
      }
      if (x < 0 && std::isfinite(y) && y != std::floor(y)) {
        return absl::InvalidArgumentError(
            "a negative number to a fractional power is complex, which is not supported");
      }
      const double r = std::pow(x, y);
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        return absl::InvalidArgumentError("(34, 'Numerical result out of range')");
      }
      return Value::Float(r, from_input);
    }
  }
  return absl::InternalError("bad operator");
}

absl::StatusOr<Value> IntOp(BinaryOp op, int64_t x, int64_t y, bool from_input) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value::Int(r, from_input);
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value::Int(r, from_input);
    case BinaryOp::kMul:
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value::Int(r, from_input);
    case BinaryOp::kDiv:
      if (y == 0) return absl::InvalidArgumentError("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y), from_input);
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod: {
      if (y == 0) {
        return absl::InvalidArgumentError(
            op == BinaryOp::kMod ? "integer modulo by zero" : "integer division or modulo by zero");
      }
      if (x == INT64_MIN && y == -1) {
        if (op == BinaryOp::kMod) return Value::Int(0, from_input);
        return Overflow();
      }
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        m += y;
        q -= 1;
      }
      return Value::Int(op == BinaryOp::kMod ? m : q, from_input);
    }
    case BinaryOp::kPow: {
      if (y < 0) {
        if (x == 0) return absl::InvalidArgumentError("0.0 cannot be raised to a negative power");
        return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)), from_input);
      }
      int64_t result = 1, base = x;
      while (y > 0) {
        if (y & 1) {
          if (__builtin_mul_overflow(result, base, &result)) return Overflow();
        }
        y >>= 1;
        if (y > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
      }
      return Value::Int(result, from_input);
    }
  }
  return absl::InternalError("bad operator");
}

absl::StatusOr<Value> RepeatSequence(const Value& seq, int64_t times, Renderer& renderer) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const TString& s = seq.as_string();
    if (!s.empty() && times > 0) {
      if (static_cast<uint64_t>(times) > static_cast<uint64_t>(INT64_MAX) / s.size()) {
        return renderer.CheckStringSize(SIZE_MAX);
      }
      TP_RETURN_IF_ERROR(renderer.CheckStringSize(s.size() * times));
    }
    return Value::StringLike(PyRepeat(s, times), seq.is_markup());
  }
  const ListData& list = seq.as_list();
  const uint64_t n = list.items.size();
  if (n > 0 && static_cast<uint64_t>(times) > static_cast<uint64_t>(INT64_MAX) / n) {
    return renderer.Charge(INT64_MAX);
  }
  TP_RETURN_IF_ERROR(renderer.Charge(static_cast<int64_t>(n * times)));
  std::vector<Value> items;
  items.reserve(n * times);
  for (int64_t i = 0; i < times; ++i)
    items.insert(items.end(), list.items.begin(), list.items.end());
  return Value::List(std::move(items), list.kind);
}

}  // namespace

absl::Status UndefinedError(const Value& undefined) {
  const UndefinedData& u = undefined.as_undefined();
  if (!u.is_lookup) return absl::InvalidArgumentError(u.hint);
  // jinja2's Undefined._undefined_message.
  if (!u.name.is_string()) {
    return absl::InvalidArgumentError(
        Cat(ObjectTypeRepr(u.object), " has no element ", PyRepr(u.name)));
  }
  return absl::InvalidArgumentError(
      Cat(StrRepr(ObjectTypeRepr(u.object)), " has no attribute ", StrRepr(u.name.str())));
}

Value MissingAttribute(const Value& object, const Value& name) {
  return Value::UndefinedLookup(object, name);
}

Value UnsafeAttribute(const Value& object, std::string_view name) {
  return Value::Undefined(Cat("access to attribute ", StrRepr(name), " of ",
                              StrRepr(TypeName(object)), " object is unsafe."),
                          /*security_error=*/true);
}

std::optional<int64_t> AsIndex(const Value& v) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  return std::nullopt;
}

absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return std::vector<Value>();
    case ValueKind::kString: {
      std::vector<Value> chars;
      const TString& s = v.as_string();
      const std::vector<size_t> offsets = CodePointOffsets(s.view());
      chars.reserve(offsets.size());
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.push_back(Value::String(s.Substr(offsets[i], offsets[i + 1])));
      }
      return chars;
    }
    case ValueKind::kList: {
      const ListData& list = v.as_list();
      if (list.kind == SeqKind::kGenerator || list.kind == SeqKind::kReverseIterator) {
        TP_RETURN_IF_ERROR(Materialize(list));
        std::vector<Value> rest(list.items.begin() + list.consumed, list.items.end());
        list.consumed = list.items.size();
        return rest;
      }
      return list.items;
    }
    case ValueKind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [key, value] : v.as_dict().entries()) keys.push_back(key);
      return keys;
    }
    case ValueKind::kLoop:
      return TypeError("iterating over the loop object is not supported");
    default:
      return TypeError(Cat("'", TypeName(v), "' object is not iterable"));
  }
}

absl::StatusOr<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return 0;
    case ValueKind::kString:
      return CodePointLength(v.str());
    case ValueKind::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    case ValueKind::kLoop:
      return static_cast<int64_t>(v.as_loop().items->items.size());
    case ValueKind::kList: {
      const ListData& list = v.as_list();
      if (list.kind != SeqKind::kGenerator && list.kind != SeqKind::kReverseIterator) {
        return static_cast<int64_t>(list.items.size());
      }
      break;
    }
    default:
      break;
  }
  return TypeError(Cat("object of type '", TypeName(v), "' has no len()"));
}

absl::StatusOr<std::optional<Value>> PyGetItem(const Value& object, const Value& key) {
  if (object.is_undefined()) return UndefinedError(object);
  if (key.is_undefined() && !object.is_dict()) return std::optional<Value>();
  switch (object.kind()) {
    case ValueKind::kDict: {
      if (!IsHashable(key)) return std::optional<Value>();
      if (const Value* found = object.as_dict().Find(key)) return std::optional<Value>(*found);
      return std::optional<Value>();
    }
    case ValueKind::kString:
    case ValueKind::kList: {
      if (object.is_list() && !object.is_sequence()) return std::optional<Value>();
      const std::optional<int64_t> index = AsIndex(key);
      if (!index) return std::optional<Value>();
      TP_ASSIGN_OR_RETURN(int64_t length, Length(object));
      int64_t i = *index;
      if (i < 0) i += length;
      if (i < 0 || i >= length) return std::optional<Value>();
      if (object.is_string()) {
        return std::optional<Value>(
            Value::StringLike(PyStrAt(object.as_string(), i), object.is_markup()));
      }
      return std::optional<Value>(object.as_list().items[i]);
    }
    default:
      return std::optional<Value>();
  }
}

absl::StatusOr<Value> PySlice(const Value& object, const Value& start, const Value& stop,
                              const Value& step) {
  if (object.is_undefined()) return UndefinedError(object);
  if (object.is_dict()) return TypeError("unhashable type: 'slice'");
  if (!object.is_string() && !object.is_sequence()) {
    return TypeError(Cat("'", TypeName(object), "' object is not subscriptable"));
  }
  auto bound = [](const Value& v, bool& ok) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    std::optional<int64_t> i = AsIndex(v);
    if (!i) ok = false;
    return i;
  };
  bool ok = true;
  const std::optional<int64_t> b = bound(start, ok), e = bound(stop, ok), s = bound(step, ok);
  if (!ok) return TypeError("slice indices must be integers or None or have an __index__ method");
  const int64_t step_value = s.value_or(1);
  if (step_value == 0) return absl::InvalidArgumentError("slice step cannot be zero");
  if (object.is_string()) {
    return Value::StringLike(PyStrSlice(object.as_string(), b, e, step_value), object.is_markup());
  }
  const ListData& list = object.as_list();
  int64_t first, last;
  const int64_t n =
      AdjustSlice(static_cast<int64_t>(list.items.size()), b, e, step_value, first, last);
  if (list.kind == SeqKind::kRange) {
    // range(a, b, c)[i:j:k] is range(a + i*c, a + j*c, c*k), i and j as slice.indices gives.
    return Value::Range(list.range_start + first * list.range_step,
                        list.range_start + last * list.range_step, list.range_step * step_value);
  }
  std::vector<Value> items;
  items.reserve(n);
  for (int64_t k = 0, i = first; k < n; ++k, i += step_value) items.push_back(list.items[i]);
  return Value::List(std::move(items), list.kind);
}

absl::StatusOr<Value> BinaryOperation(BinaryOp op, const Value& a, const Value& b,
                                      Renderer& renderer) {
  if (a.is_undefined()) return UndefinedError(a);
  if (op == BinaryOp::kMod && a.is_string()) {
    TP_ASSIGN_OR_RETURN(TString s, PercentFormat(a.as_string(), b, renderer, a.is_markup()));
    return Value::StringLike(std::move(s), a.is_markup());
  }
  if (b.is_undefined()) return UndefinedError(b);
  const bool from_input = a.from_input() || b.from_input();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return FloatOp(op, a.as_float(), b.as_float(), from_input);
    return IntOp(op, a.as_int(), b.as_int(), from_input);
  }
  if (op == BinaryOp::kAdd) {
    if (a.is_string() && b.is_string() && (a.is_markup() || b.is_markup())) {
      // Markup.__add__ / __radd__: the str side is escaped, the result is a Markup.
      TString s = a.is_markup() ? a.as_string() : HtmlEscape(a.as_string());
      s.Append(b.is_markup() ? b.as_string() : HtmlEscape(b.as_string()));
      TP_RETURN_IF_ERROR(renderer.CheckStringSize(s.size()));
      return Value::Markup(std::move(s));
    }
    if (a.is_markup()) return Unsupported(op, a, b);
    if (a.is_string()) {
      if (!b.is_string()) {
        return TypeError(Cat("can only concatenate str (not \"", TypeName(b), "\") to str"));
      }
      TP_RETURN_IF_ERROR(renderer.CheckStringSize(a.as_string().size() + b.as_string().size()));
      TString s = a.as_string();
      s.Append(b.as_string());
      return Value::String(std::move(s));
    }
    for (SeqKind kind : {SeqKind::kList, SeqKind::kTuple}) {
      if (!IsPlainSeq(a, kind)) continue;
      if (!IsPlainSeq(b, kind)) {
        const char* name = kind == SeqKind::kList ? "list" : "tuple";
        return TypeError(
            Cat("can only concatenate ", name, " (not \"", TypeName(b), "\") to ", name));
      }
      const auto& x = a.as_list().items;
      const auto& y = b.as_list().items;
      TP_RETURN_IF_ERROR(renderer.Charge(static_cast<int64_t>(x.size() + y.size())));
      std::vector<Value> items;
      items.reserve(x.size() + y.size());
      items.insert(items.end(), x.begin(), x.end());
      items.insert(items.end(), y.begin(), y.end());
      return Value::List(std::move(items), kind);
    }
  }
  if (op == BinaryOp::kMul) {
    auto is_repeatable = [](const Value& v) {
      return v.is_string() || IsPlainSeq(v, SeqKind::kList) || IsPlainSeq(v, SeqKind::kTuple);
    };
    const Value* seq = is_repeatable(a) ? &a : is_repeatable(b) ? &b : nullptr;
    if (seq != nullptr) {
      const Value& count = seq == &a ? b : a;
      if (!count.is_int() && !count.is_bool()) {
        return TypeError(Cat("can't multiply sequence by non-int of type '", TypeName(count), "'"));
      }
      TP_ASSIGN_OR_RETURN(Value result, RepeatSequence(*seq, count.as_int(), renderer));
      if (count.from_input() && result.is_string()) {
        TString s = result.as_string();
        s.MarkAllInput();
        return Value::StringLike(std::move(s), result.is_markup());
      }
      return result;
    }
  }
  return Unsupported(op, a, b);
}

absl::StatusOr<Value> UnaryOperation(ExprKind op, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_float())
    return Value::Float(op == ExprKind::kNeg ? -v.as_float() : v.as_float(), v.from_input());
  if (v.is_int() || v.is_bool()) {
    if (op == ExprKind::kPos) return Value::Int(v.as_int(), v.from_input());
    if (v.as_int() == INT64_MIN) return Overflow();
    return Value::Int(-v.as_int(), v.from_input());
  }
  return TypeError(Cat("bad operand type for unary ", op == ExprKind::kNeg ? "-" : "+", ": '",
                       TypeName(v), "'"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) return UndefinedError(item);
        return TypeError(
            Cat("'in <string>' requires string as left operand, not ", TypeName(item)));
      }
      return FindBytes(container.str(), item.str()) != std::string_view::npos;
    case ValueKind::kDict:
      TP_RETURN_IF_ERROR(CheckHashable(item));
      return container.as_dict().Find(item) != nullptr;
    case ValueKind::kList: {
      const ListData& list = container.as_list();
      if (list.kind == SeqKind::kDictKeys || list.kind == SeqKind::kDictItems) {
        TP_RETURN_IF_ERROR(CheckHashable(item));
      }
      const bool single_pass =
          list.kind == SeqKind::kGenerator || list.kind == SeqKind::kReverseIterator;
      TP_RETURN_IF_ERROR(Materialize(list));
      for (size_t i = single_pass ? list.consumed : 0; i < list.items.size(); ++i) {
        if (PyEquals(list.items[i], item)) {
          if (single_pass) list.consumed = i + 1;
          return true;
        }
      }
      if (single_pass) list.consumed = list.items.size();
      return false;
    }
    default:
      return TypeError(Cat("argument of type '", TypeName(container), "' is not iterable"));
  }
}

}  // namespace tpserve::jinja
