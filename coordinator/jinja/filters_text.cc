// jinja2's filters on strings and numbers (jinja2/filters.py), with transformers' tojson.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/call_args.h"
#include "coordinator/jinja/filters_internal.h"
#include "coordinator/jinja/format.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/string_ops.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {
namespace {

absl::StatusOr<Value> FilterAbs(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("abs", args, {}, 0, false, false, 1).status());
  if (v.is_float()) return Value::Float(std::fabs(v.as_float()), v.from_input());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) return Error("integer overflow");
    return Value::Int(std::abs(v.as_int()), v.from_input());
  }
  return Error(Cat("bad operand type for abs(): '", TypeName(v), "'"));
}

absl::StatusOr<Value> FilterAttr(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_attr", args, {"name"}, 1, false, false, 2));
  const Value name = *a.Get(0);
  if (!name.is_string()) return Error("attribute name must be string");
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_dict()) return MissingAttribute(v, name);  // keys are not attributes
  return r.GetAttr(v, name.str());
}

absl::StatusOr<Value> FilterCapitalize(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_capitalize", args, {}, 0).status());
  const TString s = Text(v);
  return Value::StringLike(TString::Derived(PyCapitalize(s.view()), s.any_input()), v.is_markup());
}

absl::StatusOr<Value> FilterCenter(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_center", args, {"width"}, 0));
  TP_ASSIGN_OR_RETURN(int64_t width, IndexArg(a.Or(0, Value::Int(80))));
  TP_RETURN_IF_ERROR(r.CheckStringSize(std::max<int64_t>(width, 0)));
  return Value::StringLike(PyPad(Text(v), width, " ", 0), v.is_markup());
}

absl::StatusOr<Value> FilterDefault(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_default", args, {"default_value", "boolean"}, 0));
  const bool boolean = a.Has(1) && Truthy(*a.Get(1));
  if (v.is_undefined() || (boolean && !Truthy(v))) return a.Or(0, Value::String(""));
  return v;
}

absl::StatusOr<Value> FilterEscape(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("escape", args, {}, 0).status());
  return EscapeToMarkup(v);
}

absl::StatusOr<Value> FilterForceescape(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_forceescape", args, {}, 0).status());
  return Value::Markup(HtmlEscape(Text(v)));
}

// Python's float(str): decimal, with underscores between digits, inf/nan, surrounding spaces.
std::optional<double> ParseFloat(std::string_view text) {
  std::string s;
  size_t b = 0, e = text.size();
  while (b < e && IsPySpace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && IsPySpace(static_cast<unsigned char>(text[e - 1]))) --e;
  text = text.substr(b, e - b);
  if (text.empty()) return std::nullopt;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      const bool ok =
          i > 0 && i + 1 < text.size() && std::isdigit(text[i - 1]) && std::isdigit(text[i + 1]);
      if (!ok) return std::nullopt;
      continue;
    }
    s.push_back(c);
  }
  std::string lower = s;
  for (char& c : lower) c = static_cast<char>(std::tolower(c));
  std::string_view body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double magnitude = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -magnitude : magnitude;
  }
  // Digits, optional fraction, optional exponent; nothing else (no hex, no "1e").
  size_t i = s[0] == '+' || s[0] == '-' ? 1 : 0;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(s.c_str(), nullptr);
}

// Python's int(str, base).
std::optional<int64_t> ParseInt(std::string_view text, int64_t base) {
  size_t b = 0, e = text.size();
  while (b < e && IsPySpace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && IsPySpace(static_cast<unsigned char>(text[e - 1]))) --e;
  text = text.substr(b, e - b);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (text.size() > 1 && text[0] == '0') {
      const char p = static_cast<char>(std::tolower(text[1]));
      const int64_t prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (prefix_base != 0 && (base == 0 || base == prefix_base)) {
        base = prefix_base;
        text.remove_prefix(2);
        if (!text.empty() && text[0] == '_') text.remove_prefix(1);
      }
    }
    if (base == 0) base = 10;
  }
  if (text.empty() || base < 2 || base > 36) return std::nullopt;
  uint64_t value = 0;
  bool last_underscore = true;
  for (char c : text) {
    if (c == '_') {
      if (last_underscore) return std::nullopt;
      last_underscore = true;
      continue;
    }
    last_underscore = false;
    int d = std::isdigit(c) ? c - '0' : std::isalpha(c) ? std::tolower(c) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (value > (static_cast<uint64_t>(INT64_MAX) + 1 - d) / base) return std::nullopt;
    value = value * base + d;
  }
  if (last_underscore) return std::nullopt;
  if (!negative && value > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - value) : static_cast<int64_t>(value);
}

absl::StatusOr<Value> FilterFloat(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_float", args, {"default"}, 0));
  const Value fallback = a.Or(0, Value::Float(0.0));
  if (v.is_number()) return Value::Float(v.as_float(), v.from_input());
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_string()) {
    if (std::optional<double> d = ParseFloat(v.str())) {
      return Value::Float(*d, v.as_string().any_input());
    }
  }
  return fallback;
}

absl::StatusOr<Value> FilterInt(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_int", args, {"default", "base"}, 0));
  const Value fallback = a.Or(0, Value::Int(0));
  TP_ASSIGN_OR_RETURN(int64_t base, IndexArg(a.Or(1, Value::Int(10))));
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int(), v.from_input());
  if (v.is_float()) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(std::trunc(d)), v.from_input());
  }
  if (v.is_string()) {
    const bool from_input = v.as_string().any_input();
    if (std::optional<int64_t> i = ParseInt(v.str(), base)) return Value::Int(*i, from_input);
    // "this quirk is necessary so that "42.23"|int gives 42."
    if (std::optional<double> d = ParseFloat(v.str())) {
      if (std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
        return Value::Int(static_cast<int64_t>(std::trunc(*d)), from_input);
      }
    }
  }
  return fallback;
}

absl::StatusOr<Value> FilterFormat(Renderer& r, const Value& v, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    return Error("can't handle positional and keyword arguments at the same time");
  }
  Value operand;
  if (!args.keyword.empty()) {
    DictData kwargs;
    for (auto& [k, item] : args.keyword) kwargs.Set(Value::String(k), item);
    operand = Value::Dict(std::move(kwargs));
  } else {
    operand = Value::Tuple(args.positional);
  }
  TP_ASSIGN_OR_RETURN(TString s, PercentFormat(Text(v), operand, r, v.is_markup()));
  return Value::StringLike(std::move(s), v.is_markup());
}

absl::StatusOr<Value> FilterIndent(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_indent", args, {"width", "first", "blank"}, 0));
  const Value width = a.Or(0, Value::Int(4));
  TString indention;
  if (width.is_string()) {
    indention = width.as_string();
  } else {
    TP_ASSIGN_OR_RETURN(int64_t n, IndexArg(width));
    TP_RETURN_IF_ERROR(r.CheckStringSize(std::max<int64_t>(n, 0)));
    indention = TString(std::string(std::max<int64_t>(n, 0), ' '));
  }
  const bool first = a.Has(1) && Truthy(*a.Get(1));
  const bool blank = a.Has(2) && Truthy(*a.Get(2));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_string()) {
    return Error(Cat("unsupported operand type(s) for +=: '", TypeName(v), "' and 'str'"));
  }
  TString s = v.as_string();
  s.Append("\n");
  const std::vector<TString> lines = PySplitLines(s, false);
  TString rv;
  if (blank) {
    TString separator("\n");
    separator.Append(indention);
    rv = PyJoin(separator, lines);
  } else {
    rv = lines.empty() ? TString() : lines[0];
    if (lines.size() > 1) {
      rv.Append("\n");
      for (size_t i = 1; i < lines.size(); ++i) {
        if (i > 1) rv.Append("\n");
        if (!lines[i].empty()) rv.Append(indention);
        rv.Append(lines[i]);
        TP_RETURN_IF_ERROR(r.CheckStringSize(rv.size()));
      }
    }
  }
  if (first) {
    TString out = indention;
    out.Append(rv);
    rv = std::move(out);
  }
  TP_RETURN_IF_ERROR(r.CheckStringSize(rv.size()));
  return Value::StringLike(std::move(rv), v.is_markup());
}

absl::StatusOr<Value> FilterLower(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_lower", args, {}, 0).status());
  const TString s = Text(v);
  return Value::StringLike(TString::Derived(PyLower(s.view()), s.any_input()), v.is_markup());
}

absl::StatusOr<Value> FilterUpper(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_upper", args, {}, 0).status());
  const TString s = Text(v);
  return Value::StringLike(TString::Derived(PyUpper(s.view()), s.any_input()), v.is_markup());
}

absl::StatusOr<Value> FilterReplace(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_replace", args, {"old", "new", "count"}, 2));
  const TString s = Text(v);
  const TString old_text = Text(*a.Get(0));
  const TString new_text = Text(*a.Get(1));
  int64_t count = -1;
  if (a.Has(2) && !a.Get(2)->is_none()) {
    TP_ASSIGN_OR_RETURN(count, IndexArg(*a.Get(2)));
  }
  // Bound the result before building it.
  const uint64_t matches =
      old_text.empty()
          ? CountCodePoints(s.view()) + 1
          : static_cast<uint64_t>(PyCount(s.view(), old_text.view(), std::nullopt, std::nullopt));
  const uint64_t n = count < 0 ? matches : std::min<uint64_t>(matches, count);
  if (new_text.size() > old_text.size() && n > 0) {
    const uint64_t growth = new_text.size() - old_text.size();
    if (n > static_cast<uint64_t>(INT64_MAX) / growth) return r.CheckStringSize(SIZE_MAX);
    TP_RETURN_IF_ERROR(r.CheckStringSize(s.size() + n * growth));
  }
  return Str(PyReplace(s, old_text.view(), new_text, count));
}

// Python's round(x, ndigits) for floats: correctly rounded, ties to even.
double RoundFloat(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits > 22) return x;
  if (digits < -308) return 0.0 * x;
  if (digits >= 0) {
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(digits), x);
    return std::strtod(buf, nullptr);
  }
  const double p = std::pow(10.0, static_cast<double>(-digits));
  const double y = x / p;
  double z = std::nearbyint(y);
  if (std::fabs(y - std::trunc(y)) == 0.5) z = 2.0 * std::nearbyint(y / 2.0);
  return z * p;
}

absl::StatusOr<Value> FilterRound(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_round", args, {"precision", "method"}, 0));
  TP_ASSIGN_OR_RETURN(int64_t precision, IndexArg(a.Or(0, Value::Int(0))));
  const Value method = a.Or(1, Value::String("common"));
  const std::string_view m = method.is_string() ? method.str() : "";
  if (m != "common" && m != "ceil" && m != "floor") {
    return Error("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    if (m == "common") {
      return Error(Cat("type ", TypeName(v), " doesn't define __round__ method"));
    }
    return Error(Cat("can't multiply sequence by non-int of type 'int'"));
  }
  if (m == "common") {
    if (!v.is_float()) {
      if (precision >= 0) return Value::Int(v.as_int(), v.from_input());
      // round(int, -n): to a multiple of 10**n, ties to even.
      if (precision < -18) return Value::Int(0, v.from_input());
      int64_t p = 1;
      for (int64_t i = 0; i < -precision; ++i) p *= 10;
      const int64_t x = v.as_int();
      int64_t q = x / p, rem = x % p;
      if (rem < 0) rem += p, q -= 1;
      if (2 * rem > p || (2 * rem == p && (q & 1))) ++q;
      return Value::Int(q * p, v.from_input());
    }
    return Value::Float(RoundFloat(v.as_float(), precision), v.from_input());
  }
  const double p = std::pow(10.0, static_cast<double>(precision));
  const double scaled = v.as_float() * p;
  const double rounded = m == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::Float(rounded / p, v.from_input());
}

absl::StatusOr<Value> FilterSafe(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_mark_safe", args, {}, 0).status());
  return Value::Markup(Text(v));
}

absl::StatusOr<Value> FilterString(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("soft_str", args, {}, 0).status());
  return Value::StringLike(Text(v), v.is_markup());
}

bool IsTitleSeparator(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPySpace(c);
}

absl::StatusOr<Value> FilterTitle(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_title", args, {}, 0).status());
  // jinja2: re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() per piece.
  const TString s = Text(v);
  const std::string_view text = s.view();
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    const bool separator = IsTitleSeparator(DecodeUtf8(text, next));
    size_t end = pos;
    while (end < text.size()) {
      size_t after = end;
      if (IsTitleSeparator(DecodeUtf8(text, after)) != separator) break;
      end = after;
    }
    const std::string_view piece = text.substr(pos, end - pos);
    size_t first_end = 0;
    const char32_t first = DecodeUtf8(piece, first_end);
    AppendUpper(first, out);
    out += PyLower(piece.substr(first_end));
    pos = end;
  }
  return Str(TString::Derived(std::move(out), s.any_input()));
}

absl::StatusOr<Value> FilterTojson(Renderer& r, const Value& v, CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  TP_ASSIGN_OR_RETURN(
      BoundArgs a,
      BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}, 0));
  JsonOptions options;
  options.ensure_ascii = a.Has(0) && Truthy(*a.Get(0));
  if (a.Has(1) && !a.Get(1)->is_none()) {
    const Value& indent = *a.Get(1);
    if (indent.is_string()) {
      options.indent = std::string(indent.str());
    } else {
      TP_ASSIGN_OR_RETURN(int64_t n, IndexArg(indent));
      TP_RETURN_IF_ERROR(r.CheckStringSize(std::max<int64_t>(n, 0)));
      options.indent = std::string(std::max<int64_t>(n, 0), ' ');
    }
  }
  if (a.Has(2) && !a.Get(2)->is_none()) {
    const Value& sep = *a.Get(2);
    if (!sep.is_list() || sep.as_list().items.size() != 2 || !sep.as_list().items[0].is_string() ||
        !sep.as_list().items[1].is_string()) {
      return Error("separators must be a (item_separator, key_separator) pair of strings");
    }
    options.item_separator = std::string(sep.as_list().items[0].str());
    options.key_separator = std::string(sep.as_list().items[1].str());
  }
  options.sort_keys = a.Has(3) && Truthy(*a.Get(3));
  TP_ASSIGN_OR_RETURN(std::string json, JsonDumps(v, options));
  TP_RETURN_IF_ERROR(r.CheckStringSize(json.size()));
  return Str(TString::Derived(std::move(json), ContainsInput(v)));
}

absl::StatusOr<Value> FilterTrim(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_trim", args, {"chars"}, 0));
  const Value chars = a.Or(0, Value::None());
  if (!chars.is_none() && !chars.is_string()) return Error("strip arg must be None or str");
  std::optional<std::string_view> set;
  if (chars.is_string()) set = chars.str();
  return Value::StringLike(PyStrip(Text(v), set, StripSide::kBoth), v.is_markup());
}

absl::StatusOr<Value> FilterTruncate(Renderer&, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a,
                      BindArgs("do_truncate", args, {"length", "killwords", "end", "leeway"}, 0));
  TP_ASSIGN_OR_RETURN(int64_t length, IndexArg(a.Or(0, Value::Int(255))));
  const bool killwords = a.Has(1) && Truthy(*a.Get(1));
  const TString end = Text(a.Or(2, Value::String("...")));
  Value leeway_value = a.Or(3, Value::None());
  int64_t leeway = 5;
  if (!leeway_value.is_none()) {
    TP_ASSIGN_OR_RETURN(leeway, IndexArg(leeway_value));
  }
  const int64_t end_length = CodePointLength(end.view());
  if (length < end_length) return Error(Cat("expected length >= ", end_length, ", got ", length));
  if (leeway < 0) return Error(Cat("expected leeway >= 0, got ", leeway));
  TP_ASSIGN_OR_RETURN(int64_t size, Length(v));
  if (size <= length + leeway) return v;
  if (!v.is_string()) {
    if (killwords)
      return Error(Cat("can only concatenate ", TypeName(v), " (not \"str\") to ", TypeName(v)));
    return Error(Cat("'", TypeName(v), "' object has no attribute 'rsplit'"));
  }
  const TString& s = v.as_string();
  TString head = PyStrSlice(s, std::nullopt, length - end_length, 1);
  if (!killwords) head = PyRSplit(head, " ", 1)[0];
  head.Append(end);
  return Str(std::move(head));
}

absl::StatusOr<Value> FilterWordcount(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_wordcount", args, {}, 0).status());
  const TString s = Text(v);
  const std::string_view text = s.view();
  int64_t count = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < text.size();) {
    const char32_t c = DecodeUtf8(text, pos);
    const bool word = c == '_' || IsPyAlpha(c) || IsPyDecimal(c) || IsPyDigit(c) || IsPyNumeric(c);
    if (word && !in_word) ++count;
    in_word = word;
  }
  return Value::Int(count, s.any_input());
}

constexpr FilterEntry kTextFilters[] = {
    {"abs", FilterAbs},
    {"attr", FilterAttr},
    {"capitalize", FilterCapitalize},
    {"center", FilterCenter},
    {"d", FilterDefault},
    {"default", FilterDefault},
    {"e", FilterEscape},
    {"escape", FilterEscape},
    {"float", FilterFloat},
    {"forceescape", FilterForceescape},
    {"format", FilterFormat},
    {"indent", FilterIndent},
    {"int", FilterInt},
    {"lower", FilterLower},
    {"replace", FilterReplace},
    {"round", FilterRound},
    {"safe", FilterSafe},
    {"string", FilterString},
    {"title", FilterTitle},
    {"tojson", FilterTojson},
    {"trim", FilterTrim},
    {"truncate", FilterTruncate},
    {"upper", FilterUpper},
    {"wordcount", FilterWordcount},
};

}  // namespace

absl::Span<const FilterEntry> TextFilters() { return kTextFilters; }

}  // namespace tpserve::jinja
