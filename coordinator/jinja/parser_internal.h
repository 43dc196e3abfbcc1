// The parser's class, shared by parser.cc (statements, jinja2's parse_* of tags) and
// parse_expression.cc (expressions): a port of jinja2.parser.Parser over the lexer's tokens.
// Internal to coordinator/jinja; the entry point is ParseProgram (parser.h).
//
// Threading: one Parser per ParseProgram call.
#ifndef TPSERVE_COORDINATOR_JINJA_PARSER_INTERNAL_H_
#define TPSERVE_COORDINATOR_JINJA_PARSER_INTERNAL_H_

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/jinja/ast.h"
#include "coordinator/jinja/lexer.h"

namespace tpserve::jinja {

// An expected token: a type, or a name with a given value (jinja2's "name:endfor").
struct TokenExpr {
  Tok type;
  std::string_view name;  // for kName: the required value; empty: any name
  std::string Describe() const {
    return name.empty() ? DescribeTokenType(type) : std::string(name);
  }
};
inline TokenExpr NameIs(std::string_view value) { return {Tok::kName, value}; }

using EndTokens = std::vector<TokenExpr>;

// Depth of an optional subtree.
inline int D(const ExprPtr& e) { return e ? e->depth : 0; }

class Parser {
 public:
  Parser(LexedTemplate lexed, const Options& options)
      : lexed_(std::move(lexed)), options_(options) {}

  absl::StatusOr<Body> Parse() { return Subparse(nullptr); }

  std::string TakeSource() { return std::move(lexed_.source); }

 private:
  // ----- token stream -----
  const Token& cur() const { return lexed_.tokens[pos_]; }

  const Token& look() const { return lexed_.tokens[std::min(pos_ + 1, lexed_.tokens.size() - 1)]; }

  const Token& Next() {
    const Token& t = lexed_.tokens[pos_];
    if (t.type != Tok::kEof) ++pos_;
    return t;
  }

  bool Test(const TokenExpr& e) const { return Test(cur(), e); }

  static bool Test(const Token& t, const TokenExpr& e) {
    return t.type == e.type && (e.name.empty() || t.text == e.name);
  }

  bool TestAny(const EndTokens& es) const {
    return std::any_of(es.begin(), es.end(), [&](const TokenExpr& e) { return Test(e); });
  }

  bool IsName(std::string_view value) const { return Test(NameIs(value)); }

  bool SkipIf(const TokenExpr& e) {
    if (!Test(e)) return false;
    Next();
    return true;
  }

  bool SkipIf(Tok type) { return SkipIf(TokenExpr{type, ""}); }

  absl::Status Fail(std::string_view message) { return FailAt(cur().offset, message); }

  absl::Status FailAt(size_t offset, std::string_view message);

  absl::StatusOr<const Token*> Expect(const TokenExpr& e);

  absl::StatusOr<const Token*> Expect(Tok type) { return Expect(TokenExpr{type, ""}); }

  // ----- limits -----
  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };

  absl::Status CheckRecursion();

  absl::Status SetDepth(Expr& node, int child_depth);

  // ----- errors for unknown tags / early end (jinja2's _fail_ut_eof) -----
  absl::Status FailUnknownTagOrEof(const std::string* name, const std::vector<EndTokens>& stack,
                                   size_t offset);

  absl::Status FailEof(const EndTokens* end_tokens);

  // ----- statements -----
  absl::StatusOr<Body> Subparse(const EndTokens* end_tokens);

  absl::StatusOr<Body> ParseStatements(const EndTokens& end_tokens, bool drop_needle);

  absl::StatusOr<StmtPtr> ParseStatement();

  absl::StatusOr<StmtPtr> ParseFor();

  absl::Status CheckNoLoopTarget(const Expr& target);

  absl::StatusOr<StmtPtr> ParseIf();

  absl::StatusOr<StmtPtr> ParseSet();

  absl::StatusOr<StmtPtr> ParseWith();

  absl::StatusOr<StmtPtr> ParseBlock();

  absl::StatusOr<StmtPtr> ParsePrint();

  absl::StatusOr<StmtPtr> ParseGeneration();

  absl::Status ParseSignature(MacroStmt& node);

  // A macro or call block body: its own function, so loop controls do not cross it.
  absl::StatusOr<Body> ParseFunctionBody(std::string_view end_tag);

  absl::StatusOr<StmtPtr> ParseMacro();

  absl::StatusOr<StmtPtr> ParseCallBlock();

  absl::StatusOr<StmtPtr> ParseFilterBlock();

  absl::Status AnalyzeMacro(MacroStmt& node);

  // ----- expressions -----
  absl::StatusOr<ExprPtr> ParseAssignTarget(bool with_tuple, bool name_only,
                                            const EndTokens* extra_end_rules, bool with_namespace);

  // jinja2's Node.can_assign, as the lowercased node class name when it fails.
  static const char* CannotAssign(const Expr& e);

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr);

  absl::StatusOr<ExprPtr> ParseCondExpr();

  absl::StatusOr<ExprPtr> ParseOr() { return ParseLogical(true); }

  absl::StatusOr<ExprPtr> ParseLogical(bool is_or);

  absl::StatusOr<ExprPtr> ParseNot();

  absl::StatusOr<ExprPtr> ParseCompare();

  absl::StatusOr<ExprPtr> Binary(BinaryOp op, size_t offset, ExprPtr left, ExprPtr right);

  absl::StatusOr<ExprPtr> ParseMath1();

  absl::StatusOr<ExprPtr> ParseConcat();

  absl::StatusOr<ExprPtr> ParseMath2();

  absl::StatusOr<ExprPtr> ParsePow();

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);

  absl::StatusOr<ExprPtr> ParsePrimary(bool with_namespace);

  bool IsTupleEnd(const EndTokens* extra_end_rules) const;

  absl::StatusOr<ExprPtr> ParseTuple(bool simplified, bool with_condexpr,
                                     const EndTokens* extra_end_rules, bool explicit_parentheses,
                                     bool with_namespace);

  absl::StatusOr<ExprPtr> ParseList();

  absl::StatusOr<ExprPtr> ParseDict();

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseSubscribed();

  absl::StatusOr<int> ParseCallArgs(CallArgsExpr& out);

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr node);

  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr node, bool start_inline);

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node);

  LexedTemplate lexed_;

  const Options& options_;

  size_t pos_ = 0;

  int recursion_ = 0;

  int loop_depth_ = 0;

  std::vector<std::string> tag_stack_;

  std::vector<EndTokens> end_token_stack_;
};

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_PARSER_INTERNAL_H_
