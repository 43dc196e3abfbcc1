// The Jinja lexer: template source -> tokens, reproducing jinja2 3.1's regex lexer for the
// default delimiters ({{ }}, {% %}, {# #}), including whitespace control ({%- -%}, {%+ +%}),
// trim_blocks, lstrip_blocks, {% raw %} and the removal of one trailing newline.
//
//   TP_ASSIGN_OR_RETURN(LexedTemplate lexed, Lex(source, options));
//   for (const Token& t : lexed.tokens) ...   // ends with kEof
//
// Offsets are byte offsets into lexed.source: the source with \r\n and \r turned into \n (as
// jinja2 does before lexing); LineColumn() turns one into the "line L, column C" of errors.
// Threading: pure functions.
#ifndef TPSERVE_COORDINATOR_JINJA_LEXER_H_
#define TPSERVE_COORDINATOR_JINJA_LEXER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/jinja/template.h"

namespace tpserve::jinja {

enum class Tok : uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kAdd,
  kSub,
  kDiv,
  kFloorDiv,
  kMul,
  kMod,
  kPow,
  kTilde,
  kLBracket,
  kRBracket,
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kEq,
  kNe,
  kGt,
  kGtEq,
  kLt,
  kLtEq,
  kAssign,
  kDot,
  kColon,
  kPipe,
  kComma,
  kSemicolon,
  kEof,
};

struct Token {
  Tok type;
  size_t offset;     // into LexedTemplate::source
  std::string text;  // kData: the text; kName: the name; kString: the decoded value
  int64_t int_value = 0;
  double float_value = 0;
};

struct LexedTemplate {
  std::string source;  // newlines normalized
  std::vector<Token> tokens;
};

// INVALID_ARGUMENT "line L, column C: ..." as jinja2's lexer reports (unexpected char,
// unbalanced brackets, "Missing end of comment tag", bad string escapes...).
absl::StatusOr<LexedTemplate> Lex(std::string_view source, const Options& options);

// 1-based line and column (in code points) of a byte offset.
struct LineColumn {
  int line;
  int column;
};
LineColumn LocateOffset(std::string_view source, size_t offset);
// "line L, column C: " + message, as an INVALID_ARGUMENT status.
absl::Status ErrorAt(std::string_view source, size_t offset, std::string_view message);

// jinja2's describe_token: a name's value, an operator's text, or words for the others
// ("end of print statement").
std::string DescribeToken(const Token& token);
std::string DescribeTokenType(Tok type);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_LEXER_H_
