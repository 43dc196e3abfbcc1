// printf-style and format-spec formatting (Objects/unicodeobject.c, Python/formatter_unicode.c).
#include "coordinator/jinja/format.h"

#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/string_ops.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {
namespace {

absl::Status Error(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

std::string ToBase(uint64_t magnitude, int base, bool upper) {
  if (magnitude == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (magnitude > 0) {
    out.insert(out.begin(), digits[magnitude % base]);
    magnitude /= base;
  }
  return out;
}

uint64_t Magnitude(int64_t v) {
  return v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
}

// snprintf of a finite or non-finite double with a printf conversion (e, f, g, E, F, G).
std::string FormatDouble(double v, char conversion, int precision, bool alt) {
  char fmt[16];
  std::snprintf(fmt, sizeof(fmt), "%%%s.%d%c", alt ? "#" : "", precision, conversion);
  const int n = std::snprintf(nullptr, 0, fmt, v);
  std::string out(n, '\0');
  std::snprintf(out.data(), n + 1, fmt, v);
  return out;
}

std::string GroupDigits(const std::string& digits, char separator, int every) {
  std::string out;
  const int n = static_cast<int>(digits.size());
  for (int i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % every == 0) out.push_back(separator);
    out.push_back(digits[i]);
  }
  return out;
}

std::string AsciiRepr(const Value& v) {
  const std::string repr = PyRepr(v);
  std::string out;
  for (size_t pos = 0; pos < repr.size();) {
    const char32_t c = DecodeUtf8(repr, pos);
    char buf[16];
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      std::snprintf(buf, sizeof(buf),
                    c <= 0xFF     ? "\\x%02x"
                    : c <= 0xFFFF ? "\\u%04x"
                                  : "\\U%08x",
                    static_cast<unsigned>(c));
      out += buf;
    }
  }
  return out;
}

// ----- format-spec mini-language -----

struct Spec {
  std::string fill = " ";
  char align = 0;
  char sign = 0;
  bool alt = false;
  bool zero = false;
  int64_t width = -1;
  char grouping = 0;
  int64_t precision = -1;
  char type = 0;
};

bool IsAlign(char c) { return c == '<' || c == '>' || c == '=' || c == '^'; }

absl::StatusOr<Spec> ParseSpec(std::string_view spec, const Value& v) {
  Spec s;
  size_t pos = 0;
  if (!spec.empty()) {
    size_t after_fill = 0;
    DecodeUtf8(spec, after_fill);
    if (after_fill < spec.size() && IsAlign(spec[after_fill])) {
      s.fill = std::string(spec.substr(0, after_fill));
      s.align = spec[after_fill];
      pos = after_fill + 1;
    } else if (IsAlign(spec[0])) {
      s.align = spec[0];
      pos = 1;
    }
  }
  if (pos < spec.size() && (spec[pos] == '+' || spec[pos] == '-' || spec[pos] == ' ')) {
    s.sign = spec[pos++];
  }
  if (pos < spec.size() && spec[pos] == 'z') ++pos;
  if (pos < spec.size() && spec[pos] == '#') {
    s.alt = true;
    ++pos;
  }
  if (pos < spec.size() && spec[pos] == '0') {
    s.zero = true;
    ++pos;
  }
  auto digits = [&](int64_t& out) {
    size_t start = pos;
    int64_t value = 0;
    while (pos < spec.size() && spec[pos] >= '0' && spec[pos] <= '9') {
      if (value > 100000000) return false;
      value = value * 10 + (spec[pos++] - '0');
    }
    if (pos > start) out = value;
    return true;
  };
  if (!digits(s.width)) return Error("Too many decimal digits in format string");
  if (pos < spec.size() && (spec[pos] == ',' || spec[pos] == '_')) s.grouping = spec[pos++];
  if (pos < spec.size() && spec[pos] == '.') {
    ++pos;
    s.precision = -2;
    if (!digits(s.precision)) return Error("Too many decimal digits in format string");
    if (s.precision == -2) return Error("Format specifier missing precision");
  }
  if (pos < spec.size()) s.type = spec[pos++];
  if (pos < spec.size()) {
    return Error(
        Cat("Invalid format specifier '", spec, "' for object of type '", TypeName(v), "'"));
  }
  if (s.zero && s.align == 0) {
    s.fill = "0";
    s.align = '=';
  }
  return s;
}

// Pads sign+body to the spec's width.
std::string Pad(const Spec& s, const std::string& sign, const std::string& body,
                char default_align) {
  const int64_t length = CodePointLength(sign) + CodePointLength(body);
  if (s.width <= length) return sign + body;
  const int64_t total = s.width - length;
  const char align = s.align ? s.align : default_align;
  auto fill = [&](int64_t n) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += s.fill;
    return out;
  };
  switch (align) {
    case '<':
      return sign + body + fill(total);
    case '^':
      return fill(total / 2) + sign + body + fill(total - total / 2);
    case '=':
      return sign + fill(total) + body;
    default:
      return fill(total) + sign + body;
  }
}

absl::StatusOr<std::string> FormatFloatSpec(double x, const Spec& s, const Value& v);

absl::StatusOr<std::string> FormatIntSpec(int64_t x, const Spec& s, const Value& v) {
  const char type = s.type;
  if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' || type == 'G' ||
      type == '%') {
    return FormatFloatSpec(static_cast<double>(x), s, v);
  }
  if (s.precision >= 0) return Error("Precision not allowed in integer format specifier");
  std::string body;
  std::string prefix;
  switch (type) {
    case 0:
    case 'd':
    case 'n':
      body = ToBase(Magnitude(x), 10, false);
      break;
    case 'b':
      body = ToBase(Magnitude(x), 2, false), prefix = "0b";
      break;
    case 'o':
      body = ToBase(Magnitude(x), 8, false), prefix = "0o";
      break;
    case 'x':
      body = ToBase(Magnitude(x), 16, false), prefix = "0x";
      break;
    case 'X':
      body = ToBase(Magnitude(x), 16, true), prefix = "0X";
      break;
    case 'c': {
      if (x < 0 || x > 0x10FFFF) return Error("%c arg not in range(0x110000)");
      std::string c;
      AppendUtf8(static_cast<char32_t>(x), c);
      return Pad(s, "", c, '<');
    }
    default:
      return Error(Cat("Unknown format code '", std::string(1, type), "' for object of type '",
                       TypeName(v), "'"));
  }
  if (s.grouping) {
    if (s.grouping == ',' && type != 0 && type != 'd') {
      return Error(Cat("Cannot specify ',' with '", std::string(1, type), "'."));
    }
    body = GroupDigits(body, s.grouping, (type == 0 || type == 'd' || type == 'n') ? 3 : 4);
  }
  std::string sign = x < 0 ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  if (s.alt) sign += prefix;
  return Pad(s, sign, body, '>');
}

absl::StatusOr<std::string> FormatFloatSpec(double x, const Spec& s, const Value& v) {
  char type = s.type;
  int64_t precision = s.precision;
  const bool negative = std::signbit(x) && !std::isnan(x);
  const double a = std::fabs(x);
  std::string body;
  if (precision > 1000000) return Error("precision too big");
  switch (type) {
    case 0:
      if (precision < 0) {
        body = FloatRepr(a);
      } else {
        body = FormatDouble(a, 'g', precision == 0 ? 1 : static_cast<int>(precision), s.alt);
        if (std::isfinite(a) && body.find_first_of(".e") == std::string::npos) body += ".0";
      }
      break;
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      body = FormatDouble(a, type, precision < 0 ? 6 : static_cast<int>(precision), s.alt);
      break;
    case 'n':
      body = FormatDouble(a, 'g', precision < 0 ? 6 : static_cast<int>(precision), s.alt);
      break;
    case '%':
      body =
          FormatDouble(a * 100, 'f', precision < 0 ? 6 : static_cast<int>(precision), s.alt) + "%";
      break;
    default:
      return Error(Cat("Unknown format code '", std::string(1, type), "' for object of type '",
                       TypeName(v), "'"));
  }
  if (s.grouping && std::isfinite(a)) {
    size_t int_end = body.find_first_not_of("0123456789");
    if (int_end == std::string::npos) int_end = body.size();
    body = GroupDigits(body.substr(0, int_end), s.grouping, 3) + body.substr(int_end);
  }
  const std::string sign = negative ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  return Pad(s, sign, body, '>');
}

// ----- printf-style -----

struct PercentSpec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  int64_t width = -1;
  int64_t precision = -1;
};

std::string PadPercent(const PercentSpec& p, std::string sign, std::string body, bool numeric) {
  const int64_t length = CodePointLength(sign) + CodePointLength(body);
  if (p.width <= length) return sign + body;
  const int64_t n = p.width - length;
  if (p.left) return sign + body + std::string(n, ' ');
  if (p.zero && numeric) return sign + std::string(n, '0') + body;
  return std::string(n, ' ') + sign + body;
}

}  // namespace

absl::StatusOr<TString> FormatValue(const Value& value, std::string_view spec,
                                    const Renderer* renderer) {
  if (spec.empty() && !value.is_int() && !value.is_float()) return PyStr(value);
  if (!value.is_string() && !value.is_number()) {
    return Error(Cat("unsupported format string passed to ", TypeName(value), ".__format__"));
  }
  TP_ASSIGN_OR_RETURN(Spec s, ParseSpec(spec, value));
  if (renderer != nullptr && s.width > 0) TP_RETURN_IF_ERROR(renderer->CheckStringSize(s.width));
  if (value.is_string()) {
    if (s.type != 0 && s.type != 's') {
      return Error(
          Cat("Unknown format code '", std::string(1, s.type), "' for object of type 'str'"));
    }
    if (s.sign) return Error("Sign not allowed in string format specifier");
    if (s.alt) return Error("Alternate form (#) not allowed in string format specifier");
    if (s.align == '=') return Error("'=' alignment not allowed in string format specifier");
    const TString& str = value.as_string();
    if (spec.empty()) return str;
    std::string body = s.precision >= 0 ? PyStrSlice(str, 0, s.precision, 1).bytes() : str.bytes();
    return TString::Derived(Pad(s, "", body, '<'), str.any_input());
  }
  if (value.is_int() || value.is_bool()) {
    TP_ASSIGN_OR_RETURN(std::string out, FormatIntSpec(value.as_int(), s, value));
    return TString::Derived(std::move(out), value.from_input());
  }
  TP_ASSIGN_OR_RETURN(std::string out, FormatFloatSpec(value.as_float(), s, value));
  return TString::Derived(std::move(out), value.from_input());
}

absl::StatusOr<TString> PercentFormat(const TString& format, const Value& args, Renderer& renderer,
                                      bool escape_args) {
  std::vector<Value> positional;
  const bool is_tuple = args.is_list() && args.as_list().kind == SeqKind::kTuple;
  if (is_tuple) {
    positional = args.as_list().items;
  } else {
    positional.push_back(args);
  }
  // Python takes any non-tuple, non-str argument with __getitem__ as a mapping (and then does
  // not check that every argument was converted).
  const bool has_mapping =
      !is_tuple && (args.is_dict() || args.is_sequence() || args.is_undefined());
  size_t next_arg = 0;
  bool used_mapping = false;
  const std::string_view f = format.view();
  TString out;
  size_t literal_start = 0;
  auto next = [&]() -> absl::StatusOr<Value> {
    if (next_arg >= positional.size()) return Error("not enough arguments for format string");
    return positional[next_arg++];
  };
  size_t i = 0;
  while (i < f.size()) {
    if (f[i] != '%') {
      ++i;
      continue;
    }
    out.Append(format.Substr(literal_start, i));
    ++i;
    if (i >= f.size()) return Error("incomplete format");
    std::optional<Value> keyed;
    if (f[i] == '(') {
      if (!args.is_dict()) {
        return Error(has_mapping
                         ? Cat(TypeName(args), " indices must be integers or slices, not str")
                         : std::string("format requires a mapping"));
      }
      int depth = 1;
      const size_t key_start = ++i;
      while (i < f.size() && depth > 0) {
        if (f[i] == '(') ++depth;
        if (f[i] == ')') --depth;
        ++i;
      }
      if (depth > 0) return Error("incomplete format key");
      const std::string key(f.substr(key_start, i - 1 - key_start));
      const Value* found = args.as_dict().Find(Value::String(key));
      if (found == nullptr) return Error(StrRepr(key));
      keyed = *found;
      used_mapping = true;
    }
    PercentSpec p;
    for (; i < f.size(); ++i) {
      const char c = f[i];
      if (c == '-')
        p.left = true;
      else if (c == '+')
        p.plus = true;
      else if (c == ' ')
        p.space = true;
      else if (c == '#')
        p.alt = true;
      else if (c == '0')
        p.zero = true;
      else
        break;
    }
    auto number = [&](int64_t& out_value) -> absl::Status {
      if (i < f.size() && f[i] == '*') {
        ++i;
        TP_ASSIGN_OR_RETURN(Value w, next());
        if (!w.is_int() && !w.is_bool()) return Error("* wants int");
        out_value = w.as_int();
        if (out_value < 0 && &out_value == &p.width) {
          p.left = true;
          out_value = -out_value;
        }
        return absl::OkStatus();
      }
      if (i < f.size() && f[i] >= '0' && f[i] <= '9') {
        out_value = 0;
        while (i < f.size() && f[i] >= '0' && f[i] <= '9') {
          if (out_value > 100000000) return Error("width too big");
          out_value = out_value * 10 + (f[i++] - '0');
        }
      }
      return absl::OkStatus();
    };
    TP_RETURN_IF_ERROR(number(p.width));
    if (i < f.size() && f[i] == '.') {
      ++i;
      p.precision = 0;
      TP_RETURN_IF_ERROR(number(p.precision));
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) return Error("incomplete format");
    const char conv = f[i++];
    literal_start = i;
    if (p.width > renderer.limits().max_output_bytes) {
      TP_RETURN_IF_ERROR(renderer.CheckStringSize(p.width));
    }
    if (conv == '%') {
      out.Append("%");
      continue;
    }
    Value arg;
    if (keyed) {
      arg = *keyed;
    } else {
      TP_ASSIGN_OR_RETURN(arg, next());
    }
    const bool from_input = ContainsInput(arg);
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        const bool escape = escape_args && !arg.is_markup();
        if (conv == 's' && arg.is_string() && p.width < 0 && p.precision < 0) {
          out.Append(escape ? HtmlEscape(arg.as_string()) : arg.as_string());
          break;
        }
        std::string body = conv == 's'   ? PyStr(arg).bytes()
                           : conv == 'r' ? PyRepr(arg)
                                         : AsciiRepr(arg);
        if (escape) body = HtmlEscape(TString(std::move(body))).bytes();
        if (p.precision >= 0) body = PyStrSlice(TString(body), 0, p.precision, 1).bytes();
        out.Append(PadPercent(p, "", body, false), from_input);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'o':
      case 'x':
      case 'X': {
        int64_t v = 0;
        if (arg.is_int() || arg.is_bool()) {
          v = arg.as_int();
        } else if (arg.is_float() && (conv == 'd' || conv == 'i' || conv == 'u')) {
          const double d = arg.as_float();
          if (std::isnan(d)) return Error("cannot convert float NaN to integer");
          if (std::isinf(d)) return Error("cannot convert float infinity to integer");
          if (std::fabs(d) >= 9.2e18) return Error("integer overflow (64-bit integers)");
          v = static_cast<int64_t>(std::trunc(d));
        } else if (conv == 'd' || conv == 'i' || conv == 'u') {
          return Error(Cat("%", std::string(1, conv), " format: a real number is required, not ",
                           TypeName(arg)));
        } else {
          return Error(Cat("%", std::string(1, conv), " format: an integer is required, not ",
                           TypeName(arg)));
        }
        const int base = conv == 'o' ? 8 : (conv == 'x' || conv == 'X') ? 16 : 10;
        std::string body = ToBase(Magnitude(v), base, conv == 'X');
        if (p.precision > static_cast<int64_t>(body.size())) {
          body = std::string(p.precision - body.size(), '0') + body;
        }
        std::string sign = v < 0 ? "-" : p.plus ? "+" : p.space ? " " : "";
        if (p.alt && base != 10) sign += conv == 'o' ? "0o" : conv == 'x' ? "0x" : "0X";
        out.Append(PadPercent(p, sign, body, true), from_input);
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!arg.is_number()) {
          return Error(Cat("must be real number, not ", TypeName(arg)));
        }
        const double d = arg.as_float();
        const bool negative = std::signbit(d) && !std::isnan(d);
        std::string body = FormatDouble(
            std::fabs(d), conv,
            p.precision < 0 ? 6 : static_cast<int>(std::min<int64_t>(p.precision, 1000)), p.alt);
        std::string sign = negative ? "-" : p.plus ? "+" : p.space ? " " : "";
        out.Append(PadPercent(p, sign, body, std::isfinite(d)), from_input);
        break;
      }
      case 'c': {
        std::string c;
        if (arg.is_int() || arg.is_bool()) {
          if (arg.as_int() < 0 || arg.as_int() > 0x10FFFF) {
            return Error("%c arg not in range(0x110000)");
          }
          AppendUtf8(static_cast<char32_t>(arg.as_int()), c);
        } else if (arg.is_string() && CodePointLength(arg.str()) == 1) {
          c = std::string(arg.str());
        } else {
          return Error("%c requires int or char");
        }
        out.Append(PadPercent(p, "", c, false), from_input);
        break;
      }
      default: {
        return Error(Cat("unsupported format character '", std::string(1, conv), "' (0x",
                         ToBase(static_cast<unsigned char>(conv), 16, false), ") at index ",
                         CodePointLength(f.substr(0, i - 1))));
      }
    }
    TP_RETURN_IF_ERROR(renderer.CheckStringSize(out.size()));
  }
  out.Append(format.Substr(literal_start, f.size()));
  if (!used_mapping && !has_mapping && next_arg < positional.size()) {
    return Error("not all arguments converted during string formatting");
  }
  return out;
}

absl::StatusOr<TString> StrFormat(Renderer& renderer, const TString& format, const CallArgs& args) {
  const std::string_view f = format.view();
  TString out;
  int auto_index = 0;  // -1: manual numbering seen
  bool manual = false;
  size_t i = 0, literal_start = 0;
  auto flush = [&](size_t end) { out.Append(format.Substr(literal_start, end)); };
  while (i < f.size()) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        flush(i + 1);
        i += 2;
        literal_start = i;
        continue;
      }
      return Error("Single '}' encountered in format string");
    }
    if (c != '{') {
      ++i;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      flush(i + 1);
      i += 2;
      literal_start = i;
      continue;
    }
    flush(i);
    // The field runs to the matching '}' (nested braces inside the spec count).
    int depth = 1;
    size_t j = i + 1;
    while (j < f.size() && depth > 0) {
      if (f[j] == '{') ++depth;
      if (f[j] == '}') --depth;
      if (depth > 0) ++j;
    }
    if (depth > 0) {
      return Error(j > i + 1 && f.find('}', i) == std::string_view::npos
                       ? "expected '}' before end of string"
                       : "Single '{' encountered in format string");
    }
    const std::string_view field = f.substr(i + 1, j - i - 1);
    i = j + 1;
    literal_start = i;
    // field_name[!conversion][:spec]
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '!' && field[name_end] != ':') {
      if (field[name_end] == '[') {
        const size_t close = field.find(']', name_end);
        if (close == std::string_view::npos) return Error("Missing ']' in format string");
        name_end = close + 1;
      } else {
        ++name_end;
      }
    }
    const std::string_view name = field.substr(0, name_end);
    char conversion = 0;
    std::string_view spec;
    size_t rest = name_end;
    if (rest < field.size() && field[rest] == '!') {
      if (rest + 1 >= field.size())
        return Error("end of string while looking for conversion specifier");
      conversion = field[rest + 1];
      rest += 2;
      if (rest < field.size() && field[rest] != ':')
        return Error("expected ':' after conversion specifier");
    }
    if (rest < field.size() && field[rest] == ':') spec = field.substr(rest + 1);
    // The first part of the name: an index, a keyword, or empty (automatic numbering).
    size_t first_end = 0;
    while (first_end < name.size() && name[first_end] != '.' && name[first_end] != '[') ++first_end;
    const std::string_view first = name.substr(0, first_end);
    Value value;
    if (first.empty()) {
      if (manual) {
        return Error("cannot switch from manual field specification to automatic field numbering");
      }
      if (auto_index >= static_cast<int>(args.positional.size())) {
        return Error(
            Cat("Replacement index ", auto_index, " out of range for positional args tuple"));
      }
      value = args.positional[auto_index++];
    } else if (first.find_first_not_of("0123456789") == std::string_view::npos) {
      if (auto_index > 0) {
        return Error("cannot switch from automatic field numbering to manual field specification");
      }
      manual = true;
      const size_t index = std::stoul(std::string(first.substr(0, 9)));
      if (index >= args.positional.size()) {
        return Error(Cat("Replacement index ", index, " out of range for positional args tuple"));
      }
      value = args.positional[index];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.keyword) {
        if (k == first) {
          value = v;
          found = true;
        }
      }
      if (!found) return Error(StrRepr(first));
    }
    // .attr and [key] parts, through the sandbox.
    size_t k = first_end;
    while (k < name.size()) {
      if (name[k] == '.') {
        size_t end = k + 1;
        while (end < name.size() && name[end] != '.' && name[end] != '[') ++end;
        if (end == k + 1) return Error("Empty attribute in format string");
        TP_ASSIGN_OR_RETURN(value, renderer.GetAttr(value, name.substr(k + 1, end - k - 1)));
        k = end;
      } else {
        const size_t close = name.find(']', k);
        const std::string_view key = name.substr(k + 1, close - k - 1);
        if (key.empty()) return Error("Empty attribute in format string");
        Value key_value = key.find_first_not_of("0123456789") == std::string_view::npos
                              ? Value::Int(std::stoll(std::string(key.substr(0, 18))))
                              : Value::String(std::string(key));
        TP_ASSIGN_OR_RETURN(value, renderer.GetItem(value, key_value));
        k = close + 1;
      }
    }
    if (conversion == 'r') {
      value = Value::String(TString::Derived(PyRepr(value), ContainsInput(value)));
    } else if (conversion == 'a') {
      value = Value::String(TString::Derived(AsciiRepr(value), ContainsInput(value)));
    } else if (conversion == 's') {
      value = Value::String(PyStr(value));
    } else if (conversion != 0) {
      return Error(Cat("Unknown conversion specifier ", std::string(1, conversion)));
    }
    // A spec may hold nested fields ({:{width}}).
    TString spec_text(std::string{spec});
    if (spec.find('{') != std::string_view::npos) {
      CallArgs nested = args;
      TP_ASSIGN_OR_RETURN(spec_text, StrFormat(renderer, TString(std::string(spec)), nested));
    }
    if (value.is_undefined() && spec_text.empty()) continue;
    TP_ASSIGN_OR_RETURN(TString piece, FormatValue(value, spec_text.view(), &renderer));
    TP_RETURN_IF_ERROR(renderer.CheckStringSize(out.size() + piece.size()));
    out.Append(piece);
  }
  flush(f.size());
  return out;
}

}  // namespace tpserve::jinja
