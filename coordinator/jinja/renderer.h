// The tree-walking evaluator: runs a parsed Program against the globals of one render, with
// jinja2's scoping (a for/macro/call/with/filter body gets a scope; if does not), the immutable
// sandbox's attribute rules, Undefined semantics, and the limits of Options::limits.
//
//   Renderer renderer(program, now);
//   TP_ASSIGN_OR_RETURN(TString out, renderer.Render(std::move(globals)));
//
// Builtins (filters, tests, methods) get the Renderer to reach the sandbox's getattr/getitem,
// other filters and tests by name, and the limits (Charge, CheckString).
// Threading: one Renderer per render, used by one thread; the Program is shared read-only.
#ifndef TPSERVE_COORDINATOR_JINJA_RENDERER_H_
#define TPSERVE_COORDINATOR_JINJA_RENDERER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/jinja/ast.h"
#include "coordinator/jinja/tainted_string.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

// Stack one render may use (measured, not counted): whatever the template nests (macro
// recursion times block and expression nesting) stays within a thread's stack.
inline constexpr uintptr_t kMaxStackBytes = 512 * 1024;

// Variables of one frame; lookups fall back to the parent, assignments stay here. Frames
// hold a handful of names, so a vector beats a hash map.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
};

class Renderer {
 public:
  Renderer(const Program& program, absl::Time now);
  ~Renderer();

  // `globals`: the input and trusted values by name (already converted).
  absl::StatusOr<TString> Render(absl::flat_hash_map<std::string, Value> globals);

  // ----- for builtins -----
  const Limits& limits() const { return program_.options.limits; }
  absl::Time now() const { return now_; }
  // Counts `units` of work against max_loop_iterations.
  absl::Status Charge(int64_t units);
  // RESOURCE_EXHAUSTED when a string of `bytes` would exceed max_output_bytes.
  absl::Status CheckStringSize(size_t bytes) const;
  // jinja2's sandboxed environment.getattr / getitem.
  absl::StatusOr<Value> GetAttr(const Value& object, std::string_view name);
  absl::StatusOr<Value> GetItem(const Value& object, const Value& key);
  absl::StatusOr<Value> CallFilter(std::string_view name, const Value& input, CallArgs& args);
  absl::StatusOr<bool> CallTest(std::string_view name, const Value& input, CallArgs& args);
  // Calls a callable value (macro, global, method, recursive loop).
  absl::StatusOr<Value> Call(const Value& callee, CallArgs& args);
  void Register(std::shared_ptr<NamespaceData> ns) { namespaces_.push_back(std::move(ns)); }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  absl::StatusOr<Flow> ExecBody(const Body& body, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> Exec(const Stmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::Status ExecOutput(const OutputStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecFor(const ForStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<TString> RunLoop(const ForStmt& stmt, const std::shared_ptr<Scope>& outer,
                                  const Value& iterable, int64_t depth0, bool* broke);
  absl::StatusOr<Flow> ExecIf(const IfStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::Status ExecAssign(const AssignStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecAssignBlock(const AssignBlockStmt& stmt,
                                       const std::shared_ptr<Scope>& scope);
  absl::Status ExecCallBlock(const CallBlockStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecFilterBlock(const FilterBlockStmt& stmt,
                                       const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecWith(const WithStmt& stmt, const std::shared_ptr<Scope>& scope);
  // Renders `body` in `scope` into a string of its own.
  absl::StatusOr<TString> Capture(const Body& body, const std::shared_ptr<Scope>& scope,
                                  Flow* flow);
  absl::Status Assign(const Expr& target, Value value, Scope& scope);
  absl::Status Emit(const TString& text, size_t offset);
  absl::Status CheckStack() const;
  absl::StatusOr<Flow> ExecMacroDef(const MacroStmt& stmt, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Flow> ExecBlock(const Body& body, std::shared_ptr<Scope> parent);

  absl::StatusOr<Value> Eval(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalInner(const Expr& expr, const std::shared_ptr<Scope>& scope);
  // Node.as_const: `expr` evaluated as jinja2 evaluates constants when compiling.
  absl::StatusOr<Value> EvalConst(const Expr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalName(const NameExpr& expr, Scope& scope);
  absl::StatusOr<Value> EvalGetattr(const GetattrExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCall(const CallExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalTest(const TestExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalUnary(const UnaryExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalBinary(const BinaryExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalConcat(const ConcatExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCondExpr(const CondExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalList(const ListExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalDict(const DictExpr& e, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalGetitem(const GetitemExpr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalCompare(const CompareExpr& expr, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<CallArgs> EvalArgs(const CallArgsExpr& args, const std::shared_ptr<Scope>& scope);
  absl::StatusOr<Value> EvalFilter(const FilterExpr& expr, const std::shared_ptr<Scope>& scope,
                                   const Value* block_input);
  absl::StatusOr<Value> CallMacro(const CallableData& macro, CallArgs& args);
  absl::StatusOr<Value> CallLoop(LoopData& loop, CallArgs& args);

  // Adds "line L, column C: " to an error not located yet.
  absl::Status At(size_t offset, absl::Status status) const;
  absl::Status ErrorAt(size_t offset, std::string_view message) const;

  const Program& program_;
  const absl::Time now_;
  absl::flat_hash_map<std::string, Value> globals_;
  std::shared_ptr<Scope> root_;
  TString* out_ = nullptr;
  int64_t work_ = 0;
  int call_depth_ = 0;
  bool const_mode_ = false;  // inside EvalConst
  uintptr_t stack_base_ = 0;
  // Kept alive until the render ends, then emptied: namespaces and macro scopes can form
  // reference cycles, which this breaks.
  std::vector<std::shared_ptr<NamespaceData>> namespaces_;
  std::vector<std::shared_ptr<Scope>> closures_;
};

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_RENDERER_H_
