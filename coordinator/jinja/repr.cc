// str/repr/json.dumps of values.
#include "coordinator/jinja/repr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits, as Python's repr uses.
  auto result = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, result.ptr - buf);
  std::string out;
  if (sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits.push_back(c);
  }
  const int exponent = std::stoi(std::string(sci.substr(e + 1)));
  const int decpt = exponent + 1;  // digits are 0.DIGITS * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (ndigits > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (decpt <= 0) {
    out += "0.";
    out.append(-decpt, '0');
    out += digits;
  } else if (decpt >= ndigits) {
    out += digits;
    out.append(decpt - ndigits, '0');
    out += ".0";
  } else {
    out.append(digits, 0, decpt);
    out.push_back('.');
    out.append(digits, decpt);
  }
  return out;
}

std::string StrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  out.reserve(s.size() + 2);
  for (size_t pos = 0; pos < s.size();) {
    const char32_t c = DecodeUtf8(s, pos);
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (IsPyPrintable(c)) {
      AppendUtf8(c, out);
    } else if (c <= 0xFF) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

namespace {

constexpr int kMaxReprDepth = 2 * kMaxValueDepth;

void AppendRepr(const Value& v, std::string& out, std::vector<const void*>& active);

void AppendItems(const std::vector<Value>& items, std::string& out,
                 std::vector<const void*>& active) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    AppendRepr(items[i], out, active);
  }
}

void AppendDictRepr(const DictData& dict, std::string& out, std::vector<const void*>& active) {
  if (std::find(active.begin(), active.end(), &dict) != active.end() ||
      active.size() > kMaxReprDepth) {
    out += "{...}";
    return;
  }
  active.push_back(&dict);
  out.push_back('{');
  bool first = true;
  for (const auto& [key, value] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    AppendRepr(key, out, active);
    out += ": ";
    AppendRepr(value, out, active);
  }
  out.push_back('}');
  active.pop_back();
}

void AppendRepr(const Value& v, std::string& out, std::vector<const void*>& active) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      out += "Undefined";
      return;
    case ValueKind::kNone:
      out += "None";
      return;
    case ValueKind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case ValueKind::kInt:
      out += std::to_string(v.as_int());
      return;
    case ValueKind::kFloat:
      out += FloatRepr(v.as_float());
      return;
    case ValueKind::kString:
      if (v.is_markup()) {
        CatTo(&out, "Markup(", StrRepr(v.str()), ")");
      } else {
        out += StrRepr(v.str());
      }
      return;
    case ValueKind::kDict:
      AppendDictRepr(v.as_dict(), out, active);
      return;
    case ValueKind::kNamespace:
      out += "<Namespace ";
      AppendDictRepr(v.as_namespace().attrs, out, active);
      out += ">";
      return;
    case ValueKind::kLoop: {
      const LoopData& loop = v.as_loop();
      CatTo(&out, "<LoopContext ", loop.index0 + 1, "/", loop.items->items.size(), ">");
      return;
    }
    case ValueKind::kCallable: {
      const CallableData& c = v.as_callable();
      switch (c.type) {
        case CallableType::kMacro:
          CatTo(&out, "<Macro ", c.is_caller ? "'caller'" : StrRepr(c.name), ">");
          return;
        case CallableType::kBuiltinFunction: {
          // What jinja2 / transformers bind these names to (addresses left out).
          static constexpr std::pair<std::string_view, std::string_view> kReprs[] = {
              {"range", "<function safe_range>"},
              {"dict", "<class 'dict'>"},
              {"namespace", "<class 'jinja2.utils.Namespace'>"},
              {"lipsum", "<function generate_lorem_ipsum>"},
              {"cycler", "<class 'jinja2.utils.Cycler'>"},
              {"joiner", "<class 'jinja2.utils.Joiner'>"},
              {"raise_exception", "<function _compile_jinja_template.<locals>.raise_exception>"},
              {"strftime_now", "<function _compile_jinja_template.<locals>.strftime_now>"},
          };
          for (const auto& [name, repr] : kReprs) {
            if (name == c.name) {
              out += repr;
              return;
            }
          }
          CatTo(&out, "<built-in function ", c.name, ">");
          return;
        }
        case CallableType::kMethod: {
          // markupsafe defines these in Python: their repr is a bound method's.
          static constexpr std::string_view kMarkupMethods[] = {
              "capitalize", "title",  "lower",      "upper",      "replace", "ljust",
              "rjust",      "lstrip", "rstrip",     "center",     "strip",   "translate",
              "expandtabs", "swapcase", "zfill",    "partition",  "rpartition", "format",
              "format_map", "join",   "split",      "rsplit",     "splitlines"};
          if (c.self.is_markup() && std::find(std::begin(kMarkupMethods), std::end(kMarkupMethods),
                                              c.name) != std::end(kMarkupMethods)) {
            CatTo(&out, "<bound method Markup.", c.name, " of ", PyRepr(c.self), ">");
            return;
          }
          CatTo(&out, "<built-in method ", c.name, " of ", TypeName(c.self), " object>");
          return;
        }
      }
      return;
    }
    case ValueKind::kList:
      break;
  }
  const ListData& list = v.as_list();
  switch (list.kind) {
    case SeqKind::kList:
      out.push_back('[');
      AppendItems(list.items, out, active);
      out.push_back(']');
      return;
    case SeqKind::kTuple:
      out.push_back('(');
      AppendItems(list.items, out, active);
      if (list.items.size() == 1) out.push_back(',');
      out.push_back(')');
      return;
    case SeqKind::kRange:
      CatTo(&out, "range(", list.range_start, ", ", list.range_stop);
      if (list.range_step != 1) CatTo(&out, ", ", list.range_step);
      out.push_back(')');
      return;
    case SeqKind::kDictKeys:
    case SeqKind::kDictValues:
    case SeqKind::kDictItems:
      CatTo(&out, TypeName(v), "([");
      AppendItems(list.items, out, active);
      out += "])";
      return;
    case SeqKind::kGenerator:
      // Python adds " at 0x..." (an address): left out.
      CatTo(&out, "<generator object ", list.repr_name.empty() ? "<genexpr>" : list.repr_name, ">");
      return;
    case SeqKind::kReverseIterator:
      CatTo(&out, "<", list.repr_name.empty() ? TypeName(v) : list.repr_name, " object>");
      return;
  }
}

}  // namespace

std::string PyRepr(const Value& v) {
  std::string out;
  std::vector<const void*> active;
  AppendRepr(v, out, active);
  return out;
}

TString HtmlEscape(const TString& s) {
  std::string out;
  bool changed = false;
  for (char c : s.view()) {
    switch (c) {
      case '&':
        out += "&amp;", changed = true;
        break;
      case '<':
        out += "&lt;", changed = true;
        break;
      case '>':
        out += "&gt;", changed = true;
        break;
      case '\'':
        out += "&#39;", changed = true;
        break;
      case '"':
        out += "&#34;", changed = true;
        break;
      default:
        out.push_back(c);
    }
  }
  if (!changed) return s;
  return TString::Derived(std::move(out), s.any_input());
}

Value EscapeToMarkup(const Value& v) {
  if (v.is_markup()) return v;
  return Value::Markup(HtmlEscape(PyStr(v)));
}

TString PyStr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
      return v.as_string();
    case ValueKind::kUndefined:
      return TString();
    default:
      return TString::Derived(PyRepr(v), ContainsInput(v));
  }
}

namespace {

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  for (size_t pos = 0; pos < s.size();) {
    const unsigned char b = static_cast<unsigned char>(s[pos]);
    char buf[16];
    if (b < 0x80) {
      ++pos;
      switch (b) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        default:
          if (b < 0x20 || (ensure_ascii && b == 0x7F)) {
            std::snprintf(buf, sizeof(buf), "\\u%04x", b);
            out += buf;
          } else {
            out.push_back(static_cast<char>(b));
          }
      }
      continue;
    }
    const size_t start = pos;
    const char32_t c = DecodeUtf8(s, pos);
    if (!ensure_ascii) {
      out.append(s.substr(start, pos - start));
    } else if (c <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      const char32_t v = c - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                    static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      out += buf;
    }
  }
  out.push_back('"');
}

std::string JsonFloat(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return FloatRepr(d);
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonOptions& options) : options_(options) {
    item_sep_ = options.item_separator.value_or(options.indent ? "," : ", ");
    key_sep_ = options.key_separator.value_or(": ");
  }

  absl::Status Write(const Value& v, int level) {
    if (level > kMaxReprDepth) return absl::InvalidArgumentError("Circular reference detected");
    switch (v.kind()) {
      case ValueKind::kNone:
        out_ += "null";
        return absl::OkStatus();
      case ValueKind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return absl::OkStatus();
      case ValueKind::kInt:
        out_ += std::to_string(v.as_int());
        return absl::OkStatus();
      case ValueKind::kFloat:
        out_ += JsonFloat(v.as_float());
        return absl::OkStatus();
      case ValueKind::kString:
        AppendJsonString(v.str(), options_.ensure_ascii, out_);
        return absl::OkStatus();
      case ValueKind::kList:
        if (v.as_list().kind == SeqKind::kList || v.as_list().kind == SeqKind::kTuple) {
          return WriteList(v.as_list().items, level);
        }
        break;
      case ValueKind::kDict:
        return WriteDict(v.as_dict(), level);
      default:
        break;
    }
    return absl::InvalidArgumentError(
        Cat("Object of type ", TypeName(v), " is not JSON serializable"));
  }

  std::string& out() { return out_; }

 private:
  void Newline(int level) {
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  absl::Status WriteList(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return absl::OkStatus();
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out_ += item_sep_;
      if (options_.indent) Newline(level + 1);
      if (absl::Status s = Write(items[i], level + 1); !s.ok()) return s;
    }
    if (options_.indent) Newline(level);
    out_.push_back(']');
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> KeyString(const Value& key) {
    switch (key.kind()) {
      case ValueKind::kString:
        return std::string(key.str());
      case ValueKind::kBool:
        return std::string(key.as_bool() ? "true" : "false");
      case ValueKind::kNone:
        return std::string("null");
      case ValueKind::kInt:
        return std::to_string(key.as_int());
      case ValueKind::kFloat:
        return JsonFloat(key.as_float());
      default:
        return absl::InvalidArgumentError(
            Cat("keys must be str, int, float, bool or None, not ", TypeName(key)));
    }
  }

  absl::Status WriteDict(const DictData& dict, int level) {
    if (dict.size() == 0) {
      out_ += "{}";
      return absl::OkStatus();
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& entry : dict.entries()) entries.push_back(&entry);
    if (options_.sort_keys) {
      absl::Status error;
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        absl::StatusOr<int> c = PyCompare(a->first, b->first);
        if (!c.ok()) {
          if (error.ok()) error = c.status();
          return false;
        }
        return *c == -1;
      });
      if (!error.ok()) return error;
    }
    out_.push_back('{');
    bool first = true;
    for (const auto* entry : entries) {
      if (!first) out_ += item_sep_;
      first = false;
      if (options_.indent) Newline(level + 1);
      absl::StatusOr<std::string> key = KeyString(entry->first);
      if (!key.ok()) return key.status();
      AppendJsonString(*key, options_.ensure_ascii, out_);
      out_ += key_sep_;
      if (absl::Status s = Write(entry->second, level + 1); !s.ok()) return s;
    }
    if (options_.indent) Newline(level);
    out_.push_back('}');
    return absl::OkStatus();
  }

  const JsonOptions& options_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> JsonDumps(const Value& v, const JsonOptions& options) {
  JsonWriter writer(options);
  if (absl::Status s = writer.Write(v, 0); !s.ok()) return s;
  return std::move(writer.out());
}

}  // namespace tpserve::jinja
