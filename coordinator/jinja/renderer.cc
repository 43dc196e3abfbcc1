// Statement execution: scopes, loops, macros, blocks and the render limits.
#include "coordinator/jinja/renderer.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/lexer.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {
namespace {

constexpr char kLocatedUrl[] = "type.tpserve/jinja.located";

}  // namespace

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (const auto& [key, value] : s->vars) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value value) {
  for (auto& [key, existing] : vars) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

Renderer::Renderer(const Program& program, absl::Time now) : program_(program), now_(now) {}

Renderer::~Renderer() {
  // Break the cycles namespaces and macro closures can form.
  for (const auto& ns : namespaces_) ns->attrs = DictData();
  for (const auto& scope : closures_) scope->vars.clear();
  if (root_) root_->vars.clear();
}

absl::Status Renderer::At(size_t offset, absl::Status status) const {
  if (status.ok() || status.GetPayload(kLocatedUrl).has_value()) return status;
  const LineColumn lc = LocateOffset(program_.source, offset);
  absl::Status located(status.code(),
                       Cat("line ", lc.line, ", column ", lc.column, ": ", status.message()));
  located.SetPayload(kLocatedUrl, absl::Cord("1"));
  return located;
}

absl::Status Renderer::ErrorAt(size_t offset, std::string_view message) const {
  return At(offset, absl::InvalidArgumentError(Absl(message)));
}

absl::Status Renderer::Charge(int64_t units) {
  const int64_t limit = limits().max_loop_iterations;
  if (units > limit - work_) {
    work_ = limit;
    return absl::ResourceExhaustedError(
        Cat("loop iterations and list building exceed max_loop_iterations (", limit, ")"));
  }
  work_ += units;
  return absl::OkStatus();
}

absl::Status Renderer::CheckStringSize(size_t bytes) const {
  const int64_t limit = limits().max_output_bytes;
  if (bytes > static_cast<uint64_t>(limit)) {
    return absl::ResourceExhaustedError(
        Cat("a string of the rendering exceeds max_output_bytes (", limit, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TString> Renderer::Render(absl::flat_hash_map<std::string, Value> globals) {
  globals_ = std::move(globals);
  root_ = std::make_shared<Scope>();
  stack_base_ = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  TString out;
  out_ = &out;
  TP_RETURN_IF_ERROR(ExecBody(program_.body, root_).status());
  out_ = nullptr;
  return out;
}

absl::Status Renderer::Emit(const TString& text, size_t offset) {
  if (out_->size() + text.size() > static_cast<uint64_t>(limits().max_output_bytes)) {
    return At(offset, CheckStringSize(out_->size() + text.size()));
  }
  out_->Append(text);
  return absl::OkStatus();
}

absl::StatusOr<Renderer::Flow> Renderer::ExecBody(const Body& body,
                                                  const std::shared_ptr<Scope>& scope) {
  for (const StmtPtr& stmt : body) {
    TP_ASSIGN_OR_RETURN(Flow flow, Exec(*stmt, scope));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

absl::StatusOr<Renderer::Flow> Renderer::Exec(const Stmt& stmt,
                                              const std::shared_ptr<Scope>& scope) {
  absl::StatusOr<Flow> result = Flow::kNormal;
  if (absl::Status s = CheckStack(); !s.ok()) return At(stmt.offset, s);
  switch (stmt.kind) {
    case StmtKind::kOutput: {
      absl::Status s = ExecOutput(static_cast<const OutputStmt&>(stmt), scope);
      if (!s.ok()) result = s;
      break;
    }
    case StmtKind::kFor:
      result = ExecFor(static_cast<const ForStmt&>(stmt), scope);
      break;
    case StmtKind::kIf:
      result = ExecIf(static_cast<const IfStmt&>(stmt), scope);
      break;
    case StmtKind::kAssign: {
      absl::Status s = ExecAssign(static_cast<const AssignStmt&>(stmt), scope);
      if (!s.ok()) result = s;
      break;
    }
    case StmtKind::kAssignBlock:
      result = ExecAssignBlock(static_cast<const AssignBlockStmt&>(stmt), scope);
      break;
    case StmtKind::kMacro:
      result = ExecMacroDef(static_cast<const MacroStmt&>(stmt), scope);
      break;
    case StmtKind::kCallBlock: {
      absl::Status s = ExecCallBlock(static_cast<const CallBlockStmt&>(stmt), scope);
      if (!s.ok()) result = s;
      break;
    }
    case StmtKind::kFilterBlock:
      result = ExecFilterBlock(static_cast<const FilterBlockStmt&>(stmt), scope);
      break;
    case StmtKind::kWith:
      result = ExecWith(static_cast<const WithStmt&>(stmt), scope);
      break;
    case StmtKind::kBreak:
      result = Flow::kBreak;
      break;
    case StmtKind::kContinue:
      result = Flow::kContinue;
      break;
    case StmtKind::kBlock: {
      const auto& block = static_cast<const BlockStmt&>(stmt);
      result = ExecBlock(block.body, block.scoped ? scope : root_);
      break;
    }
    case StmtKind::kScope:
      result = ExecBlock(static_cast<const ScopeStmt&>(stmt).body, scope);
      break;
  }
  if (!result.ok()) return At(stmt.offset, result.status());
  return result;
}

absl::StatusOr<Renderer::Flow> Renderer::ExecMacroDef(const MacroStmt& macro,
                                                      const std::shared_ptr<Scope>& scope) {
  auto data = std::make_shared<CallableData>();
  data->type = CallableType::kMacro;
  data->name = macro.name;
  data->macro = &macro;
  data->closure = scope;
  closures_.push_back(scope);
  scope->Set(macro.name, Value::Callable(std::move(data)));
  return Flow::kNormal;
}

// A body in a scope of its own whose loop controls stay inside ({% block %}, {% generation %}).
absl::StatusOr<Renderer::Flow> Renderer::ExecBlock(const Body& body,
                                                   std::shared_ptr<Scope> parent) {
  auto inner = std::make_shared<Scope>();
  inner->parent = std::move(parent);
  TP_RETURN_IF_ERROR(ExecBody(body, inner).status());
  return Flow::kNormal;
}

absl::Status Renderer::ExecOutput(const OutputStmt& stmt, const std::shared_ptr<Scope>& scope) {
  for (const OutputItem& item : stmt.items) {
    if (item.expr == nullptr) {
      if (out_->size() + item.text.size() > static_cast<uint64_t>(limits().max_output_bytes)) {
        return At(stmt.offset, CheckStringSize(out_->size() + item.text.size()));
      }
      out_->Append(item.text);
      continue;
    }
    if (item.expr->maybe_const) {
      // jinja2 prints a constant {{ }} expression that it can evaluate when compiling as that
      // value, whatever it is (Undefined included).
      absl::StatusOr<Value> folded = EvalConst(*item.expr, scope);
      if (folded.ok()) {
        TP_RETURN_IF_ERROR(Emit(PyStr(*folded), item.expr->offset));
        continue;
      }
    }
    TP_ASSIGN_OR_RETURN(Value value, Eval(*item.expr, scope));
    TP_RETURN_IF_ERROR(Emit(PyStr(value), item.expr->offset));
  }
  return absl::OkStatus();
}

absl::StatusOr<Renderer::Flow> Renderer::ExecFor(const ForStmt& stmt,
                                                 const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.iter, scope));
  bool broke = false;
  TP_RETURN_IF_ERROR(RunLoop(stmt, scope, iterable, 0, &broke).status());
  return Flow::kNormal;
}

absl::StatusOr<TString> Renderer::RunLoop(const ForStmt& stmt, const std::shared_ptr<Scope>& outer,
                                          const Value& iterable, int64_t depth0, bool* broke) {
  absl::StatusOr<std::vector<Value>> all = Iterate(iterable);
  if (!all.ok()) return At(stmt.iter->offset, all.status());
  std::vector<Value> items = std::move(*all);
  if (stmt.filter) {
    // jinja2 filters in a frame of its own, beside the loop body's.
    auto filter_scope = std::make_shared<Scope>();
    filter_scope->parent = outer;
    std::vector<Value> kept;
    for (Value& item : items) {
      TP_RETURN_IF_ERROR(Charge(1));
      TP_RETURN_IF_ERROR(At(stmt.target->offset, Assign(*stmt.target, item, *filter_scope)));
      TP_ASSIGN_OR_RETURN(Value test, Eval(*stmt.filter, filter_scope));
      if (Truthy(test)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto else_scope = std::make_shared<Scope>();
    else_scope->parent = outer;
    TP_RETURN_IF_ERROR(ExecBody(stmt.else_body, else_scope).status());
    return TString();
  }
  auto loop = std::make_shared<LoopData>();
  auto list = std::make_shared<ListData>();
  list->items = std::move(items);
  loop->items = list;
  loop->depth0 = depth0;
  if (stmt.recursive) {
    loop->recursive_for = &stmt;
    loop->outer_scope = outer;
  }
  const Value loop_value = Value::Loop(loop);
  for (size_t i = 0; i < list->items.size(); ++i) {
    TP_RETURN_IF_ERROR(At(stmt.offset, Charge(1)));
    loop->index0 = static_cast<int64_t>(i);
    // jinja2 re-enters the body's frame on every iteration: what one iteration sets, the next
    // does not see.
    auto loop_scope = std::make_shared<Scope>();
    loop_scope->parent = outer;
    loop_scope->Set("loop", loop_value);
    TP_RETURN_IF_ERROR(At(stmt.target->offset, Assign(*stmt.target, list->items[i], *loop_scope)));
    TP_ASSIGN_OR_RETURN(Flow flow, ExecBody(stmt.body, loop_scope));
    if (flow == Flow::kBreak) {
      *broke = true;
      break;
    }
  }
  return TString();
}

absl::StatusOr<Renderer::Flow> Renderer::ExecIf(const IfStmt& stmt,
                                                const std::shared_ptr<Scope>& scope) {
  for (const auto& [test, body] : stmt.branches) {
    TP_ASSIGN_OR_RETURN(Value value, Eval(*test, scope));
    if (Truthy(value)) return ExecBody(body, scope);
  }
  return ExecBody(stmt.else_body, scope);
}

absl::Status Renderer::Assign(const Expr& target, Value value, Scope& scope) {
  if (ValueDepth(value) > kMaxValueDepth) {
    return absl::ResourceExhaustedError(
        Cat("a value nested deeper than ", kMaxValueDepth, " levels"));
  }
  switch (target.kind) {
    case ExprKind::kName:
      scope.Set(static_cast<const NameExpr&>(target).name, std::move(value));
      return absl::OkStatus();
    case ExprKind::kNSRef: {
      const auto& ref = static_cast<const NSRefExpr&>(target);
      const Value* ns = scope.Find(ref.name);
      if (ns == nullptr) {
        auto it = globals_.find(ref.name);
        if (it != globals_.end()) ns = &it->second;
      }
      if (ns == nullptr || !ns->is_namespace()) {
        return absl::InvalidArgumentError("cannot assign attribute on non-namespace object");
      }
      ns->as_namespace().attrs.Set(Value::String(ref.attr), std::move(value));
      return absl::OkStatus();
    }
    case ExprKind::kTuple:
    case ExprKind::kList: {
      const auto& targets = static_cast<const ListExpr&>(target).items;
      TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(value));
      if (items.size() > targets.size()) {
        return absl::InvalidArgumentError(
            Cat("too many values to unpack (expected ", targets.size(), ")"));
      }
      if (items.size() < targets.size()) {
        return absl::InvalidArgumentError(Cat("not enough values to unpack (expected ",
                                              targets.size(), ", got ", items.size(), ")"));
      }
      for (size_t i = 0; i < targets.size(); ++i) {
        TP_RETURN_IF_ERROR(Assign(*targets[i], std::move(items[i]), scope));
      }
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError("cannot assign to this target");
  }
}

absl::Status Renderer::ExecAssign(const AssignStmt& stmt, const std::shared_ptr<Scope>& scope) {
  TP_ASSIGN_OR_RETURN(Value value, Eval(*stmt.value, scope));
  return Assign(*stmt.target, std::move(value), *scope);
}

absl::StatusOr<TString> Renderer::Capture(const Body& body, const std::shared_ptr<Scope>& scope,
                                          Flow* flow) {
  TString captured;
  TString* saved = out_;
  out_ = &captured;
  absl::StatusOr<Flow> result = ExecBody(body, scope);
  out_ = saved;
  if (!result.ok()) return result.status();
  *flow = *result;
  return captured;
}

absl::StatusOr<Renderer::Flow> Renderer::ExecAssignBlock(const AssignBlockStmt& stmt,
                                                         const std::shared_ptr<Scope>& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  Flow flow = Flow::kNormal;
  TP_ASSIGN_OR_RETURN(TString text, Capture(stmt.body, inner, &flow));
  Value value = Value::String(std::move(text));
  if (stmt.filter) {
    TP_ASSIGN_OR_RETURN(value,
                        EvalFilter(static_cast<const FilterExpr&>(*stmt.filter), scope, &value));
  }
  TP_RETURN_IF_ERROR(Assign(*stmt.target, std::move(value), *scope));
  return flow;
}

absl::Status Renderer::ExecCallBlock(const CallBlockStmt& stmt,
                                     const std::shared_ptr<Scope>& scope) {
  auto caller = std::make_shared<CallableData>();
  caller->type = CallableType::kMacro;
  caller->name = "caller";
  caller->macro = stmt.caller.get();
  caller->closure = scope;
  caller->is_caller = true;
  closures_.push_back(scope);
  TP_ASSIGN_OR_RETURN(Value callee, Eval(*stmt.call->callee, scope));
  absl::StatusOr<CallArgs> args = EvalArgs(stmt.call->args, scope);
  if (!args.ok()) return At(stmt.call->offset, args.status());
  args->keyword.emplace_back("caller", Value::Callable(std::move(caller)));
  absl::StatusOr<Value> result = Call(callee, *args);
  if (!result.ok()) return At(stmt.call->offset, result.status());
  return Emit(PyStr(*result), stmt.offset);
}

absl::StatusOr<Renderer::Flow> Renderer::ExecFilterBlock(const FilterBlockStmt& stmt,
                                                         const std::shared_ptr<Scope>& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  Flow flow = Flow::kNormal;
  TP_ASSIGN_OR_RETURN(TString text, Capture(stmt.body, inner, &flow));
  Value input = Value::String(std::move(text));
  TP_ASSIGN_OR_RETURN(Value value,
                      EvalFilter(static_cast<const FilterExpr&>(*stmt.filter), inner, &input));
  TP_RETURN_IF_ERROR(Emit(PyStr(value), stmt.offset));
  return flow;
}

absl::StatusOr<Renderer::Flow> Renderer::ExecWith(const WithStmt& stmt,
                                                  const std::shared_ptr<Scope>& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  for (size_t i = 0; i < stmt.targets.size(); ++i) {
    TP_ASSIGN_OR_RETURN(Value value, Eval(*stmt.values[i], scope));
    TP_RETURN_IF_ERROR(
        At(stmt.targets[i]->offset, Assign(*stmt.targets[i], std::move(value), *inner)));
  }
  return ExecBody(stmt.body, inner);
}

absl::StatusOr<Value> Renderer::Call(const Value& callee, CallArgs& args) {
  switch (callee.kind()) {
    case ValueKind::kUndefined:
      return UndefinedError(callee);
    case ValueKind::kCallable: {
      const CallableData& c = callee.as_callable();
      switch (c.type) {
        case CallableType::kBuiltinFunction:
          return c.builtin(*this, args);
        case CallableType::kMethod:
          return CallMethod(*this, c, args);
        case CallableType::kMacro:
          return CallMacro(c, args);
      }
      break;
    }
    case ValueKind::kLoop:
      return CallLoop(callee.as_loop(), args);
    default:
      break;
  }
  return absl::InvalidArgumentError(Cat("'", TypeName(callee), "' object is not callable"));
}

absl::StatusOr<Value> Renderer::CallMacro(const CallableData& callable, CallArgs& args) {
  const MacroStmt& macro = *callable.macro;
  // Binds arguments as jinja2.runtime.Macro.__call__ does.
  const size_t n = macro.args.size();
  std::vector<std::optional<Value>> bound;
  for (size_t i = 0; i < n && i < args.positional.size(); ++i)
    bound.emplace_back(args.positional[i]);
  auto pop_keyword = [&](std::string_view name) -> std::optional<Value> {
    for (auto it = args.keyword.begin(); it != args.keyword.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        args.keyword.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  bool found_caller = false;
  if (bound.size() != n) {
    for (size_t i = bound.size(); i < n; ++i) {
      bound.push_back(pop_keyword(macro.args[i]));
      if (macro.args[i] == "caller") found_caller = true;
    }
  } else {
    found_caller = macro.explicit_caller;
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = callable.closure;
  if (macro.uses_caller && !found_caller) {
    std::optional<Value> caller = pop_keyword("caller");
    scope->Set("caller",
               caller && !caller->is_none() ? *caller : Value::Undefined("No caller defined"));
  }
  if (macro.uses_kwargs) {
    DictData kwargs;
    for (auto& [k, v] : args.keyword) kwargs.Set(Value::String(k), std::move(v));
    scope->Set("kwargs", Value::Dict(std::move(kwargs)));
  } else if (!args.keyword.empty()) {
    for (const auto& [k, v] : args.keyword) {
      if (k == "caller") {
        return absl::InvalidArgumentError(
            Cat("macro ", StrRepr(macro.name),
                " was invoked with two values for the special caller argument. This is most likely "
                "a bug."));
      }
    }
    return absl::InvalidArgumentError(Cat("macro ", StrRepr(macro.name),
                                          " takes no keyword argument ",
                                          StrRepr(args.keyword.front().first)));
  }
  if (macro.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->Set("varargs", Value::Tuple(std::move(rest)));
  } else if (args.positional.size() > n) {
    return absl::InvalidArgumentError(
        Cat("macro ", StrRepr(macro.name), " takes not more than ", n, " argument(s)"));
  }
  if (call_depth_ >= limits().max_call_depth) {
    return absl::ResourceExhaustedError(
        Cat("macro calls nested deeper than max_call_depth (", limits().max_call_depth, ")"));
  }
  ++call_depth_;
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{call_depth_};
  // Missing arguments take their defaults, evaluated in the macro's scope in order.
  const size_t first_default = n - macro.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (bound[i].has_value()) {
      scope->Set(macro.args[i], std::move(*bound[i]));
    } else if (i >= first_default) {
      TP_ASSIGN_OR_RETURN(Value value, Eval(*macro.defaults[i - first_default], scope));
      scope->Set(macro.args[i], std::move(value));
    } else {
      scope->Set(macro.args[i],
                 Value::Undefined(Cat("parameter ", StrRepr(macro.args[i]), " was not provided")));
    }
  }
  Flow flow = Flow::kNormal;
  TP_ASSIGN_OR_RETURN(TString text, Capture(macro.body, scope, &flow));
  return Value::String(std::move(text));
}

absl::StatusOr<Value> Renderer::CallLoop(LoopData& loop, CallArgs& args) {
  if (loop.recursive_for == nullptr) {
    return absl::InvalidArgumentError(
        "The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    return absl::InvalidArgumentError("loop() takes exactly one argument");
  }
  if (call_depth_ >= limits().max_call_depth) {
    return absl::ResourceExhaustedError(Cat(
        "recursive loop calls nested deeper than max_call_depth (", limits().max_call_depth, ")"));
  }
  ++call_depth_;
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth{call_depth_};
  TString captured;
  TString* saved = out_;
  out_ = &captured;
  bool broke = false;
  absl::StatusOr<TString> result =
      RunLoop(*loop.recursive_for, loop.outer_scope, args.positional[0], loop.depth0 + 1, &broke);
  out_ = saved;
  if (!result.ok()) return result.status();
  return Value::String(std::move(captured));
}

}  // namespace tpserve::jinja
