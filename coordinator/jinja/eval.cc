// Expression evaluation and the sandbox's attribute/item lookup.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/lexer.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {
namespace {

// Dunder attributes every template value has as an instance (object's, and the protocol
// methods); the sandbox refuses them, as every attribute starting with "_". Others, like
// __mro__ or __globals__, are not instance attributes and fall through to item lookup.
bool IsDunder(std::string_view name) {
  static constexpr std::string_view kInstanceDunders[] = {
      "__class__",   "__delattr__", "__dir__",           "__doc__",          "__eq__",
      "__format__",  "__ge__",      "__getattribute__",  "__getstate__",     "__gt__",
      "__hash__",    "__init__",    "__init_subclass__", "__le__",           "__lt__",
      "__ne__",      "__new__",     "__reduce__",        "__reduce_ex__",    "__repr__",
      "__setattr__", "__sizeof__",  "__str__",           "__subclasshook__", "__len__",
      "__getitem__", "__iter__",    "__contains__",      "__add__",          "__mul__",
      "__mod__",     "__call__",    "__bool__",          "__int__",          "__float__",
      "__module__",
  };
  return std::find(std::begin(kInstanceDunders), std::end(kInstanceDunders), name) !=
         std::end(kInstanceDunders);
}

// Python's getattr(object, name) as the sandbox sees it: nullopt when there is no attribute.
std::optional<Value> PythonAttribute(const Value& object, std::string_view name) {
  if (IsDunder(name)) return UnsafeAttribute(object, name);
  if (object.is_namespace()) {
    const Value* found = object.as_namespace().attrs.FindString(name);
    if (found == nullptr) return std::nullopt;
    if (!name.empty() && name[0] == '_') return UnsafeAttribute(object, name);
    return *found;
  }
  std::optional<Value> attr = GetBuiltinAttribute(object, name);
  if (attr && !name.empty() && name[0] == '_') return UnsafeAttribute(object, name);
  return attr;
}

}  // namespace

absl::StatusOr<Value> Renderer::GetAttr(const Value& object, std::string_view name) {
  // Undefined has the dunder attributes of any object (refused by the sandbox); anything
  // else on it raises.
  if (object.is_undefined() && !IsDunder(name)) return UndefinedError(object);
  if (std::optional<Value> attr = PythonAttribute(object, name)) return *attr;
  if (object.is_dict()) {
    if (const Value* found = object.as_dict().FindString(name)) return *found;
    return MissingAttribute(object, Value::String(std::string(name)));
  }
  const Value key = Value::String(std::string(name));
  TP_ASSIGN_OR_RETURN(std::optional<Value> item, PyGetItem(object, key));
  if (item) return *item;
  return MissingAttribute(object, key);
}

absl::StatusOr<Value> Renderer::GetItem(const Value& object, const Value& key) {
  TP_ASSIGN_OR_RETURN(std::optional<Value> item, PyGetItem(object, key));
  if (item) return *item;
  if (key.is_string()) {
    if (std::optional<Value> attr = PythonAttribute(object, key.str())) return *attr;
  }
  return MissingAttribute(object, key);
}

absl::StatusOr<Value> Renderer::CallFilter(std::string_view name, const Value& input,
                                           CallArgs& args) {
  FilterFn fn = FindFilter(name);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(Cat("No filter named ", StrRepr(name), "."));
  }
  return fn(*this, input, args);
}

absl::StatusOr<bool> Renderer::CallTest(std::string_view name, const Value& input, CallArgs& args) {
  TestFn fn = FindTest(name);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(Cat("No test named ", StrRepr(name), "."));
  }
  return fn(*this, input, args);
}

namespace {

// jinja2's has_safe_repr: the values its optimizer keeps as folded constants.
bool HasSafeRepr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kNone:
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kFloat:
    case ValueKind::kString:
      return true;
    case ValueKind::kList: {
      const ListData& list = v.as_list();
      if (list.kind == SeqKind::kRange) return true;
      if (list.kind != SeqKind::kList && list.kind != SeqKind::kTuple) return false;
      for (const Value& item : list.items) {
        if (!HasSafeRepr(item)) return false;
      }
      return true;
    }
    case ValueKind::kDict:
      for (const auto& [key, value] : v.as_dict().entries()) {
        if (!HasSafeRepr(key) || !HasSafeRepr(value)) return false;
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

absl::StatusOr<Value> Renderer::EvalConst(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  const bool saved = const_mode_;
  const_mode_ = true;
  absl::StatusOr<Value> result = EvalInner(expr, scope);
  const_mode_ = saved;
  return result;
}

absl::StatusOr<Value> Renderer::Eval(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  if (expr.maybe_const && !const_mode_ && expr.kind != ExprKind::kConst) {
    // jinja2's optimizer replaces a constant subexpression by its value when compiling, if
    // evaluating it (Node.as_const) succeeds and gives a plain value; otherwise the node runs
    // at render time with its children folded the same way.
    absl::StatusOr<Value> folded = EvalConst(expr, scope);
    if (folded.ok() && HasSafeRepr(*folded)) return folded;
  }
  absl::StatusOr<Value> result = EvalInner(expr, scope);
  if (!result.ok()) return At(expr.offset, result.status());
  return result;
}

absl::StatusOr<Value> Renderer::EvalName(const NameExpr& expr, Scope& scope) {
  if (const Value* v = scope.Find(expr.name)) return *v;
  auto it = globals_.find(expr.name);
  if (it != globals_.end()) return it->second;
  Value builtin = FindGlobal(expr.name);
  if (!builtin.is_undefined()) return builtin;
  return Value::Undefined(Cat(StrRepr(expr.name), " is undefined"));
}

absl::StatusOr<CallArgs> Renderer::EvalArgs(const CallArgsExpr& args,
                                            const std::shared_ptr<Scope>& scope) {
  CallArgs out;
  for (const ExprPtr& e : args.positional) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
    out.positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : args.keyword) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
    out.keyword.emplace_back(name, std::move(v));
  }
  if (args.dyn_args) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*args.dyn_args, scope));
    TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    for (Value& item : items) out.positional.push_back(std::move(item));
  }
  if (args.dyn_kwargs) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*args.dyn_kwargs, scope));
    if (!v.is_dict()) {
      return absl::InvalidArgumentError(
          Cat("argument after ** must be a mapping, not ", TypeName(v)));
    }
    for (const auto& [k, item] : v.as_dict().entries()) {
      if (!k.is_string()) return absl::InvalidArgumentError("keywords must be strings");
      out.keyword.emplace_back(std::string(k.str()), item);
    }
  }
  return out;
}

absl::StatusOr<Value> Renderer::EvalFilter(const FilterExpr& expr,
                                           const std::shared_ptr<Scope>& scope,
                                           const Value* block_input) {
  Value input;
  if (expr.node) {
    if (expr.node->kind == ExprKind::kFilter) {
      TP_ASSIGN_OR_RETURN(
          input, EvalFilter(static_cast<const FilterExpr&>(*expr.node), scope, block_input));
    } else {
      TP_ASSIGN_OR_RETURN(input, Eval(*expr.node, scope));
    }
  } else if (block_input != nullptr) {
    input = *block_input;
  }
  TP_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(expr.args, scope));
  absl::StatusOr<Value> result = expr.fn(*this, input, args);
  if (!result.ok()) return At(expr.offset, result.status());
  return result;
}

absl::StatusOr<Value> Renderer::EvalGetitem(const GetitemExpr& expr,
                                            const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value object, Eval(*expr.object, scope));
  if (expr.index->kind == ExprKind::kSlice) {
    const auto& slice = static_cast<const SliceExpr&>(*expr.index);
    Value parts[3];
    const ExprPtr* exprs[3] = {&slice.start, &slice.stop, &slice.step};
    for (int i = 0; i < 3; ++i) {
      if (*exprs[i]) {
        TP_ASSIGN_OR_RETURN(parts[i], Eval(**exprs[i], scope));
      }
    }
    if (const_mode_ && !object.is_undefined()) {
      // Node.as_const subscripts through the sandbox's getitem, which turns a TypeError into
      // Undefined.
      auto index_ok = [](const Value& v) { return v.is_none() || v.is_int() || v.is_bool(); };
      if ((!object.is_string() && !object.is_sequence()) || !index_ok(parts[0]) ||
          !index_ok(parts[1]) || !index_ok(parts[2])) {
        auto bound = [](const Value& v) { return PyRepr(v); };
        return Value::Undefined(Cat(ObjectTypeRepr(object), " has no element slice(",
                                    bound(parts[0]), ", ", bound(parts[1]), ", ", bound(parts[2]),
                                    ")"));
      }
    }
    return PySlice(object, parts[0], parts[1], parts[2]);
  }
  TP_ASSIGN_OR_RETURN(Value key, Eval(*expr.index, scope));
  return GetItem(object, key);
}

absl::StatusOr<Value> Renderer::EvalCompare(const CompareExpr& expr,
                                            const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value left, Eval(*expr.first, scope));
  bool result = true;
  for (const auto& [op, right_expr] : expr.rest) {
    TP_ASSIGN_OR_RETURN(Value right, Eval(*right_expr, scope));
    switch (op) {
      case CompareOp::kEq:
        result = PyEquals(left, right);
        break;
      case CompareOp::kNe:
        result = !PyEquals(left, right);
        break;
      case CompareOp::kIn:
      case CompareOp::kNotIn: {
        TP_ASSIGN_OR_RETURN(bool in, Contains(right, left));
        result = op == CompareOp::kIn ? in : !in;
        break;
      }
      default: {
        if (left.is_undefined()) return UndefinedError(left);
        if (right.is_undefined()) return UndefinedError(right);
        const char* symbol = op == CompareOp::kLt     ? "<"
                             : op == CompareOp::kLtEq ? "<="
                             : op == CompareOp::kGt   ? ">"
                                                      : ">=";
        TP_ASSIGN_OR_RETURN(int c, PyCompare(left, right, symbol));
        if (c == 3) {
          result = false;  // NaN
        } else {
          result = op == CompareOp::kLt     ? c < 0
                   : op == CompareOp::kLtEq ? c <= 0
                   : op == CompareOp::kGt   ? c > 0
                                            : c >= 0;
        }
      }
    }
    if (!result) break;
    left = std::move(right);
  }
  return Value::Bool(result);
}

absl::Status Renderer::CheckStack() const {
  // Bytes of stack this render uses, measured from Render's frame; the bound keeps any
  // template (deep macro recursion times deep nesting) within a thread's stack.
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  if (stack_base_ > here && stack_base_ - here > kMaxStackBytes) {
    return absl::ResourceExhaustedError(
        Cat("rendering nests deeper than ", kMaxStackBytes / 1024,
            " KiB of stack (macro recursion is also bounded by max_call_depth (",
            limits().max_call_depth, "))"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Value> Renderer::EvalInner(const Expr& expr, const std::shared_ptr<Scope>& scope) {
  TP_RETURN_IF_ERROR(CheckStack());
  // Node.as_const raises Impossible on anything that needs the render's context.
  if (const_mode_ && !expr.maybe_const) return absl::FailedPreconditionError("not a constant");
  switch (expr.kind) {
    case ExprKind::kConst:
      return static_cast<const ConstExpr&>(expr).value;
    case ExprKind::kName:
      return EvalName(static_cast<const NameExpr&>(expr), *scope);
    case ExprKind::kGetattr:
      return EvalGetattr(static_cast<const GetattrExpr&>(expr), scope);
    case ExprKind::kGetitem:
      return EvalGetitem(static_cast<const GetitemExpr&>(expr), scope);
    case ExprKind::kSlice:
      return Value::Undefined("a slice is only valid in a subscript");
    case ExprKind::kCall:
      return EvalCall(static_cast<const CallExpr&>(expr), scope);
    case ExprKind::kFilter:
      return EvalFilter(static_cast<const FilterExpr&>(expr), scope, nullptr);
    case ExprKind::kTest:
      return EvalTest(static_cast<const TestExpr&>(expr), scope);
    case ExprKind::kNeg:
    case ExprKind::kPos:
    case ExprKind::kNot:
      return EvalUnary(static_cast<const UnaryExpr&>(expr), scope);
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr:
      return EvalBinary(static_cast<const BinaryExpr&>(expr), scope);
    case ExprKind::kCompare:
      return EvalCompare(static_cast<const CompareExpr&>(expr), scope);
    case ExprKind::kConcat:
      return EvalConcat(static_cast<const ConcatExpr&>(expr), scope);
    case ExprKind::kCondExpr:
      return EvalCondExpr(static_cast<const CondExpr&>(expr), scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
      return EvalList(static_cast<const ListExpr&>(expr), scope);
    case ExprKind::kDict:
      return EvalDict(static_cast<const DictExpr&>(expr), scope);
    case ExprKind::kNSRef:
      return absl::InvalidArgumentError("a namespace reference is not a value");
  }
  return absl::InternalError("unknown expression");
}

absl::StatusOr<Value> Renderer::EvalGetattr(const GetattrExpr& e,
                                            const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value object, Eval(*e.object, scope));
  return GetAttr(object, e.attr);
}

absl::StatusOr<Value> Renderer::EvalCall(const CallExpr& e, const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value callee, Eval(*e.callee, scope));
  TP_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.args, scope));
  return Call(callee, args);
}

absl::StatusOr<Value> Renderer::EvalTest(const TestExpr& e, const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value input, Eval(*e.node, scope));
  TP_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e.args, scope));
  TP_ASSIGN_OR_RETURN(bool result, e.fn(*this, input, args));
  return Value::Bool(result);
}

absl::StatusOr<Value> Renderer::EvalUnary(const UnaryExpr& e, const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value v, Eval(*e.operand, scope));
  if (e.kind == ExprKind::kNot) return Value::Bool(!Truthy(v));
  return UnaryOperation(e.kind, v);
}

absl::StatusOr<Value> Renderer::EvalBinary(const BinaryExpr& e,
                                           const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value left, Eval(*e.left, scope));
  if (e.kind != ExprKind::kBinary) {
    if (Truthy(left) == (e.kind == ExprKind::kOr)) return left;
    return Eval(*e.right, scope);
  }
  TP_ASSIGN_OR_RETURN(Value right, Eval(*e.right, scope));
  return BinaryOperation(e.op, left, right, *this);
}

absl::StatusOr<Value> Renderer::EvalConcat(const ConcatExpr& e,
                                           const std::shared_ptr<Scope>& scope) {
  std::vector<Value> parts;
  parts.reserve(e.parts.size());
  for (const ExprPtr& part : e.parts) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*part, scope));
    parts.push_back(std::move(v));
  }
  TString out;
  for (const Value& v : parts) {
    TString s = PyStr(v);
    TP_RETURN_IF_ERROR(CheckStringSize(out.size() + s.size()));
    out.Append(s);
  }
  return Value::String(std::move(out));
}

absl::StatusOr<Value> Renderer::EvalCondExpr(const CondExpr& e,
                                             const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value test, Eval(*e.test, scope));
  if (Truthy(test)) return Eval(*e.expr1, scope);
  if (e.expr2) return Eval(*e.expr2, scope);
  return Value::Undefined(Cat("the inline if-expression on line ",
                              LocateOffset(program_.source, e.offset).line,
                              " evaluated to false and no else section was defined."));
}

absl::StatusOr<Value> Renderer::EvalList(const ListExpr& e, const std::shared_ptr<Scope>& scope) {
  std::vector<Value> items;
  items.reserve(e.items.size());
  for (const ExprPtr& item : e.items) {
    TP_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
    items.push_back(std::move(v));
  }
  return Value::List(std::move(items),
                     e.kind == ExprKind::kList ? SeqKind::kList : SeqKind::kTuple);
}

absl::StatusOr<Value> Renderer::EvalDict(const DictExpr& e, const std::shared_ptr<Scope>& scope) {
  DictData dict;
  for (const auto& [key_expr, value_expr] : e.items) {
    TP_ASSIGN_OR_RETURN(Value key, Eval(*key_expr, scope));
    TP_ASSIGN_OR_RETURN(Value value, Eval(*value_expr, scope));
    TP_RETURN_IF_ERROR(CheckHashable(key));
    dict.Set(std::move(key), std::move(value));
  }
  return Value::Dict(std::move(dict));
}

}  // namespace tpserve::jinja
