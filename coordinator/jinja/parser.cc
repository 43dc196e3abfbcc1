// Statements (jinja2's Parser.parse_* for tags, subparse) and the entry point ParseProgram.
#include "coordinator/jinja/parser.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "coordinator/jinja/analysis.h"
#include "coordinator/jinja/lexer.h"
#include "coordinator/jinja/parser_internal.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {

absl::Status Parser::FailAt(size_t offset, std::string_view message) {
  return ErrorAt(lexed_.source, offset, message);
}

absl::StatusOr<const Token*> Parser::Expect(const TokenExpr& e) {
  if (!Test(e)) {
    if (cur().type == Tok::kEof) {
      return Fail(Cat("unexpected end of template, expected ", StrRepr(e.Describe()), "."));
    }
    return Fail(
        Cat("expected token ", StrRepr(e.Describe()), ", got ", StrRepr(DescribeToken(cur()))));
  }
  return &Next();
}

absl::Status Parser::CheckRecursion() {
  if (recursion_ > options_.limits.max_nesting_depth) {
    return Fail(Cat("template nested deeper than max_nesting_depth (",
                    options_.limits.max_nesting_depth, ")"));
  }
  return absl::OkStatus();
}

absl::Status Parser::SetDepth(Expr& node, int child_depth) {
  node.depth = child_depth + 1;
  if (node.depth > options_.limits.max_nesting_depth) {
    return FailAt(node.offset, Cat("expression nested deeper than max_nesting_depth (",
                                   options_.limits.max_nesting_depth, ")"));
  }
  return absl::OkStatus();
}

absl::Status Parser::FailUnknownTagOrEof(const std::string* name,
                                         const std::vector<EndTokens>& stack, size_t offset) {
  std::set<std::string> expected;
  for (const EndTokens& exprs : stack) {
    for (const TokenExpr& e : exprs) expected.insert(e.Describe());
  }
  std::string currently_looking;
  if (!stack.empty()) {
    std::vector<std::string> parts;
    for (const TokenExpr& e : stack.back()) parts.push_back(StrRepr(e.Describe()));
    currently_looking = absl::StrJoin(parts, " or ");
  }
  std::string message = name == nullptr ? "Unexpected end of template."
                                        : Cat("Encountered unknown tag ", StrRepr(*name), ".");
  if (!currently_looking.empty()) {
    if (name != nullptr && expected.count(*name)) {
      CatTo(&message,
            " You probably made a nesting mistake. Jinja is expecting this tag, but "
            "currently looking for ",
            currently_looking, ".");
    } else {
      CatTo(&message, " Jinja was looking for the following tags: ", currently_looking, ".");
    }
  }
  if (!tag_stack_.empty()) {
    CatTo(&message, " The innermost block that needs to be closed is ", StrRepr(tag_stack_.back()),
          ".");
  }
  return FailAt(offset, message);
}

absl::Status Parser::FailEof(const EndTokens* end_tokens) {
  std::vector<EndTokens> stack = end_token_stack_;
  if (end_tokens != nullptr) stack.push_back(*end_tokens);
  return FailUnknownTagOrEof(nullptr, stack, cur().offset);
}

absl::StatusOr<Body> Parser::Subparse(const EndTokens* end_tokens) {
  DepthGuard guard(recursion_);
  TP_RETURN_IF_ERROR(CheckRecursion());
  Body body;
  std::unique_ptr<OutputStmt> data;
  auto flush = [&] {
    if (data) body.push_back(std::move(data));
    data.reset();
  };
  auto add = [&](OutputItem item, size_t offset) {
    if (!data) data = std::make_unique<OutputStmt>(offset);
    data->items.push_back(std::move(item));
  };
  if (end_tokens != nullptr) end_token_stack_.push_back(*end_tokens);
  struct Pop {
    Parser* p;
    bool active;
    ~Pop() {
      if (active) p->end_token_stack_.pop_back();
    }
  } pop{this, end_tokens != nullptr};
  while (cur().type != Tok::kEof) {
    const Token& token = cur();
    if (token.type == Tok::kData) {
      add(OutputItem{token.text, nullptr}, token.offset);
      Next();
    } else if (token.type == Tok::kVariableBegin) {
      Next();
      TP_ASSIGN_OR_RETURN(ExprPtr expr, ParseTuple(false, true, nullptr, false, false));
      const size_t offset = expr->offset;
      add(OutputItem{"", std::move(expr)}, offset);
      TP_RETURN_IF_ERROR(Expect(Tok::kVariableEnd).status());
    } else if (token.type == Tok::kBlockBegin) {
      flush();
      Next();
      if (end_tokens != nullptr && TestAny(*end_tokens)) return body;
      TP_ASSIGN_OR_RETURN(StmtPtr stmt, ParseStatement());
      if (stmt) body.push_back(std::move(stmt));
      TP_RETURN_IF_ERROR(Expect(Tok::kBlockEnd).status());
    } else {
      return Fail("internal parsing error");
    }
  }
  flush();
  return body;
}

absl::StatusOr<Body> Parser::ParseStatements(const EndTokens& end_tokens, bool drop_needle) {
  SkipIf(Tok::kColon);
  TP_RETURN_IF_ERROR(Expect(Tok::kBlockEnd).status());
  TP_ASSIGN_OR_RETURN(Body body, Subparse(&end_tokens));
  if (cur().type == Tok::kEof) return FailEof(&end_tokens);
  if (drop_needle) Next();
  return body;
}

absl::StatusOr<StmtPtr> Parser::ParseStatement() {
  const Token& token = cur();
  if (token.type != Tok::kName) return Fail("tag name expected");
  const std::string name = token.text;
  const size_t offset = token.offset;
  tag_stack_.push_back(name);
  struct Pop {
    std::vector<std::string>& s;
    ~Pop() { s.pop_back(); }
  } pop{tag_stack_};
  if (name == "for") return ParseFor();
  if (name == "if") return ParseIf();
  if (name == "set") return ParseSet();
  if (name == "macro") return ParseMacro();
  if (name == "call") return ParseCallBlock();
  if (name == "filter") return ParseFilterBlock();
  if (name == "with") return ParseWith();
  if (name == "block") return ParseBlock();
  if (name == "print") return ParsePrint();
  if (name == "break" || name == "continue") {
    Next();
    if (loop_depth_ == 0) return FailAt(offset, Cat("'", name, "' outside loop"));
    return StmtPtr(
        std::make_unique<Stmt>(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, offset));
  }
  if (name == "generation") return ParseGeneration();
  if (name == "extends" || name == "include" || name == "import" || name == "from") {
    return FailAt(offset, Cat("'", name,
                              "' is not supported: chat templates have no loader "
                              "for other templates"));
  }
  if (name == "autoescape") {
    return FailAt(offset,
                  "'autoescape' is not supported (transformers renders without "
                  "autoescaping)");
  }
  tag_stack_.pop_back();
  struct Repush {
    std::vector<std::string>& s;
    ~Repush() { s.push_back(""); }
  } repush{tag_stack_};  // keeps the outer Pop balanced
  return FailUnknownTagOrEof(&name, end_token_stack_, offset);
}

absl::StatusOr<StmtPtr> Parser::ParseFor() {
  auto node = std::make_unique<ForStmt>(Next().offset);
  static const EndTokens kIn = {NameIs("in")};
  TP_ASSIGN_OR_RETURN(node->target, ParseAssignTarget(true, false, &kIn, false));
  TP_RETURN_IF_ERROR(CheckNoLoopTarget(*node->target));
  TP_RETURN_IF_ERROR(Expect(NameIs("in")).status());
  static const EndTokens kRecursive = {NameIs("recursive")};
  TP_ASSIGN_OR_RETURN(node->iter, ParseTuple(false, false, &kRecursive, false, false));
  if (SkipIf(NameIs("if"))) {
    TP_ASSIGN_OR_RETURN(node->filter, ParseExpression(true));
  }
  node->recursive = SkipIf(NameIs("recursive"));
  ++loop_depth_;
  absl::StatusOr<Body> body = ParseStatements({NameIs("endfor"), NameIs("else")}, false);
  --loop_depth_;
  if (!body.ok()) return body.status();
  node->body = std::move(*body);
  if (Next().text != "endfor") {
    TP_ASSIGN_OR_RETURN(node->else_body, ParseStatements({NameIs("endfor")}, true));
  }
  return StmtPtr(std::move(node));
}

absl::Status Parser::CheckNoLoopTarget(const Expr& target) {
  if (target.kind == ExprKind::kName && static_cast<const NameExpr&>(target).name == "loop") {
    return FailAt(target.offset, "Can't assign to special loop variable in for-loop target");
  }
  if (target.kind == ExprKind::kTuple) {
    for (const ExprPtr& item : static_cast<const ListExpr&>(target).items) {
      TP_RETURN_IF_ERROR(CheckNoLoopTarget(*item));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<StmtPtr> Parser::ParseIf() {
  auto node = std::make_unique<IfStmt>(Next().offset);
  while (true) {
    TP_ASSIGN_OR_RETURN(ExprPtr test, ParseTuple(false, false, nullptr, false, false));
    TP_ASSIGN_OR_RETURN(Body body,
                        ParseStatements({NameIs("elif"), NameIs("else"), NameIs("endif")}, false));
    node->branches.emplace_back(std::move(test), std::move(body));
    const Token& token = Next();
    if (token.text == "elif") continue;
    if (token.text == "else") {
      TP_ASSIGN_OR_RETURN(node->else_body, ParseStatements({NameIs("endif")}, true));
    }
    break;
  }
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseSet() {
  const size_t offset = Next().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget(true, false, nullptr, true));
  if (SkipIf(Tok::kAssign)) {
    auto node = std::make_unique<AssignStmt>(offset);
    node->target = std::move(target);
    TP_ASSIGN_OR_RETURN(node->value, ParseTuple(false, true, nullptr, false, false));
    return StmtPtr(std::move(node));
  }
  auto node = std::make_unique<AssignBlockStmt>(offset);
  node->target = std::move(target);
  TP_ASSIGN_OR_RETURN(node->filter, ParseFilter(nullptr, false));
  TP_ASSIGN_OR_RETURN(node->body, ParseStatements({NameIs("endset")}, true));
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseWith() {
  auto node = std::make_unique<WithStmt>(Next().offset);
  while (cur().type != Tok::kBlockEnd) {
    if (!node->targets.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    TP_ASSIGN_OR_RETURN(ExprPtr target, ParseAssignTarget(true, false, nullptr, false));
    node->targets.push_back(std::move(target));
    TP_RETURN_IF_ERROR(Expect(Tok::kAssign).status());
    TP_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    node->values.push_back(std::move(value));
  }
  TP_ASSIGN_OR_RETURN(node->body, ParseStatements({NameIs("endwith")}, true));
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseBlock() {
  auto node = std::make_unique<BlockStmt>(Next().offset);
  TP_ASSIGN_OR_RETURN(const Token* name, Expect(Tok::kName));
  node->name = name->text;
  node->scoped = SkipIf(NameIs("scoped"));
  if (SkipIf(NameIs("required"))) {
    return Fail("required blocks are not supported: there is no template to override them");
  }
  if (cur().type == Tok::kSub) {
    return Fail(
        "Block names in Jinja have to be valid Python identifiers and may not contain "
        "hyphens, use an underscore instead.");
  }
  // A block is a function of its own in jinja2: loop controls do not cross it.
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  absl::StatusOr<Body> body = ParseStatements({NameIs("endblock")}, true);
  loop_depth_ = saved_loop_depth;
  if (!body.ok()) return body.status();
  node->body = std::move(*body);
  SkipIf(NameIs(node->name));
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParsePrint() {
  auto node = std::make_unique<OutputStmt>(Next().offset);
  while (cur().type != Tok::kBlockEnd) {
    if (!node->items.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    TP_ASSIGN_OR_RETURN(ExprPtr expr, ParseExpression(true));
    node->items.push_back(OutputItem{"", std::move(expr)});
  }
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseGeneration() {
  auto node = std::make_unique<ScopeStmt>(Next().offset);
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  absl::StatusOr<Body> body = ParseStatements({NameIs("endgeneration")}, true);
  loop_depth_ = saved_loop_depth;
  if (!body.ok()) return body.status();
  node->body = std::move(*body);
  return StmtPtr(std::move(node));
}

absl::Status Parser::ParseSignature(MacroStmt& node) {
  TP_RETURN_IF_ERROR(Expect(Tok::kLParen).status());
  while (cur().type != Tok::kRParen) {
    if (!node.args.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    TP_ASSIGN_OR_RETURN(const Token* arg, Expect(Tok::kName));
    std::string name = arg->text;
    if (SkipIf(Tok::kAssign)) {
      TP_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      node.defaults.push_back(std::move(value));
    } else if (!node.defaults.empty()) {
      return Fail("non-default argument follows default argument");
    }
    node.args.push_back(std::move(name));
  }
  return Expect(Tok::kRParen).status();
}

// A macro or call block body: its own function, so loop controls do not cross it.
absl::StatusOr<Body> Parser::ParseFunctionBody(std::string_view end_tag) {
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  absl::StatusOr<Body> body = ParseStatements({NameIs(end_tag)}, true);
  loop_depth_ = saved_loop_depth;
  return body;
}

absl::StatusOr<StmtPtr> Parser::ParseMacro() {
  auto node = std::make_unique<MacroStmt>(Next().offset);
  TP_ASSIGN_OR_RETURN(const Token* name, Expect(Tok::kName));
  node->name = name->text;
  TP_RETURN_IF_ERROR(ParseSignature(*node));
  TP_ASSIGN_OR_RETURN(node->body, ParseFunctionBody("endmacro"));
  TP_RETURN_IF_ERROR(AnalyzeMacro(*node));
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseCallBlock() {
  auto node = std::make_unique<CallBlockStmt>(Next().offset);
  node->caller = std::make_unique<MacroStmt>(node->offset);
  node->caller->name = "caller";
  if (cur().type == Tok::kLParen) TP_RETURN_IF_ERROR(ParseSignature(*node->caller));
  TP_ASSIGN_OR_RETURN(ExprPtr call, ParseExpression(true));
  if (call->kind != ExprKind::kCall) return FailAt(node->offset, "expected call");
  node->call.reset(static_cast<CallExpr*>(call.release()));
  TP_ASSIGN_OR_RETURN(node->caller->body, ParseFunctionBody("endcall"));
  TP_RETURN_IF_ERROR(AnalyzeMacro(*node->caller));
  return StmtPtr(std::move(node));
}

absl::StatusOr<StmtPtr> Parser::ParseFilterBlock() {
  auto node = std::make_unique<FilterBlockStmt>(Next().offset);
  TP_ASSIGN_OR_RETURN(node->filter, ParseFilter(nullptr, true));
  TP_ASSIGN_OR_RETURN(node->body, ParseStatements({NameIs("endfilter")}, true));
  return StmtPtr(std::move(node));
}

absl::Status Parser::AnalyzeMacro(MacroStmt& node) {
  const SpecialNames names = FindSpecialNames(node.body);
  node.explicit_caller = std::find(node.args.begin(), node.args.end(), "caller") != node.args.end();
  if (names.caller && node.explicit_caller) {
    const size_t index =
        std::find(node.args.begin(), node.args.end(), "caller") - node.args.begin();
    if (index + node.defaults.size() < node.args.size()) {
      return FailAt(node.offset,
                    "When defining macros or call blocks the special \"caller\" argument must "
                    "be omitted or be given a default.");
    }
  }
  node.uses_caller = names.caller && !node.explicit_caller;
  node.uses_kwargs =
      names.kwargs && std::find(node.args.begin(), node.args.end(), "kwargs") == node.args.end();
  node.uses_varargs =
      names.varargs && std::find(node.args.begin(), node.args.end(), "varargs") == node.args.end();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Program>> ParseProgram(std::string_view source,
                                                            const Options& options) {
  if (static_cast<int64_t>(source.size()) > options.limits.max_template_bytes) {
    return absl::InvalidArgumentError(Cat("line 1, column 1: template is ", source.size(),
                                          " bytes, over max_template_bytes (",
                                          options.limits.max_template_bytes, ")"));
  }
  TP_ASSIGN_OR_RETURN(LexedTemplate lexed, Lex(source, options));
  Parser parser(std::move(lexed), options);
  TP_ASSIGN_OR_RETURN(Body body, parser.Parse());
  ForEachRootExpr(body, [](ExprPtr& e) { MarkMaybeConst(*e); });
  auto program = std::make_shared<Program>();
  program->source = parser.TakeSource();
  program->options = options;
  program->body = std::move(body);
  return std::shared_ptr<const Program>(std::move(program));
}

}  // namespace tpserve::jinja
