// Static analysis of a parsed template, done once by the parser:
//  - which of the special names caller / kwargs / varargs a macro body reads (jinja2's
//    find_undeclared: they decide how the macro binds extra arguments);
//  - which expressions jinja2's optimizer may fold into constants when it compiles
//    (Expr::maybe_const; see Renderer::Eval).
//
//   const SpecialNames names = FindSpecialNames(macro.body);
//   ForEachRootExpr(body, [](ExprPtr& e) { MarkMaybeConst(*e); });
//
// Threading: pure functions over a tree being built.
#ifndef TPSERVE_COORDINATOR_JINJA_ANALYSIS_H_
#define TPSERVE_COORDINATOR_JINJA_ANALYSIS_H_

#include "coordinator/jinja/ast.h"

namespace tpserve::jinja {

struct SpecialNames {
  bool caller = false;
  bool kwargs = false;
  bool varargs = false;
};
// Names loaded in visiting order; a store of the name before any load hides it.
SpecialNames FindSpecialNames(const Body& body);

// Sets Expr::maybe_const on `e` and its subtree; returns e.maybe_const.
bool MarkMaybeConst(Expr& e);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_ANALYSIS_H_
