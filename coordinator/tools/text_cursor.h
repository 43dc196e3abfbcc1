// Reading text that may still grow: the parsers of this package take a decision only when the
// text that decides it has arrived, and TextCursor is how they ask. Each test answers kYes
// (found, consumed), kNo (certainly not there) or kNeedMore (the text so far is a proper
// prefix of what is looked for and more may come); at the end of the output (`final`) kNeedMore
// becomes kNo. Internal to coordinator/tools.
//
//   TextCursor c(buf, pos, final);
//   c.SkipSpace();
//   if (c.Literal("</tool_call>") == Match::kNeedMore) return;  // decide on the next chunk
//
// Threading: a value type over a string_view it does not own.
#ifndef TPSERVE_COORDINATOR_TOOLS_TEXT_CURSOR_H_
#define TPSERVE_COORDINATOR_TOOLS_TEXT_CURSOR_H_

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tpserve::tools_internal {

enum class Match { kYes, kNeedMore, kNo };

inline bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The length of text[0, end) without its trailing whitespace.
inline size_t TrimSpaceBack(std::string_view text, size_t end) {
  while (end > 0 && IsSpace(text[end - 1])) --end;
  return end;
}

inline size_t SkipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  return pos;
}

// Start of the longest tail of `text` that is a proper prefix of `marker` (text.size() if none).
inline size_t MarkerPrefixStart(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return text.size() - n;
  }
  return text.size();
}

// Function names: letters, digits, "_-.:/" and any non-ASCII byte. Every marker that follows a
// name starts with a byte outside this set.
inline bool IsNameByte(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80 ||
         c == '_' || c == '-' || c == '.' || c == ':' || c == '/';
}

class TextCursor {
 public:
  static constexpr size_t kMaxNameBytes = 256;

  TextCursor(std::string_view text, size_t pos, bool final)
      : text_(text), pos_(pos), final_(final) {}

  size_t pos() const { return pos_; }
  bool AtEnd() const { return pos_ == text_.size(); }
  // REQUIRES: !AtEnd().
  char Peek() const { return text_[pos_]; }
  std::string_view rest() const { return text_.substr(pos_); }
  void Advance(size_t n) { pos_ += n; }
  // What running out of text means: wait for more, or (at the end) no.
  Match Starved() const { return final_ ? Match::kNo : Match::kNeedMore; }

  void SkipSpace() { pos_ = tools_internal::SkipSpace(text_, pos_); }

  // One of `options`; *which is its index.
  Match OneOf(std::initializer_list<std::string_view> options, size_t* which = nullptr) {
    bool may_grow = false;
    size_t i = 0;
    for (std::string_view option : options) {
      if (rest().substr(0, option.size()) == option) {
        pos_ += option.size();
        if (which != nullptr) *which = i;
        return Match::kYes;
      }
      may_grow |= rest().size() < option.size() && option.substr(0, rest().size()) == rest();
      ++i;
    }
    return may_grow ? Starved() : Match::kNo;
  }
  Match Literal(std::string_view literal) { return OneOf({literal}); }

  // `literal`, or at the end of the output any beginning of it (none included): a closing
  // marker the generation stopped in or before.
  Match LiteralOrEnd(std::string_view literal) {
    if (final_ && rest().size() < literal.size() && literal.substr(0, rest().size()) == rest()) {
      pos_ = text_.size();
      return Match::kYes;
    }
    return Literal(literal);
  }

  // A function name (IsNameByte), ended by the first byte that cannot be in one.
  Match Name(std::string* name) {
    const size_t start = pos_;
    while (!AtEnd() && IsNameByte(Peek()) && pos_ - start <= kMaxNameBytes) ++pos_;
    if (pos_ - start > kMaxNameBytes) return Match::kNo;
    if (AtEnd()) return Starved();
    if (pos_ == start) return Match::kNo;
    name->assign(text_.substr(start, pos_ - start));
    return Match::kYes;
  }

 private:
  std::string_view text_;
  size_t pos_;
  bool final_;
};

}  // namespace tpserve::tools_internal

#endif  // TPSERVE_COORDINATOR_TOOLS_TEXT_CURSOR_H_
