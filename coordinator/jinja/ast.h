// The parsed template: expression and statement nodes mirroring jinja2.nodes, built by
// parser.cc and walked by the renderer. Every node keeps the byte offset (into the normalized
// source) that its errors report as "line L, column C".
//
// Threading: immutable after parsing; shared by every render of a Template.
#ifndef TPSERVE_COORDINATOR_JINJA_AST_H_
#define TPSERVE_COORDINATOR_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/template.h"
#include "coordinator/jinja/value.h"

namespace tpserve::jinja {

enum class ExprKind {
  kConst,
  kName,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNeg,
  kPos,
  kNot,
  kBinary,
  kAnd,
  kOr,
  kCompare,
  kConcat,
  kCondExpr,
  kList,
  kTuple,
  kDict,
  kNSRef,  // ns.attr as an assignment target
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLtEq, kGt, kGtEq, kIn, kNotIn };

struct Expr {
  Expr(ExprKind k, size_t off) : kind(k), offset(off) {}
  virtual ~Expr() = default;
  ExprKind kind;
  size_t offset;
  int depth = 1;  // of the subtree; the parser bounds it by max_nesting_depth
  // No names, calls or context-dependent filters below: jinja2's optimizer may fold it into a
  // constant when compiling (see Renderer::Eval).
  bool maybe_const = false;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(size_t off, Value v) : Expr(ExprKind::kConst, off), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(size_t off, std::string n) : Expr(ExprKind::kName, off), name(std::move(n)) {}
  std::string name;
};

struct GetattrExpr : Expr {
  GetattrExpr(size_t off) : Expr(ExprKind::kGetattr, off) {}
  ExprPtr object;
  std::string attr;
};

struct GetitemExpr : Expr {
  GetitemExpr(size_t off) : Expr(ExprKind::kGetitem, off) {}
  ExprPtr object;
  ExprPtr index;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  SliceExpr(size_t off) : Expr(ExprKind::kSlice, off) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallArgsExpr {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(size_t off) : Expr(ExprKind::kCall, off) {}
  ExprPtr callee;
  CallArgsExpr args;
};

// x|name(args). `node` is null in {% filter %} and {% set x | filter %} blocks, whose body is
// the input.
struct FilterExpr : Expr {
  FilterExpr(size_t off) : Expr(ExprKind::kFilter, off) {}
  ExprPtr node;
  std::string name;
  FilterFn fn = nullptr;
  CallArgsExpr args;
};

struct TestExpr : Expr {
  TestExpr(size_t off) : Expr(ExprKind::kTest, off) {}
  ExprPtr node;
  std::string name;
  TestFn fn = nullptr;
  CallArgsExpr args;
};

// kNeg, kPos, kNot.
struct UnaryExpr : Expr {
  UnaryExpr(ExprKind k, size_t off, ExprPtr e) : Expr(k, off), operand(std::move(e)) {}
  ExprPtr operand;
};

// kBinary (with op), kAnd, kOr.
struct BinaryExpr : Expr {
  BinaryExpr(ExprKind k, size_t off) : Expr(k, off) {}
  BinaryOp op = BinaryOp::kAdd;
  ExprPtr left, right;
};

struct CompareExpr : Expr {
  CompareExpr(size_t off) : Expr(ExprKind::kCompare, off) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConcatExpr : Expr {
  ConcatExpr(size_t off) : Expr(ExprKind::kConcat, off) {}
  std::vector<ExprPtr> parts;
};

// `expr1 if test else expr2`; expr2 may be null (then Undefined).
struct CondExpr : Expr {
  CondExpr(size_t off) : Expr(ExprKind::kCondExpr, off) {}
  ExprPtr test, expr1, expr2;
};

// kList, kTuple.
struct ListExpr : Expr {
  ListExpr(ExprKind k, size_t off) : Expr(k, off) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  DictExpr(size_t off) : Expr(ExprKind::kDict, off) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct NSRefExpr : Expr {
  NSRefExpr(size_t off, std::string n, std::string a)
      : Expr(ExprKind::kNSRef, off), name(std::move(n)), attr(std::move(a)) {}
  std::string name, attr;
};

enum class StmtKind {
  kOutput,
  kFor,
  kIf,
  kAssign,
  kAssignBlock,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kBreak,
  kContinue,
  kBlock,
  kScope,  // {% generation %}: renders its body
};

struct Stmt {
  Stmt(StmtKind k, size_t off) : kind(k), offset(off) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  size_t offset;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Template text and {{ }} expressions, in order; an item is text when expr is null.
struct OutputItem {
  std::string text;
  ExprPtr expr;
};
struct OutputStmt : Stmt {
  OutputStmt(size_t off) : Stmt(StmtKind::kOutput, off) {}
  std::vector<OutputItem> items;
};

struct ForStmt : Stmt {
  ForStmt(size_t off) : Stmt(StmtKind::kFor, off) {}
  ExprPtr target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if filter`; may be null
  bool recursive = false;
  Body body;
  Body else_body;
};

struct IfStmt : Stmt {
  IfStmt(size_t off) : Stmt(StmtKind::kIf, off) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};

struct AssignStmt : Stmt {
  AssignStmt(size_t off) : Stmt(StmtKind::kAssign, off) {}
  ExprPtr target;  // name, tuple of names, or NSRef
  ExprPtr value;
};

struct AssignBlockStmt : Stmt {
  AssignBlockStmt(size_t off) : Stmt(StmtKind::kAssignBlock, off) {}
  ExprPtr target;
  ExprPtr filter;  // may be null
  Body body;
};

struct MacroStmt : Stmt {
  MacroStmt(size_t off) : Stmt(StmtKind::kMacro, off) {}
  std::string name;  // "caller" for a {% call %} body
  std::vector<std::string> args;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() args
  Body body;
  bool uses_caller = false;  // the body reads caller / kwargs / varargs
  bool uses_kwargs = false;
  bool uses_varargs = false;
  bool explicit_caller = false;  // `caller` is one of args
};

struct CallBlockStmt : Stmt {
  CallBlockStmt(size_t off) : Stmt(StmtKind::kCallBlock, off) {}
  std::unique_ptr<MacroStmt> caller;
  std::unique_ptr<CallExpr> call;
};

struct FilterBlockStmt : Stmt {
  FilterBlockStmt(size_t off) : Stmt(StmtKind::kFilterBlock, off) {}
  ExprPtr filter;
  Body body;
};

struct WithStmt : Stmt {
  WithStmt(size_t off) : Stmt(StmtKind::kWith, off) {}
  std::vector<ExprPtr> targets;
  std::vector<ExprPtr> values;
  Body body;
};

struct BlockStmt : Stmt {
  BlockStmt(size_t off) : Stmt(StmtKind::kBlock, off) {}
  std::string name;
  bool scoped = false;
  Body body;
};

struct ScopeStmt : Stmt {
  ScopeStmt(size_t off) : Stmt(StmtKind::kScope, off) {}
  Body body;
};

// Calls fn(ExprPtr&) for each direct child expression of `e` (null children skipped).
template <typename Fn>
void ForEachChild(Expr& e, Fn&& fn);
// Calls fn(ExprPtr&) for every expression root of the statements of `body`, recursively.
template <typename Fn>
void ForEachRootExpr(Body& body, Fn&& fn);

struct Program {
  std::string source;  // newlines normalized; node offsets point into it
  Options options;
  Body body;
};

template <typename Fn>
void ForEachChild(Expr& e, Fn&& fn) {
  auto visit = [&](ExprPtr& child) {
    if (child) fn(child);
  };
  auto visit_args = [&](CallArgsExpr& args) {
    for (ExprPtr& a : args.positional) visit(a);
    for (auto& [k, a] : args.keyword) visit(a);
    visit(args.dyn_args);
    visit(args.dyn_kwargs);
  };
  switch (e.kind) {
    case ExprKind::kConst:
    case ExprKind::kName:
    case ExprKind::kNSRef:
      return;
    case ExprKind::kGetattr:
      visit(static_cast<GetattrExpr&>(e).object);
      return;
    case ExprKind::kGetitem:
      visit(static_cast<GetitemExpr&>(e).object);
      visit(static_cast<GetitemExpr&>(e).index);
      return;
    case ExprKind::kSlice:
      visit(static_cast<SliceExpr&>(e).start);
      visit(static_cast<SliceExpr&>(e).stop);
      visit(static_cast<SliceExpr&>(e).step);
      return;
    case ExprKind::kCall:
      visit(static_cast<CallExpr&>(e).callee);
      visit_args(static_cast<CallExpr&>(e).args);
      return;
    case ExprKind::kFilter:
      visit(static_cast<FilterExpr&>(e).node);
      visit_args(static_cast<FilterExpr&>(e).args);
      return;
    case ExprKind::kTest:
      visit(static_cast<TestExpr&>(e).node);
      visit_args(static_cast<TestExpr&>(e).args);
      return;
    case ExprKind::kNeg:
    case ExprKind::kPos:
    case ExprKind::kNot:
      visit(static_cast<UnaryExpr&>(e).operand);
      return;
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr:
      visit(static_cast<BinaryExpr&>(e).left);
      visit(static_cast<BinaryExpr&>(e).right);
      return;
    case ExprKind::kCompare:
      visit(static_cast<CompareExpr&>(e).first);
      for (auto& [op, r] : static_cast<CompareExpr&>(e).rest) visit(r);
      return;
    case ExprKind::kConcat:
      for (ExprPtr& p : static_cast<ConcatExpr&>(e).parts) visit(p);
      return;
    case ExprKind::kCondExpr:
      visit(static_cast<CondExpr&>(e).test);
      visit(static_cast<CondExpr&>(e).expr1);
      visit(static_cast<CondExpr&>(e).expr2);
      return;
    case ExprKind::kList:
    case ExprKind::kTuple:
      for (ExprPtr& p : static_cast<ListExpr&>(e).items) visit(p);
      return;
    case ExprKind::kDict:
      for (auto& [k, v] : static_cast<DictExpr&>(e).items) {
        visit(k);
        visit(v);
      }
      return;
  }
}

template <typename Fn>
void ForEachRootExpr(Body& body, Fn&& fn) {
  auto visit = [&](ExprPtr& e) {
    if (e) fn(e);
  };
  for (StmtPtr& stmt : body) {
    switch (stmt->kind) {
      case StmtKind::kOutput:
        for (OutputItem& item : static_cast<OutputStmt&>(*stmt).items) visit(item.expr);
        break;
      case StmtKind::kFor: {
        auto& s = static_cast<ForStmt&>(*stmt);
        visit(s.target);
        visit(s.iter);
        visit(s.filter);
        ForEachRootExpr(s.body, fn);
        ForEachRootExpr(s.else_body, fn);
        break;
      }
      case StmtKind::kIf: {
        auto& s = static_cast<IfStmt&>(*stmt);
        for (auto& [test, b] : s.branches) {
          visit(test);
          ForEachRootExpr(b, fn);
        }
        ForEachRootExpr(s.else_body, fn);
        break;
      }
      case StmtKind::kAssign:
        visit(static_cast<AssignStmt&>(*stmt).target);
        visit(static_cast<AssignStmt&>(*stmt).value);
        break;
      case StmtKind::kAssignBlock:
        visit(static_cast<AssignBlockStmt&>(*stmt).target);
        visit(static_cast<AssignBlockStmt&>(*stmt).filter);
        ForEachRootExpr(static_cast<AssignBlockStmt&>(*stmt).body, fn);
        break;
      case StmtKind::kMacro: {
        auto& s = static_cast<MacroStmt&>(*stmt);
        for (ExprPtr& d : s.defaults) visit(d);
        ForEachRootExpr(s.body, fn);
        break;
      }
      case StmtKind::kCallBlock: {
        auto& s = static_cast<CallBlockStmt&>(*stmt);
        ExprPtr call(s.call.release());
        visit(call);
        s.call.reset(static_cast<CallExpr*>(call.release()));
        for (ExprPtr& d : s.caller->defaults) visit(d);
        ForEachRootExpr(s.caller->body, fn);
        break;
      }
      case StmtKind::kFilterBlock:
        visit(static_cast<FilterBlockStmt&>(*stmt).filter);
        ForEachRootExpr(static_cast<FilterBlockStmt&>(*stmt).body, fn);
        break;
      case StmtKind::kWith: {
        auto& s = static_cast<WithStmt&>(*stmt);
        for (ExprPtr& t : s.targets) visit(t);
        for (ExprPtr& v : s.values) visit(v);
        ForEachRootExpr(s.body, fn);
        break;
      }
      case StmtKind::kBlock:
        ForEachRootExpr(static_cast<BlockStmt&>(*stmt).body, fn);
        break;
      case StmtKind::kScope:
        ForEachRootExpr(static_cast<ScopeStmt&>(*stmt).body, fn);
        break;
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        break;
    }
  }
}

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_AST_H_
