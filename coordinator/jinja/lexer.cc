// A hand-written equivalent of jinja2.lexer.Lexer.tokeniter + wrap for the default syntax.
// Each state below names the jinja2 rule it mirrors.
#include "coordinator/jinja/lexer.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {

LineColumn LocateOffset(std::string_view source, size_t offset) {
  if (offset > source.size()) offset = source.size();
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const int column =
      static_cast<int>(CountCodePoints(source.substr(line_start, offset - line_start))) + 1;
  return {line, column};
}

absl::Status ErrorAt(std::string_view source, size_t offset, std::string_view message) {
  const LineColumn lc = LocateOffset(source, offset);
  return absl::InvalidArgumentError(Cat("line ", lc.line, ", column ", lc.column, ": ", message));
}

std::string DescribeTokenType(Tok type) {
  switch (type) {
    case Tok::kData:
      return "template data / text";
    case Tok::kVariableBegin:
      return "begin of print statement";
    case Tok::kVariableEnd:
      return "end of print statement";
    case Tok::kBlockBegin:
      return "begin of statement block";
    case Tok::kBlockEnd:
      return "end of statement block";
    case Tok::kName:
      return "name";
    case Tok::kString:
      return "string";
    case Tok::kInteger:
      return "integer";
    case Tok::kFloat:
      return "float";
    case Tok::kAdd:
      return "+";
    case Tok::kSub:
      return "-";
    case Tok::kDiv:
      return "/";
    case Tok::kFloorDiv:
      return "//";
    case Tok::kMul:
      return "*";
    case Tok::kMod:
      return "%";
    case Tok::kPow:
      return "**";
    case Tok::kTilde:
      return "~";
    case Tok::kLBracket:
      return "[";
    case Tok::kRBracket:
      return "]";
    case Tok::kLParen:
      return "(";
    case Tok::kRParen:
      return ")";
    case Tok::kLBrace:
      return "{";
    case Tok::kRBrace:
      return "}";
    case Tok::kEq:
      return "==";
    case Tok::kNe:
      return "!=";
    case Tok::kGt:
      return ">";
    case Tok::kGtEq:
      return ">=";
    case Tok::kLt:
      return "<";
    case Tok::kLtEq:
      return "<=";
    case Tok::kAssign:
      return "=";
    case Tok::kDot:
      return ".";
    case Tok::kColon:
      return ":";
    case Tok::kPipe:
      return "|";
    case Tok::kComma:
      return ",";
    case Tok::kSemicolon:
      return ";";
    case Tok::kEof:
      return "end of template";
  }
  return "?";
}

std::string DescribeToken(const Token& token) {
  if (token.type == Tok::kName) return token.text;
  return DescribeTokenType(token.type);
}

namespace {

// jinja2 splits the source on \r\n, \r and \n, joins with \n, and (without
// keep_trailing_newline) drops one final empty line.
std::string NormalizeNewlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(std::string source, const Options& options) : src_(std::move(source)), options_(options) {}

  absl::StatusOr<LexedTemplate> Run() {
    enum class State { kRoot, kBlock, kVariable, kComment, kRaw };
    State state = State::kRoot;
    while (true) {
      absl::StatusOr<bool> more = true;
      switch (state) {
        case State::kRoot: {
          char kind = 0;
          more = LexRoot(kind);
          if (more.ok() && *more) {
            state = kind == '{'   ? State::kVariable
                    : kind == '%' ? State::kBlock
                    : kind == '#' ? State::kComment
                                  : State::kRaw;
          }
          break;
        }
        case State::kBlock:
        case State::kVariable:
          more = LexTag(state == State::kBlock);
          state = State::kRoot;
          break;
        case State::kComment:
          more = LexComment();
          state = State::kRoot;
          break;
        case State::kRaw:
          more = LexRaw();
          state = State::kRoot;
          break;
      }
      if (!more.ok()) return more.status();
      if (!*more) break;
    }
    Emit(Tok::kEof, src_.size());
    LexedTemplate out;
    out.source = std::move(src_);
    out.tokens = std::move(tokens_);
    return out;
  }

 private:
  Token& Emit(Tok type, size_t offset, std::string text = "") {
    tokens_.push_back(Token{type, offset, std::move(text)});
    return tokens_.back();
  }

  absl::Status Error(size_t offset, std::string_view message) {
    return ErrorAt(src_, offset, message);
  }

  size_t SkipSpaces(size_t pos) const {
    while (pos < src_.size()) {
      size_t next = pos;
      if (!IsPySpace(DecodeUtf8(src_, next))) break;
      pos = next;
    }
    return pos;
  }

  bool StartsWith(size_t pos, std::string_view s) const {
    return src_.compare(pos, s.size(), s) == 0;
  }

  // Python's str.rstrip() of src_[begin, end): the new end.
  size_t RStrip(size_t begin, size_t end) const {
    size_t last = begin;
    for (size_t pos = begin; pos < end;) {
      if (!IsPySpace(DecodeUtf8(src_, pos))) last = pos;
    }
    return last;
  }

  bool AllSpaces(size_t begin, size_t end) const {
    for (size_t pos = begin; pos < end;) {
      if (!IsPySpace(DecodeUtf8(src_, pos))) return false;
    }
    return true;
  }

  // The data before a tag, after {%- (strip all) or lstrip_blocks (strip the indentation of a
  // line holding only the tag). Mirrors the OptionalLStrip handling of tokeniter.
  void EmitDataBeforeTag(size_t begin, size_t end, char sign, bool lstrip_applies) {
    if (sign == '-') {
      end = RStrip(begin, end);
    } else if (sign != '+' && options_.lstrip_blocks && lstrip_applies) {
      size_t line_pos = begin;
      for (size_t i = end; i > begin; --i) {
        if (src_[i - 1] == '\n') {
          line_pos = i;
          break;
        }
      }
      if ((line_pos > begin || line_starting_) && line_pos < end && AllSpaces(line_pos, end)) {
        end = line_pos;
      }
    }
    if (end > begin) Emit(Tok::kData, begin, src_.substr(begin, end - begin));
  }

  // Root state. Returns false at the end of the source; otherwise kind is the tag opened
  // ('{', '%', '#', or 'r' for {% raw %}).
  absl::StatusOr<bool> LexRoot(char& kind) {
    size_t p = pos_;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#'))
        break;
      ++p;
    }
    if (p == std::string::npos) {
      if (pos_ < src_.size()) Emit(Tok::kData, pos_, src_.substr(pos_));
      return false;
    }
    kind = src_[p + 1];
    size_t q = p + 2;
    char sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
    const size_t tag_end = q;
    // (?P<raw_begin>{%(\-|\+|)\s*raw\s*(?:\-%}\s*|%}))
    bool raw = false;
    if (kind == '%') {
      size_t r = SkipSpaces(q);
      if (StartsWith(r, "raw")) {
        r = SkipSpaces(r + 3);
        if (StartsWith(r, "-%}")) {
          raw = true;
          q = SkipSpaces(r + 3);
        } else if (StartsWith(r, "%}")) {
          raw = true;
          q = r + 2;
        }
      }
    }
    EmitDataBeforeTag(pos_, p, sign, kind != '{');
    if (raw) {
      kind = 'r';
      line_starting_ = src_[q - 1] == '\n';
      pos_ = q;
      return true;
    }
    if (kind != '#') Emit(kind == '{' ? Tok::kVariableBegin : Tok::kBlockBegin, p);
    line_starting_ = false;
    pos_ = tag_end;
    return true;
  }

  // The end of a tag at pos_, or 0 when there is none.
  size_t MatchTagEnd(bool block) const {
    if (block) {
      if (StartsWith(pos_, "+%}")) return pos_ + 3;
      if (StartsWith(pos_, "-%}")) return SkipSpaces(pos_ + 3);
      if (StartsWith(pos_, "%}")) {
        size_t end = pos_ + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
        return end;
      }
      return 0;
    }
    if (StartsWith(pos_, "-}}")) return SkipSpaces(pos_ + 3);
    if (StartsWith(pos_, "}}")) return pos_ + 2;
    return 0;
  }

  // (\d+_)*\d+ at pos: its end, or pos when there is no digit.
  size_t MatchDigits(size_t pos) const {
    if (pos >= src_.size() || !IsDigit(src_[pos])) return pos;
    while (pos < src_.size()) {
      if (IsDigit(src_[pos])) {
        ++pos;
      } else if (src_[pos] == '_' && pos + 1 < src_.size() && IsDigit(src_[pos + 1])) {
        ++pos;
      } else {
        break;
      }
    }
    return pos;
  }

  size_t MatchExponent(size_t pos) const {
    if (pos >= src_.size() || (src_[pos] != 'e' && src_[pos] != 'E')) return 0;
    ++pos;
    if (pos < src_.size() && (src_[pos] == '+' || src_[pos] == '-')) ++pos;
    const size_t end = MatchDigits(pos);
    return end == pos ? 0 : end;
  }

  // float_re; 0 when it does not match.
  size_t MatchFloat() const {
    if (pos_ > 0 && src_[pos_ - 1] == '.') return 0;
    const size_t int_end = MatchDigits(pos_);
    if (int_end == pos_) return 0;
    if (int_end < src_.size() && src_[int_end] == '.') {
      const size_t frac_end = MatchDigits(int_end + 1);
      if (frac_end > int_end + 1) {
        if (size_t e = MatchExponent(frac_end)) return e;
      }
    }
    if (size_t e = MatchExponent(int_end)) return e;
    if (int_end < src_.size() && src_[int_end] == '.') {
      const size_t frac_end = MatchDigits(int_end + 1);
      if (frac_end > int_end + 1) return frac_end;
    }
    return 0;
  }

  // integer_re; 0 when it does not match. base: 2, 8, 10 or 16.
  size_t MatchInteger(int& base) const {
    auto run = [&](size_t pos, auto is_digit) -> size_t {
      size_t start = pos;
      while (pos < src_.size()) {
        if (is_digit(src_[pos])) {
          ++pos;
        } else if (src_[pos] == '_' && pos + 1 < src_.size() && is_digit(src_[pos + 1])) {
          pos += 2;
        } else {
          break;
        }
      }
      return pos == start ? 0 : pos;
    };
    const char c = src_[pos_];
    if (c == '0' && pos_ + 1 < src_.size()) {
      const char x = src_[pos_ + 1] | 0x20;
      size_t end = 0;
      if (x == 'b') {
        end = run(pos_ + 2, [](char d) { return d == '0' || d == '1'; });
        base = 2;
      } else if (x == 'o') {
        end = run(pos_ + 2, [](char d) { return d >= '0' && d <= '7'; });
        base = 8;
      } else if (x == 'x') {
        end = run(pos_ + 2,
                  [](char d) { return IsDigit(d) || ((d | 0x20) >= 'a' && (d | 0x20) <= 'f'); });
        base = 16;
      }
      if (end != 0) return end;
    }
    base = 10;
    if (c >= '1' && c <= '9') {
      size_t end = run(pos_, [](char d) { return IsDigit(d); });
      return end;
    }
    if (c == '0') {
      size_t end = pos_ + 1;
      while (end < src_.size()) {
        if (src_[end] == '0') {
          ++end;
        } else if (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0') {
          end += 2;
        } else {
          break;
        }
      }
      return end;
    }
    return 0;
  }

  static bool IsNameChar(char32_t c) {
    if (c < 0x80)
      return c == '_' || IsDigit(static_cast<char>(c)) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    return IsPyAlpha(c) || IsPyDecimal(c) || IsPyDigit(c) || IsPyNumeric(c);
  }

  size_t MatchName() const {
    size_t pos = pos_;
    while (pos < src_.size()) {
      size_t next = pos;
      if (!IsNameChar(DecodeUtf8(src_, next))) break;
      pos = next;
    }
    return pos;
  }

  // string_re: the closing quote's end, or 0.
  size_t MatchString() const {
    const char quote = src_[pos_];
    if (quote != '"' && quote != '\'') return 0;
    for (size_t p = pos_ + 1; p < src_.size();) {
      if (src_[p] == '\\') {
        if (p + 1 >= src_.size()) return 0;
        p += 2;
      } else if (src_[p] == quote) {
        return p + 1;
      } else {
        ++p;
      }
    }
    return 0;
  }

  static int HexValue(char c) {
    if (IsDigit(c)) return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  }

  // value.encode("ascii", "backslashreplace").decode("unicode-escape").
  absl::StatusOr<std::string> Unescape(std::string_view body, size_t offset) {
    std::string ascii;  // non-ASCII characters written as their backslash escapes
    for (size_t pos = 0; pos < body.size();) {
      if (static_cast<unsigned char>(body[pos]) < 0x80) {
        ascii.push_back(body[pos++]);
        continue;
      }
      const char32_t c = DecodeUtf8(body, pos);
      char buf[16];
      if (c <= 0xFF) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      } else if (c <= 0xFFFF) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      }
      ascii += buf;
    }
    std::string out;
    for (size_t i = 0; i < ascii.size();) {
      const char c = ascii[i];
      if (c != '\\') {
        out.push_back(c);
        ++i;
        continue;
      }
      if (i + 1 >= ascii.size()) return Error(offset, "\\ at end of string");
      const char e = ascii[i + 1];
      i += 2;
      switch (e) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t value = 0;
          for (int k = 0; k < digits; ++k) {
            const int h = i + k < ascii.size() ? HexValue(ascii[i + k]) : -1;
            if (h < 0) {
              return Error(offset, e == 'x'   ? "truncated \\xXX escape"
                                   : e == 'u' ? "truncated \\uXXXX escape"
                                              : "truncated \\UXXXXXXXX escape");
            }
            value = value * 16 + h;
          }
          i += digits;
          if (value > 0x10FFFF) return Error(offset, "illegal Unicode character");
          AppendUtf8(value, out);
          break;
        }
        case 'N':
          return Error(offset, "named Unicode escapes (\\N{...}) are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t value = e - '0';
            for (int k = 0; k < 2 && i < ascii.size() && ascii[i] >= '0' && ascii[i] <= '7'; ++k) {
              value = value * 8 + (ascii[i++] - '0');
            }
            AppendUtf8(value, out);
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  // Block or variable state: tokens up to and including the end tag. False at end of source.
  absl::StatusOr<bool> LexTag(bool block) {
    while (true) {
      if (pos_ >= src_.size()) return false;
      if (balance_.empty()) {
        if (size_t end = MatchTagEnd(block)) {
          Emit(block ? Tok::kBlockEnd : Tok::kVariableEnd, pos_);
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return true;
        }
      }
      size_t next = pos_;
      if (IsPySpace(DecodeUtf8(src_, next))) {
        pos_ = SkipSpaces(pos_);
        continue;
      }
      if (size_t end = MatchFloat()) {
        std::string text;
        for (size_t i = pos_; i < end; ++i) {
          if (src_[i] != '_') text.push_back(src_[i]);
        }
        Emit(Tok::kFloat, pos_).float_value = std::strtod(text.c_str(), nullptr);
        pos_ = end;
        continue;
      }
      int base = 10;
      if (size_t end = MatchInteger(base)) {
        std::string digits;
        for (size_t i = pos_ + (base == 10 ? 0 : 2); i < end; ++i) {
          if (src_[i] != '_') digits.push_back(src_[i]);
        }
        errno = 0;
        char* stop = nullptr;
        const unsigned long long v = std::strtoull(digits.c_str(), &stop, base);
        if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
          return Error(pos_, "integer literal too large (the interpreter uses 64-bit integers)");
        }
        Emit(Tok::kInteger, pos_).int_value = static_cast<int64_t>(v);
        pos_ = end;
        continue;
      }
      if (size_t end = MatchName(); end > pos_) {
        size_t first = pos_;
        const char32_t c = DecodeUtf8(src_, first);
        if (c < 0x80 ? IsDigit(static_cast<char>(c)) : !IsPyAlpha(c)) {
          return Error(pos_, "Invalid character in identifier");
        }
        Emit(Tok::kName, pos_, src_.substr(pos_, end - pos_));
        pos_ = end;
        continue;
      }
      if (size_t end = MatchString()) {
        absl::StatusOr<std::string> value =
            Unescape(std::string_view(src_).substr(pos_ + 1, end - pos_ - 2), pos_);
        if (!value.ok()) return value.status();
        Emit(Tok::kString, pos_, std::move(*value));
        pos_ = end;
        continue;
      }
      if (absl::Status s = LexOperator(); !s.ok()) return s;
    }
  }

  absl::Status LexOperator() {
    static constexpr struct {
      std::string_view text;
      Tok type;
    } kOperators[] = {
        {"//", Tok::kFloorDiv}, {"**", Tok::kPow},      {"==", Tok::kEq},    {"!=", Tok::kNe},
        {">=", Tok::kGtEq},     {"<=", Tok::kLtEq},     {"+", Tok::kAdd},    {"-", Tok::kSub},
        {"/", Tok::kDiv},       {"*", Tok::kMul},       {"%", Tok::kMod},    {"~", Tok::kTilde},
        {"[", Tok::kLBracket},  {"]", Tok::kRBracket},  {"(", Tok::kLParen}, {")", Tok::kRParen},
        {"{", Tok::kLBrace},    {"}", Tok::kRBrace},    {">", Tok::kGt},     {"<", Tok::kLt},
        {"=", Tok::kAssign},    {".", Tok::kDot},       {":", Tok::kColon},  {"|", Tok::kPipe},
        {",", Tok::kComma},     {";", Tok::kSemicolon},
    };
    for (const auto& op : kOperators) {
      if (!StartsWith(pos_, op.text)) continue;
      const char c = op.text[0];
      if (op.text.size() == 1 && (c == '{' || c == '(' || c == '[')) {
        balance_.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
      } else if (op.text.size() == 1 && (c == '}' || c == ')' || c == ']')) {
        if (balance_.empty()) return Error(pos_, Cat("unexpected '", op.text, "'"));
        const char expected = balance_.back();
        balance_.pop_back();
        if (expected != c) {
          return Error(
              pos_, Cat("unexpected '", op.text, "', expected '", std::string(1, expected), "'"));
        }
      }
      Emit(op.type, pos_);
      pos_ += op.text.size();
      return absl::OkStatus();
    }
    size_t next = pos_;
    const char32_t c = DecodeUtf8(src_, next);
    std::string ch;
    AppendUtf8(c, ch);
    return Error(pos_, Cat("unexpected char ", StrRepr(ch), " at ",
                           CountCodePoints(std::string_view(src_).substr(0, pos_))));
  }

  absl::StatusOr<bool> LexComment() {
    const size_t begin = pos_;
    const size_t p = src_.find("#}", pos_);
    if (p == std::string::npos) {
      if (pos_ < src_.size()) return Error(begin, "Missing end of comment tag");
      return false;
    }
    size_t end = p + 2;
    if (p > pos_ && src_[p - 1] == '-') {
      end = SkipSpaces(end);
    } else if (p > pos_ && src_[p - 1] == '+') {
      // +#}: nothing trimmed
    } else if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    line_starting_ = src_[end - 1] == '\n';
    pos_ = end;
    return true;
  }

  absl::StatusOr<bool> LexRaw() {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = SkipSpaces(q);
      if (!StartsWith(q, "endraw")) continue;
      q = SkipSpaces(q + 6);
      size_t end = 0;
      if (StartsWith(q, "+%}")) {
        end = q + 3;
      } else if (StartsWith(q, "-%}")) {
        end = SkipSpaces(q + 3);
      } else if (StartsWith(q, "%}")) {
        end = q + 2;
        if (options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      EmitDataBeforeTag(pos_, p, sign, /*lstrip_applies=*/true);
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
    if (pos_ < src_.size()) return Error(pos_, "Missing end of raw directive");
    return false;
  }

  std::string src_;
  const Options& options_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<char> balance_;
};

}  // namespace

absl::StatusOr<LexedTemplate> Lex(std::string_view source, const Options& options) {
  Lexer lexer(NormalizeNewlines(source, options.keep_trailing_newline), options);
  return lexer.Run();
}

}  // namespace tpserve::jinja
