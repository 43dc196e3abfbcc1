// Expressions: jinja2's Parser.parse_expression and everything below it (precedence climbing
// from conditional expressions down to primaries, postfix subscripts, calls, filters, tests).
#include <algorithm>

#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/parser_internal.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {

absl::StatusOr<ExprPtr> Parser::ParseAssignTarget(bool with_tuple, bool name_only,
                                                  const EndTokens* extra_end_rules,
                                                  bool with_namespace) {
  ExprPtr target;
  if (name_only) {
    TP_ASSIGN_OR_RETURN(const Token* token, Expect(Tok::kName));
    target = std::make_unique<NameExpr>(token->offset, token->text);
  } else if (with_tuple) {
    TP_ASSIGN_OR_RETURN(target, ParseTuple(true, true, extra_end_rules, false, with_namespace));
  } else {
    TP_ASSIGN_OR_RETURN(target, ParsePrimary(with_namespace));
  }
  if (const char* what = CannotAssign(*target)) {
    return FailAt(target->offset, Cat("can't assign to ", StrRepr(what)));
  }
  return target;
}

// jinja2's Node.can_assign, as the lowercased node class name when it fails.
const char* Parser::CannotAssign(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kName:
    case ExprKind::kNSRef:
      return nullptr;
    case ExprKind::kTuple:
      for (const ExprPtr& item : static_cast<const ListExpr&>(e).items) {
        if (CannotAssign(*item)) return "tuple";
      }
      return nullptr;
    case ExprKind::kConst:
      return "const";
    case ExprKind::kList:
      return "list";
    case ExprKind::kDict:
      return "dict";
    case ExprKind::kGetattr:
      return "getattr";
    case ExprKind::kGetitem:
      return "getitem";
    case ExprKind::kCall:
      return "call";
    case ExprKind::kFilter:
      return "filter";
    case ExprKind::kTest:
      return "test";
    case ExprKind::kCondExpr:
      return "condexpr";
    case ExprKind::kConcat:
      return "concat";
    case ExprKind::kCompare:
      return "compare";
    case ExprKind::kNot:
      return "not";
    case ExprKind::kNeg:
      return "neg";
    case ExprKind::kPos:
      return "pos";
    case ExprKind::kAnd:
      return "and";
    case ExprKind::kOr:
      return "or";
    case ExprKind::kSlice:
      return "slice";
    case ExprKind::kBinary:
      return "binexpr";
  }
  return "expr";
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  if (with_condexpr) return ParseCondExpr();
  return ParseOr();
}

absl::StatusOr<ExprPtr> Parser::ParseCondExpr() {
  DepthGuard guard(recursion_);
  TP_RETURN_IF_ERROR(CheckRecursion());
  size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr expr1, ParseOr());
  while (SkipIf(NameIs("if"))) {
    auto node = std::make_unique<CondExpr>(offset);
    TP_ASSIGN_OR_RETURN(node->test, ParseOr());
    if (SkipIf(NameIs("else"))) {
      TP_ASSIGN_OR_RETURN(node->expr2, ParseCondExpr());
    }
    node->expr1 = std::move(expr1);
    TP_RETURN_IF_ERROR(SetDepth(*node, std::max({D(node->test), D(node->expr1), D(node->expr2)})));
    expr1 = std::move(node);
    offset = cur().offset;
  }
  return expr1;
}

absl::StatusOr<ExprPtr> Parser::ParseLogical(bool is_or) {
  size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr left, is_or ? ParseLogical(false) : ParseNot());
  while (SkipIf(NameIs(is_or ? "or" : "and"))) {
    TP_ASSIGN_OR_RETURN(ExprPtr right, is_or ? ParseLogical(false) : ParseNot());
    auto node = std::make_unique<BinaryExpr>(is_or ? ExprKind::kOr : ExprKind::kAnd, offset);
    node->left = std::move(left);
    node->right = std::move(right);
    TP_RETURN_IF_ERROR(SetDepth(*node, std::max(D(node->left), D(node->right))));
    left = std::move(node);
    offset = cur().offset;
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(recursion_);
    TP_RETURN_IF_ERROR(CheckRecursion());
    const size_t offset = Next().offset;
    TP_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
    auto node = std::make_unique<UnaryExpr>(ExprKind::kNot, offset, std::move(operand));
    TP_RETURN_IF_ERROR(SetDepth(*node, D(node->operand)));
    return ExprPtr(std::move(node));
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  const size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr expr, ParseMath1());
  std::unique_ptr<CompareExpr> node;
  int depth = D(expr);
  while (true) {
    CompareOp op;
    const Tok t = cur().type;
    if (t == Tok::kEq || t == Tok::kNe || t == Tok::kLt || t == Tok::kLtEq || t == Tok::kGt ||
        t == Tok::kGtEq) {
      op = t == Tok::kEq     ? CompareOp::kEq
           : t == Tok::kNe   ? CompareOp::kNe
           : t == Tok::kLt   ? CompareOp::kLt
           : t == Tok::kLtEq ? CompareOp::kLtEq
           : t == Tok::kGt   ? CompareOp::kGt
                             : CompareOp::kGtEq;
      Next();
    } else if (SkipIf(NameIs("in"))) {
      op = CompareOp::kIn;
    } else if (IsName("not") && Test(look(), NameIs("in"))) {
      Next();
      Next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    TP_ASSIGN_OR_RETURN(ExprPtr right, ParseMath1());
    if (!node) {
      node = std::make_unique<CompareExpr>(offset);
      node->first = std::move(expr);
    }
    depth = std::max(depth, D(right));
    node->rest.emplace_back(op, std::move(right));
  }
  if (!node) return expr;
  TP_RETURN_IF_ERROR(SetDepth(*node, depth));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::Binary(BinaryOp op, size_t offset, ExprPtr left, ExprPtr right) {
  auto node = std::make_unique<BinaryExpr>(ExprKind::kBinary, offset);
  node->op = op;
  node->left = std::move(left);
  node->right = std::move(right);
  TP_RETURN_IF_ERROR(SetDepth(*node, std::max(D(node->left), D(node->right))));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (cur().type == Tok::kAdd || cur().type == Tok::kSub) {
    const BinaryOp op = Next().type == Tok::kAdd ? BinaryOp::kAdd : BinaryOp::kSub;
    TP_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    TP_ASSIGN_OR_RETURN(left, Binary(op, offset, std::move(left), std::move(right)));
    offset = cur().offset;
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  const size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (cur().type != Tok::kTilde) return first;
  auto node = std::make_unique<ConcatExpr>(offset);
  int depth = D(first);
  node->parts.push_back(std::move(first));
  while (cur().type == Tok::kTilde) {
    Next();
    TP_ASSIGN_OR_RETURN(ExprPtr part, ParseMath2());
    depth = std::max(depth, D(part));
    node->parts.push_back(std::move(part));
  }
  TP_RETURN_IF_ERROR(SetDepth(*node, depth));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (true) {
    const Tok t = cur().type;
    BinaryOp op;
    if (t == Tok::kMul) {
      op = BinaryOp::kMul;
    } else if (t == Tok::kDiv) {
      op = BinaryOp::kDiv;
    } else if (t == Tok::kFloorDiv) {
      op = BinaryOp::kFloorDiv;
    } else if (t == Tok::kMod) {
      op = BinaryOp::kMod;
    } else {
      break;
    }
    Next();
    TP_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    TP_ASSIGN_OR_RETURN(left, Binary(op, offset, std::move(left), std::move(right)));
    offset = cur().offset;
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  size_t offset = cur().offset;
  TP_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (cur().type == Tok::kPow) {
    Next();
    TP_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    TP_ASSIGN_OR_RETURN(left, Binary(BinaryOp::kPow, offset, std::move(left), std::move(right)));
    offset = cur().offset;
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(recursion_);
  TP_RETURN_IF_ERROR(CheckRecursion());
  const Tok t = cur().type;
  const size_t offset = cur().offset;
  ExprPtr node;
  if (t == Tok::kSub || t == Tok::kAdd) {
    Next();
    TP_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
    auto unary = std::make_unique<UnaryExpr>(t == Tok::kSub ? ExprKind::kNeg : ExprKind::kPos,
                                             offset, std::move(operand));
    TP_RETURN_IF_ERROR(SetDepth(*unary, D(unary->operand)));
    node = std::move(unary);
  } else {
    TP_ASSIGN_OR_RETURN(node, ParsePrimary(false));
  }
  TP_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    TP_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary(bool with_namespace) {
  const Token& token = cur();
  if (token.type == Tok::kName) {
    Next();
    const std::string& v = token.text;
    if (v == "true" || v == "false" || v == "True" || v == "False") {
      return ExprPtr(
          std::make_unique<ConstExpr>(token.offset, Value::Bool(v == "true" || v == "True")));
    }
    if (v == "none" || v == "None") {
      return ExprPtr(std::make_unique<ConstExpr>(token.offset, Value::None()));
    }
    if (with_namespace && cur().type == Tok::kDot) {
      Next();
      TP_ASSIGN_OR_RETURN(const Token* attr, Expect(Tok::kName));
      return ExprPtr(std::make_unique<NSRefExpr>(token.offset, v, attr->text));
    }
    return ExprPtr(std::make_unique<NameExpr>(token.offset, v));
  }
  if (token.type == Tok::kString) {
    const size_t offset = token.offset;
    std::string value = Next().text;
    while (cur().type == Tok::kString) value += Next().text;
    return ExprPtr(std::make_unique<ConstExpr>(offset, Value::String(std::move(value))));
  }
  if (token.type == Tok::kInteger) {
    Next();
    return ExprPtr(std::make_unique<ConstExpr>(token.offset, Value::Int(token.int_value)));
  }
  if (token.type == Tok::kFloat) {
    Next();
    return ExprPtr(std::make_unique<ConstExpr>(token.offset, Value::Float(token.float_value)));
  }
  if (token.type == Tok::kLParen) {
    Next();
    TP_ASSIGN_OR_RETURN(ExprPtr node, ParseTuple(false, true, nullptr, true, false));
    TP_RETURN_IF_ERROR(Expect(Tok::kRParen).status());
    return node;
  }
  if (token.type == Tok::kLBracket) return ParseList();
  if (token.type == Tok::kLBrace) return ParseDict();
  return Fail(Cat("unexpected ", StrRepr(DescribeToken(token))));
}

bool Parser::IsTupleEnd(const EndTokens* extra_end_rules) const {
  const Tok t = cur().type;
  if (t == Tok::kVariableEnd || t == Tok::kBlockEnd || t == Tok::kRParen) return true;
  return extra_end_rules != nullptr && TestAny(*extra_end_rules);
}

absl::StatusOr<ExprPtr> Parser::ParseTuple(bool simplified, bool with_condexpr,
                                           const EndTokens* extra_end_rules,
                                           bool explicit_parentheses, bool with_namespace) {
  size_t offset = cur().offset;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    if (IsTupleEnd(extra_end_rules)) break;
    ExprPtr item;
    if (simplified) {
      TP_ASSIGN_OR_RETURN(item, ParsePrimary(with_namespace));
    } else {
      TP_ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    }
    args.push_back(std::move(item));
    if (cur().type == Tok::kComma) {
      is_tuple = true;
    } else {
      break;
    }
    offset = cur().offset;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) {
      return Fail(Cat("Expected an expression, got ", StrRepr(DescribeToken(cur()))));
    }
  }
  auto node = std::make_unique<ListExpr>(ExprKind::kTuple, args.empty() ? offset : args[0]->offset);
  int depth = 0;
  for (const ExprPtr& a : args) depth = std::max(depth, D(a));
  node->items = std::move(args);
  TP_RETURN_IF_ERROR(SetDepth(*node, depth));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::ParseList() {
  TP_ASSIGN_OR_RETURN(const Token* token, Expect(Tok::kLBracket));
  auto node = std::make_unique<ListExpr>(ExprKind::kList, token->offset);
  int depth = 0;
  while (cur().type != Tok::kRBracket) {
    if (!node->items.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    if (cur().type == Tok::kRBracket) break;
    TP_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    depth = std::max(depth, D(item));
    node->items.push_back(std::move(item));
  }
  TP_RETURN_IF_ERROR(Expect(Tok::kRBracket).status());
  TP_RETURN_IF_ERROR(SetDepth(*node, depth));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::ParseDict() {
  TP_ASSIGN_OR_RETURN(const Token* token, Expect(Tok::kLBrace));
  auto node = std::make_unique<DictExpr>(token->offset);
  int depth = 0;
  while (cur().type != Tok::kRBrace) {
    if (!node->items.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    if (cur().type == Tok::kRBrace) break;
    TP_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    TP_RETURN_IF_ERROR(Expect(Tok::kColon).status());
    TP_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    depth = std::max({depth, D(key), D(value)});
    node->items.emplace_back(std::move(key), std::move(value));
  }
  TP_RETURN_IF_ERROR(Expect(Tok::kRBrace).status());
  TP_RETURN_IF_ERROR(SetDepth(*node, depth));
  return ExprPtr(std::move(node));
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    const Tok t = cur().type;
    if (t == Tok::kDot || t == Tok::kLBracket) {
      TP_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (t == Tok::kLParen) {
      TP_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      break;
    }
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    const Tok t = cur().type;
    if (t == Tok::kPipe) {
      TP_ASSIGN_OR_RETURN(node, ParseFilter(std::move(node), false));
    } else if (IsName("is")) {
      TP_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (t == Tok::kLParen) {
      TP_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      break;
    }
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseSubscript(ExprPtr node) {
  const Token& token = Next();
  if (token.type == Tok::kDot) {
    const Token& attr = cur();
    Next();
    if (attr.type == Tok::kName) {
      auto getattr = std::make_unique<GetattrExpr>(token.offset);
      getattr->object = std::move(node);
      getattr->attr = attr.text;
      TP_RETURN_IF_ERROR(SetDepth(*getattr, D(getattr->object)));
      return ExprPtr(std::move(getattr));
    }
    if (attr.type != Tok::kInteger) return FailAt(attr.offset, "expected name or number");
    auto getitem = std::make_unique<GetitemExpr>(token.offset);
    getitem->object = std::move(node);
    getitem->index = std::make_unique<ConstExpr>(attr.offset, Value::Int(attr.int_value));
    TP_RETURN_IF_ERROR(SetDepth(*getitem, D(getitem->object)));
    return ExprPtr(std::move(getitem));
  }
  // lbracket
  std::vector<ExprPtr> args;
  while (cur().type != Tok::kRBracket) {
    if (!args.empty()) TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
    TP_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  TP_RETURN_IF_ERROR(Expect(Tok::kRBracket).status());
  auto getitem = std::make_unique<GetitemExpr>(token.offset);
  getitem->object = std::move(node);
  if (args.size() == 1) {
    getitem->index = std::move(args[0]);
  } else {
    auto tuple = std::make_unique<ListExpr>(ExprKind::kTuple, token.offset);
    int depth = 0;
    for (const ExprPtr& a : args) depth = std::max(depth, D(a));
    tuple->items = std::move(args);
    TP_RETURN_IF_ERROR(SetDepth(*tuple, depth));
    getitem->index = std::move(tuple);
  }
  TP_RETURN_IF_ERROR(SetDepth(*getitem, std::max(D(getitem->object), D(getitem->index))));
  return ExprPtr(std::move(getitem));
}

absl::StatusOr<ExprPtr> Parser::ParseSubscribed() {
  const size_t offset = cur().offset;
  std::vector<ExprPtr> args;
  if (cur().type == Tok::kColon) {
    Next();
    args.push_back(nullptr);
  } else {
    TP_ASSIGN_OR_RETURN(ExprPtr node, ParseExpression(true));
    if (cur().type != Tok::kColon) return node;
    Next();
    args.push_back(std::move(node));
  }
  if (cur().type == Tok::kColon) {
    args.push_back(nullptr);
  } else if (cur().type != Tok::kRBracket && cur().type != Tok::kComma) {
    TP_ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
    args.push_back(std::move(stop));
  } else {
    args.push_back(nullptr);
  }
  if (cur().type == Tok::kColon) {
    Next();
    if (cur().type != Tok::kRBracket && cur().type != Tok::kComma) {
      TP_ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
      args.push_back(std::move(step));
    } else {
      args.push_back(nullptr);
    }
  } else {
    args.push_back(nullptr);
  }
  auto slice = std::make_unique<SliceExpr>(offset);
  slice->start = std::move(args[0]);
  slice->stop = std::move(args[1]);
  slice->step = std::move(args[2]);
  TP_RETURN_IF_ERROR(SetDepth(*slice, std::max({D(slice->start), D(slice->stop), D(slice->step)})));
  return ExprPtr(std::move(slice));
}

absl::StatusOr<int> Parser::ParseCallArgs(CallArgsExpr& out) {
  TP_ASSIGN_OR_RETURN(const Token* token, Expect(Tok::kLParen));
  const size_t offset = token->offset;
  bool require_comma = false;
  int depth = 0;
  auto ensure = [&](bool ok) -> absl::Status {
    if (!ok) return FailAt(offset, "invalid syntax for function call expression");
    return absl::OkStatus();
  };
  while (cur().type != Tok::kRParen) {
    if (require_comma) {
      TP_RETURN_IF_ERROR(Expect(Tok::kComma).status());
      if (cur().type == Tok::kRParen) break;
    }
    if (cur().type == Tok::kMul) {
      TP_RETURN_IF_ERROR(ensure(!out.dyn_args && !out.dyn_kwargs));
      Next();
      TP_ASSIGN_OR_RETURN(out.dyn_args, ParseExpression(true));
      depth = std::max(depth, D(out.dyn_args));
    } else if (cur().type == Tok::kPow) {
      TP_RETURN_IF_ERROR(ensure(!out.dyn_kwargs));
      Next();
      TP_ASSIGN_OR_RETURN(out.dyn_kwargs, ParseExpression(true));
      depth = std::max(depth, D(out.dyn_kwargs));
    } else if (cur().type == Tok::kName && look().type == Tok::kAssign) {
      TP_RETURN_IF_ERROR(ensure(!out.dyn_kwargs));
      std::string key = cur().text;
      Next();
      Next();
      TP_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      depth = std::max(depth, D(value));
      out.keyword.emplace_back(std::move(key), std::move(value));
    } else {
      TP_RETURN_IF_ERROR(ensure(!out.dyn_args && !out.dyn_kwargs && out.keyword.empty()));
      TP_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      depth = std::max(depth, D(value));
      out.positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  TP_RETURN_IF_ERROR(Expect(Tok::kRParen).status());
  return depth;
}

absl::StatusOr<ExprPtr> Parser::ParseCall(ExprPtr node) {
  auto call = std::make_unique<CallExpr>(node->offset);  // errors point at the callee
  TP_ASSIGN_OR_RETURN(int depth, ParseCallArgs(call->args));
  call->callee = std::move(node);
  TP_RETURN_IF_ERROR(SetDepth(*call, std::max(depth, D(call->callee))));
  return ExprPtr(std::move(call));
}

absl::StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr node, bool start_inline) {
  while (cur().type == Tok::kPipe || start_inline) {
    if (!start_inline) Next();
    TP_ASSIGN_OR_RETURN(const Token* token, Expect(Tok::kName));
    auto filter = std::make_unique<FilterExpr>(token->offset);
    filter->name = token->text;
    while (cur().type == Tok::kDot) {
      Next();
      TP_ASSIGN_OR_RETURN(const Token* part, Expect(Tok::kName));
      filter->name += "." + part->text;
    }
    int depth = D(node);
    if (cur().type == Tok::kLParen) {
      TP_ASSIGN_OR_RETURN(int args_depth, ParseCallArgs(filter->args));
      depth = std::max(depth, args_depth);
    }
    filter->fn = FindFilter(filter->name);
    if (filter->fn == nullptr) {
      if (IsUnsupportedFilter(filter->name)) {
        return FailAt(filter->offset, Cat("filter ", StrRepr(filter->name), " is not supported"));
      }
      return FailAt(filter->offset, Cat("No filter named ", StrRepr(filter->name), "."));
    }
    filter->node = std::move(node);
    TP_RETURN_IF_ERROR(SetDepth(*filter, depth));
    node = std::move(filter);
    start_inline = false;
  }
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr node) {
  const size_t offset = Next().offset;  // `is`
  const bool negated = SkipIf(NameIs("not"));
  TP_ASSIGN_OR_RETURN(const Token* name_token, Expect(Tok::kName));
  auto test = std::make_unique<TestExpr>(offset);
  const size_t name_offset = name_token->offset;
  test->name = name_token->text;
  while (cur().type == Tok::kDot) {
    Next();
    TP_ASSIGN_OR_RETURN(const Token* part, Expect(Tok::kName));
    test->name += "." + part->text;
  }
  int depth = D(node);
  const Tok t = cur().type;
  if (t == Tok::kLParen) {
    TP_ASSIGN_OR_RETURN(int args_depth, ParseCallArgs(test->args));
    depth = std::max(depth, args_depth);
  } else if ((t == Tok::kName || t == Tok::kString || t == Tok::kInteger || t == Tok::kFloat ||
              t == Tok::kLParen || t == Tok::kLBracket || t == Tok::kLBrace) &&
             !IsName("else") && !IsName("or") && !IsName("and")) {
    if (IsName("is")) return Fail("You cannot chain multiple tests with is");
    TP_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary(false));
    TP_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    depth = std::max(depth, D(arg));
    test->args.positional.push_back(std::move(arg));
  }
  test->fn = FindTest(test->name);
  if (test->fn == nullptr) {
    return FailAt(name_offset, Cat("No test named ", StrRepr(test->name), "."));
  }
  test->node = std::move(node);
  TP_RETURN_IF_ERROR(SetDepth(*test, depth));
  if (!negated) return ExprPtr(std::move(test));
  auto not_node = std::make_unique<UnaryExpr>(ExprKind::kNot, offset, std::move(test));
  TP_RETURN_IF_ERROR(SetDepth(*not_node, D(not_node->operand)));
  return ExprPtr(std::move(not_node));
}

}  // namespace tpserve::jinja
