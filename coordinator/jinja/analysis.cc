// Static analysis of the parsed tree: what macros read and what jinja2 may fold.
#include "coordinator/jinja/analysis.h"

#include <set>
#include <string>

namespace tpserve::jinja {
namespace {

// jinja2's find_undeclared: Name loads in visiting order; a store of the name first hides it.
struct Undeclared {
  std::set<std::string> names{"caller", "kwargs", "varargs"};
  std::set<std::string> found;
};
void VisitTarget(const Expr* e, Undeclared& u) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::kName) {
    u.names.erase(static_cast<const NameExpr*>(e)->name);
  } else if (e->kind == ExprKind::kTuple || e->kind == ExprKind::kList) {
    for (const ExprPtr& item : static_cast<const ListExpr*>(e)->items) VisitTarget(item.get(), u);
  } else if (e->kind == ExprKind::kNSRef) {
    u.names.erase(static_cast<const NSRefExpr*>(e)->name);
  }
}
void VisitExpr(const Expr* e, Undeclared& u) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::kName) {
    const std::string& name = static_cast<const NameExpr*>(e)->name;
    if (u.names.count(name)) u.found.insert(name);
    return;
  }
  // Children in jinja2's field order (the walk does not change the tree).
  ForEachChild(const_cast<Expr&>(*e), [&](ExprPtr& child) { VisitExpr(child.get(), u); });
}

void VisitStmt(const Stmt* s, Undeclared& u);

void VisitBody(const Body& body, Undeclared& u) {
  for (const StmtPtr& s : body) VisitStmt(s.get(), u);
}
void VisitStmt(const Stmt* s, Undeclared& u) {
  switch (s->kind) {
    case StmtKind::kOutput:
      for (const OutputItem& item : static_cast<const OutputStmt*>(s)->items) {
        VisitExpr(item.expr.get(), u);
      }
      return;
    case StmtKind::kFor: {
      auto* f = static_cast<const ForStmt*>(s);
      VisitTarget(f->target.get(), u);
      VisitExpr(f->iter.get(), u);
      VisitBody(f->body, u);
      VisitBody(f->else_body, u);
      VisitExpr(f->filter.get(), u);
      return;
    }
    case StmtKind::kIf: {
      auto* i = static_cast<const IfStmt*>(s);
      for (const auto& [test, body] : i->branches) {
        VisitExpr(test.get(), u);
        VisitBody(body, u);
      }
      VisitBody(i->else_body, u);
      return;
    }
    case StmtKind::kAssign:
      VisitTarget(static_cast<const AssignStmt*>(s)->target.get(), u);
      VisitExpr(static_cast<const AssignStmt*>(s)->value.get(), u);
      return;
    case StmtKind::kAssignBlock:
      VisitTarget(static_cast<const AssignBlockStmt*>(s)->target.get(), u);
      VisitExpr(static_cast<const AssignBlockStmt*>(s)->filter.get(), u);
      VisitBody(static_cast<const AssignBlockStmt*>(s)->body, u);
      return;
    case StmtKind::kMacro: {
      auto* m = static_cast<const MacroStmt*>(s);
      for (const std::string& arg : m->args) u.names.erase(arg);
      for (const ExprPtr& d : m->defaults) VisitExpr(d.get(), u);
      VisitBody(m->body, u);
      return;
    }
    case StmtKind::kCallBlock: {
      auto* c = static_cast<const CallBlockStmt*>(s);
      VisitExpr(c->call.get(), u);
      for (const std::string& arg : c->caller->args) u.names.erase(arg);
      for (const ExprPtr& d : c->caller->defaults) VisitExpr(d.get(), u);
      VisitBody(c->caller->body, u);
      return;
    }
    case StmtKind::kFilterBlock:
      VisitBody(static_cast<const FilterBlockStmt*>(s)->body, u);
      VisitExpr(static_cast<const FilterBlockStmt*>(s)->filter.get(), u);
      return;
    case StmtKind::kWith: {
      auto* w = static_cast<const WithStmt*>(s);
      for (const ExprPtr& t : w->targets) VisitTarget(t.get(), u);
      for (const ExprPtr& v : w->values) VisitExpr(v.get(), u);
      VisitBody(w->body, u);
      return;
    }
    case StmtKind::kScope:
      VisitBody(static_cast<const ScopeStmt*>(s)->body, u);
      return;
    case StmtKind::kBlock:  // jinja2 does not look into blocks
    case StmtKind::kBreak:
    case StmtKind::kContinue:
      return;
  }
}

}  // namespace

SpecialNames FindSpecialNames(const Body& body) {
  Undeclared u;
  VisitBody(body, u);
  return SpecialNames{u.found.count("caller") > 0, u.found.count("kwargs") > 0,
                      u.found.count("varargs") > 0};
}

// Sets Expr::maybe_const bottom-up: what jinja2's Node.as_const may evaluate in the sandbox.
bool MarkMaybeConst(Expr& e) {
  bool constant = true;
  ForEachChild(e, [&](ExprPtr& child) { constant = MarkMaybeConst(*child) && constant; });
  switch (e.kind) {
    // as_const short-circuits: `true or name` and `x if true else name` are constants.
    case ExprKind::kAnd:
    case ExprKind::kOr:
      constant = static_cast<const BinaryExpr&>(e).left->maybe_const;
      break;
    case ExprKind::kCondExpr:
      constant = static_cast<const CondExpr&>(e).test->maybe_const;
      break;
    case ExprKind::kName:
    case ExprKind::kCall:
    case ExprKind::kNSRef:
      constant = false;
      break;
    case ExprKind::kFilter: {
      const auto& f = static_cast<const FilterExpr&>(e);
      if (f.node == nullptr || f.args.dyn_args || f.args.dyn_kwargs || f.name == "map" ||
          f.name == "select" || f.name == "reject" || f.name == "selectattr" ||
          f.name == "rejectattr") {
        constant = false;
      }
      break;
    }
    case ExprKind::kTest: {
      const auto& t = static_cast<const TestExpr&>(e);
      if (t.args.dyn_args || t.args.dyn_kwargs) constant = false;
      break;
    }
    default:
      break;
  }
  e.maybe_const = constant;
  return constant;
}

}  // namespace tpserve::jinja
