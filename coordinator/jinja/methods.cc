// Attributes and methods of Python's str, dict, list, tuple, int, float and range, and of the
// loop object, as the immutable sandbox exposes them.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/call_args.h"
#include "coordinator/jinja/format.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"
#include "coordinator/jinja/string_ops.h"
#include "coordinator/jinja/unicode.h"

namespace tpserve::jinja {
namespace {

absl::Status Error(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

constexpr std::string_view kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill",
};
constexpr std::string_view kDictMethods[] = {"clear",      "copy",   "fromkeys", "get",
                                             "items",      "keys",   "pop",      "popitem",
                                             "setdefault", "update", "values"};
constexpr std::string_view kDictMutating[] = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::string_view kListMethods[] = {"append", "clear",   "copy",   "count",
                                             "extend", "index",   "insert", "pop",
                                             "remove", "reverse", "sort"};
constexpr std::string_view kListMutating[] = {"append", "clear", "pop",    "reverse",
                                              "insert", "sort",  "extend", "remove"};
constexpr std::string_view kTupleMethods[] = {"count", "index"};
constexpr std::string_view kIntMethods[] = {"as_integer_ratio", "bit_count",  "bit_length",
                                            "conjugate",        "from_bytes", "to_bytes"};
constexpr std::string_view kFloatMethods[] = {"as_integer_ratio", "conjugate", "fromhex", "hex",
                                              "is_integer"};
constexpr std::string_view kRangeMethods[] = {"count", "index"};
constexpr std::string_view kLoopMethods[] = {"cycle", "changed"};

template <size_t N>
bool In(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value Method(const Value& self, std::string_view name) {
  auto data = std::make_shared<CallableData>();
  data->type = CallableType::kMethod;
  data->name = std::string(name);
  data->self = self;
  return Value::Callable(std::move(data));
}

std::optional<Value> LoopAttribute(const Value& self, std::string_view name) {
  const LoopData& loop = self.as_loop();
  const int64_t length = static_cast<int64_t>(loop.items->items.size());
  const int64_t i = loop.index0;
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(length - i);
  if (name == "revindex0") return Value::Int(length - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i == length - 1);
  if (name == "length") return Value::Int(length);
  if (name == "depth") return Value::Int(loop.depth0 + 1);
  if (name == "depth0") return Value::Int(loop.depth0);
  if (name == "previtem") {
    if (i == 0) return Value::Undefined("there is no previous item");
    return loop.items->items[i - 1];
  }
  if (name == "nextitem") {
    if (i + 1 >= length) return Value::Undefined("there is no next item");
    return loop.items->items[i + 1];
  }
  if (In(kLoopMethods, name)) return Method(self, name);
  return std::nullopt;
}

}  // namespace

std::optional<Value> GetBuiltinAttribute(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case ValueKind::kString:
      if (In(kStrMethods, name)) return Method(object, name);
      return std::nullopt;
    case ValueKind::kDict:
      if (In(kDictMutating, name)) return UnsafeAttribute(object, name);
      if (In(kDictMethods, name)) return Method(object, name);
      return std::nullopt;
    case ValueKind::kList: {
      const SeqKind kind = object.as_list().kind;
      if (kind == SeqKind::kList) {
        if (In(kListMutating, name)) return UnsafeAttribute(object, name);
        if (In(kListMethods, name)) return Method(object, name);
      } else if (kind == SeqKind::kTuple) {
        if (object.as_list().group_tuple && name == "grouper") return object.as_list().items[0];
        if (object.as_list().group_tuple && name == "list") return object.as_list().items[1];
        if (In(kTupleMethods, name)) return Method(object, name);
      } else if (kind == SeqKind::kRange) {
        const ListData& r = object.as_list();
        if (name == "start") return Value::Int(r.range_start);
        if (name == "stop") return Value::Int(r.range_stop);
        if (name == "step") return Value::Int(r.range_step);
        if (In(kRangeMethods, name)) return Method(object, name);
      }
      return std::nullopt;
    }
    case ValueKind::kBool:
    case ValueKind::kInt:
      if (name == "real" || name == "numerator")
        return Value::Int(object.as_int(), object.from_input());
      if (name == "imag") return Value::Int(0);
      if (name == "denominator") return Value::Int(1);
      if (In(kIntMethods, name)) return Method(object, name);
      return std::nullopt;
    case ValueKind::kFloat:
      if (name == "real") return object;
      if (name == "imag") return Value::Float(0.0);
      if (In(kFloatMethods, name)) return Method(object, name);
      return std::nullopt;
    case ValueKind::kLoop:
      return LoopAttribute(object, name);
    default:
      return std::nullopt;
  }
}

namespace {

absl::StatusOr<std::optional<int64_t>> OptionalIndex(const BoundArgs& a, size_t i) {
  if (!a.Has(i) || a.Get(i)->is_none()) return std::optional<int64_t>();
  if (!a.Get(i)->is_int() && !a.Get(i)->is_bool()) {
    return Error("slice indices must be integers or None or have an __index__ method");
  }
  return std::optional<int64_t>(a.Get(i)->as_int());
}

absl::StatusOr<std::string_view> StrArg(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    return Error(Cat(what, "must be str, not ", TypeName(v)));
  }
  return v.str();
}

absl::StatusOr<std::optional<std::string_view>> StripChars(const BoundArgs& a,
                                                           std::string_view method) {
  if (!a.Has(0) || a.Get(0)->is_none()) return std::optional<std::string_view>();
  if (!a.Get(0)->is_string()) return Error(Cat(method, " arg must be None or str"));
  return std::optional<std::string_view>(a.Get(0)->str());
}

Value Strings(const std::vector<TString>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const TString& p : parts) items.push_back(Value::String(p));
  return Value::List(std::move(items));
}

template <typename Pred>
Value AllChars(const Value& self, Pred pred) {
  const std::string_view s = self.str();
  if (s.empty()) return Value::Bool(false);
  for (size_t pos = 0; pos < s.size();) {
    if (!pred(DecodeUtf8(s, pos))) return Value::Bool(false);
  }
  return Value::Bool(true);
}

absl::StatusOr<Value> CallStrMethod(Renderer& r, const Value& self, std::string_view name,
                                    CallArgs& args) {
  const TString& s = self.as_string();
  const std::string fn = Cat("str.", name);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"chars"}, 0, false, false, 0));
    TP_ASSIGN_OR_RETURN(auto chars, StripChars(a, name));
    const StripSide side = name == "strip"    ? StripSide::kBoth
                           : name == "lstrip" ? StripSide::kLeft
                                              : StripSide::kRight;
    return Value::String(PyStrip(s, chars, side));
  }
  if (name == "split" || name == "rsplit") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"sep", "maxsplit"}, 0, false, false, 0));
    std::optional<std::string_view> sep;
    if (a.Has(0) && !a.Get(0)->is_none()) {
      TP_ASSIGN_OR_RETURN(sep, StrArg(*a.Get(0), "sep "));
      if (sep->empty()) return Error("empty separator");
    }
    TP_ASSIGN_OR_RETURN(int64_t maxsplit, IndexArg(a.Or(1, Value::Int(-1))));
    std::vector<TString> parts =
        name == "split" ? PySplit(s, sep, maxsplit) : PyRSplit(s, sep, maxsplit);
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(parts.size())));
    return Strings(parts);
  }
  if (name == "splitlines") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"keepends"}, 0, false, false, 0));
    std::vector<TString> lines = PySplitLines(s, a.Has(0) && Truthy(*a.Get(0)));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(lines.size())));
    return Strings(lines);
  }
  if (name == "startswith" || name == "endswith") {
    TP_ASSIGN_OR_RETURN(BoundArgs a,
                        BindArgs(fn, args, {"prefix", "start", "end"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> start, OptionalIndex(a, 1));
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> end, OptionalIndex(a, 2));
    const Value& prefix = *a.Get(0);
    std::vector<Value> candidates;
    if (prefix.is_string()) {
      candidates.push_back(prefix);
    } else if (prefix.is_list() && prefix.as_list().kind == SeqKind::kTuple) {
      candidates = prefix.as_list().items;
    } else {
      return Error(Cat(name, " first arg must be str or a tuple of str, not ", TypeName(prefix)));
    }
    for (const Value& c : candidates) {
      if (!c.is_string()) {
        return Error(Cat("tuple for ", name, " must only contain str, not ", TypeName(c)));
      }
      if (PyStartsWith(s.view(), c.str(), start, end, name == "endswith")) return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "upper") return Value::String(TString::Derived(PyUpper(s.view()), s.any_input()));
  if (name == "lower" || name == "casefold") {
    return Value::String(TString::Derived(PyLower(s.view()), s.any_input()));
  }
  if (name == "title") return Value::String(TString::Derived(PyTitle(s.view()), s.any_input()));
  if (name == "capitalize") {
    return Value::String(TString::Derived(PyCapitalize(s.view()), s.any_input()));
  }
  if (name == "swapcase") {
    return Value::String(TString::Derived(PySwapCase(s.view()), s.any_input()));
  }
  if (name == "replace") {
    TP_ASSIGN_OR_RETURN(BoundArgs a,
                        BindArgs(fn, args, {"old", "new", "count"}, 2, false, false, 0));
    // The checks and messages of str.replace; the work is the replace filter's (same bound on
    // the result's size).
    TP_RETURN_IF_ERROR(StrArg(*a.Get(0), "replace() argument 1 ").status());
    if (!a.Get(1)->is_string()) {
      return Error(Cat("replace() argument 2 must be str, not ", TypeName(*a.Get(1))));
    }
    TP_ASSIGN_OR_RETURN(int64_t count, IndexArg(a.Or(2, Value::Int(-1))));
    CallArgs filter_args;
    filter_args.positional = {*a.Get(0), *a.Get(1), Value::Int(count)};
    return r.CallFilter("replace", self, filter_args);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    TP_ASSIGN_OR_RETURN(BoundArgs a,
                        BindArgs(fn, args, {"sub", "start", "end"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(std::string_view sub, StrArg(*a.Get(0), "must be str, not "));
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> start, OptionalIndex(a, 1));
    TP_ASSIGN_OR_RETURN(std::optional<int64_t> end, OptionalIndex(a, 2));
    if (name == "count") return Value::Int(PyCount(s.view(), sub, start, end));
    const int64_t found = PyFind(s.view(), sub, start, end, name[0] == 'r');
    if (found < 0 && (name == "index" || name == "rindex")) return Error("substring not found");
    return Value::Int(found);
  }
  if (name == "join") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"iterable"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*a.Get(0)));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
    TString out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return Error(
            Cat("sequence item ", i, ": expected str instance, ", TypeName(items[i]), " found"));
      }
      if (i > 0) out.Append(s);
      out.Append(items[i].as_string());
      TP_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "format") {
    TP_ASSIGN_OR_RETURN(TString out, StrFormat(r, s, args));
    return Value::String(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"width", "fillchar"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(int64_t width, IndexArg(*a.Get(0)));
    TP_RETURN_IF_ERROR(r.CheckStringSize(std::max<int64_t>(width, 0)));
    const Value fill = a.Or(1, Value::String(" "));
    if (!fill.is_string() || CodePointLength(fill.str()) != 1) {
      return Error("The fill character must be exactly one character long");
    }
    return Value::String(PyPad(s, width, fill.str(),
                               name == "center"  ? 0
                               : name == "ljust" ? -1
                                                 : 1));
  }
  if (name == "zfill") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"width"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(int64_t width, IndexArg(*a.Get(0)));
    TP_RETURN_IF_ERROR(r.CheckStringSize(std::max<int64_t>(width, 0)));
    return Value::String(PyZfill(s, width));
  }
  if (name == "partition" || name == "rpartition") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"sep"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(std::string_view sep, StrArg(*a.Get(0), "must be str, not "));
    if (sep.empty()) return Error("empty separator");
    std::vector<TString> parts = PyPartition(s, sep, name == "rpartition");
    return Value::Tuple(
        {Value::String(parts[0]), Value::String(parts[1]), Value::String(parts[2])});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"affix"}, 1, false, false, 0));
    TP_ASSIGN_OR_RETURN(std::string_view affix,
                        StrArg(*a.Get(0), Cat(name, "() argument must be str, not ").c_str()));
    const std::string_view v = s.view();
    if (name == "removeprefix" && v.substr(0, affix.size()) == affix) {
      return Value::String(s.Substr(affix.size(), v.size()));
    }
    if (name == "removesuffix" && !affix.empty() && v.size() >= affix.size() &&
        v.substr(v.size() - affix.size()) == affix) {
      return Value::String(s.Substr(0, v.size() - affix.size()));
    }
    return self;
  }
  // Predicates.
  TP_RETURN_IF_ERROR(BindArgs(fn, args, {}, 0, false, false, 0).status());
  if (name == "isdigit") return AllChars(self, IsPyDigit);
  if (name == "isdecimal") return AllChars(self, IsPyDecimal);
  if (name == "isnumeric") return AllChars(self, IsPyNumeric);
  if (name == "isalpha") return AllChars(self, IsPyAlpha);
  if (name == "isspace") return AllChars(self, IsPySpace);
  if (name == "isalnum") {
    return AllChars(self, [](char32_t c) {
      return IsPyAlpha(c) || IsPyDecimal(c) || IsPyDigit(c) || IsPyNumeric(c);
    });
  }
  if (name == "isascii") return Value::Bool(IsAscii(s.view()));
  if (name == "isprintable") {
    for (size_t pos = 0; pos < s.size();) {
      if (!IsPyPrintable(DecodeUtf8(s.view(), pos))) return Value::Bool(false);
    }
    return Value::Bool(true);
  }
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (size_t pos = 0; pos < s.size();) {
      const char32_t c = DecodeUtf8(s.view(), pos);
      if (IsPyTitle(c) || (name == "islower" ? IsPyUpper(c) : IsPyLower(c))) {
        return Value::Bool(false);
      }
      if (name == "islower" ? IsPyLower(c) : IsPyUpper(c)) cased = true;
    }
    return Value::Bool(cased);
  }
  if (name == "istitle") {
    bool cased = false, previous_cased = false;
    for (size_t pos = 0; pos < s.size();) {
      const char32_t c = DecodeUtf8(s.view(), pos);
      if (IsPyUpper(c) || IsPyTitle(c)) {
        if (previous_cased) return Value::Bool(false);
        previous_cased = cased = true;
      } else if (IsPyLower(c)) {
        if (!previous_cased) return Value::Bool(false);
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return Value::Bool(cased);
  }
  if (name == "isidentifier") {
    bool first = true;
    for (size_t pos = 0; pos < s.size(); first = false) {
      const char32_t c = DecodeUtf8(s.view(), pos);
      const bool ok = c == '_' || IsPyAlpha(c) || (!first && (IsPyDecimal(c) || IsPyDigit(c)));
      if (!ok) return Value::Bool(false);
    }
    return Value::Bool(!s.empty());
  }
  return Error(Cat("str.", name, "() is not supported by this interpreter"));
}

// markupsafe.Markup's overrides of str methods: string arguments are escaped and string
// results are Markup again.
absl::StatusOr<Value> CallMarkupMethod(Renderer& r, const Value& self, std::string_view name,
                                       CallArgs& args) {
  static constexpr std::string_view kWrapped[] = {
      "capitalize", "title",    "lower",  "upper",     "replace",    "ljust",
      "rjust",      "lstrip",   "rstrip", "center",    "strip",      "translate",
      "expandtabs", "swapcase", "zfill",  "partition", "rpartition", "format"};
  auto escape = [](Value& v) {
    if (v.is_string() && !v.is_markup()) v = EscapeToMarkup(v);
  };
  const Value plain = Value::String(self.as_string());
  if (In(kWrapped, name)) {
    for (Value& v : args.positional) escape(v);
    for (auto& [k, v] : args.keyword) escape(v);
  }
  if (name == "join" && !args.positional.empty()) {
    TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(args.positional[0]));
    for (Value& item : items) escape(item);
    args.positional[0] = Value::List(std::move(items));
  }
  TP_ASSIGN_OR_RETURN(Value result, CallStrMethod(r, plain, name, args));
  if (In(kWrapped, name) || name == "join") {
    if (result.is_string()) return Value::Markup(result.as_string());
  }
  if (name == "split" || name == "rsplit" || name == "splitlines" || name == "partition" ||
      name == "rpartition") {
    std::vector<Value> items;
    for (const Value& item : result.as_list().items)
      items.push_back(Value::Markup(item.as_string()));
    return Value::List(std::move(items), result.as_list().kind);
  }
  return result;
}

absl::StatusOr<Value> CallDictMethod(Renderer& r, const Value& self, std::string_view name,
                                     CallArgs& args) {
  const DictData& dict = self.as_dict();
  const std::string fn = Cat("dict.", name);
  if (name == "get") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"key", "default"}, 1, false, false, 0));
    TP_RETURN_IF_ERROR(CheckHashable(*a.Get(0)));
    if (const Value* found = dict.Find(*a.Get(0))) return *found;
    return a.Or(1, Value::None());
  }
  TP_RETURN_IF_ERROR(BindArgs(fn, args, {}, 0, false, false, 0).status());
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(dict.size())));
  if (name == "items" || name == "keys" || name == "values") {
    std::vector<Value> items;
    items.reserve(dict.size());
    for (const auto& [key, value] : dict.entries()) {
      items.push_back(name == "items" ? Value::Tuple({key, value}) : name == "keys" ? key : value);
    }
    return Value::List(std::move(items), name == "items"  ? SeqKind::kDictItems
                                         : name == "keys" ? SeqKind::kDictKeys
                                                          : SeqKind::kDictValues);
  }
  if (name == "copy") return Value::Dict(dict);
  return Error(Cat("dict.", name, "() is not supported by this interpreter"));
}

absl::StatusOr<Value> CallSequenceMethod(Renderer& r, const Value& self, std::string_view name,
                                         CallArgs& args) {
  const ListData& list = self.as_list();
  const std::string type = TypeName(self);
  const std::string fn = Cat(type, ".", name);
  if (name == "copy") {
    TP_RETURN_IF_ERROR(BindArgs(fn, args, {}, 0, false, false, 0).status());
    return Value::List(list.items);
  }
  if (name == "count") {
    TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs(fn, args, {"value"}, 1, false, false, 0));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(list.items.size())));
    return Value::Int(std::count_if(list.items.begin(), list.items.end(),
                                    [&](const Value& v) { return PyEquals(v, *a.Get(0)); }));
  }
  if (name == "index") {
    TP_ASSIGN_OR_RETURN(BoundArgs a,
                        BindArgs(fn, args, {"value", "start", "stop"}, 1, false, false, 0));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(list.items.size())));
    const int64_t n = static_cast<int64_t>(list.items.size());
    auto clamp = [&](const Value* v, int64_t dflt) -> absl::StatusOr<int64_t> {
      if (v == nullptr) return dflt;
      TP_ASSIGN_OR_RETURN(int64_t x, IndexArg(*v));
      if (x < 0) x = std::max<int64_t>(0, x + n);
      return std::min(x, n);
    };
    TP_ASSIGN_OR_RETURN(int64_t start, clamp(a.Get(1), 0));
    TP_ASSIGN_OR_RETURN(int64_t stop, clamp(a.Get(2), n));
    for (int64_t i = start; i < stop; ++i) {
      if (PyEquals(list.items[i], *a.Get(0))) return Value::Int(i);
    }
    if (list.kind == SeqKind::kTuple) return Error("tuple.index(x): x not in tuple");
    if (list.kind == SeqKind::kRange) return Error(Cat(PyRepr(*a.Get(0)), " is not in range"));
    return Error(Cat(PyRepr(*a.Get(0)), " is not in list"));
  }
  return Error(Cat(fn, "() is not supported by this interpreter"));
}

absl::StatusOr<Value> CallNumberMethod(const Value& self, std::string_view name, CallArgs& args) {
  const std::string fn = Cat(TypeName(self), ".", name);
  TP_RETURN_IF_ERROR(BindArgs(fn, args, {}, 0, false, false, 0).status());
  if (name == "conjugate")
    return self.is_float() ? self : Value::Int(self.as_int(), self.from_input());
  if (name == "is_integer") {
    const double d = self.as_float();
    return Value::Bool(std::isfinite(d) && d == std::floor(d));
  }
  if (name == "bit_length") {
    uint64_t m = self.as_int() < 0 ? 0 - static_cast<uint64_t>(self.as_int())
                                   : static_cast<uint64_t>(self.as_int());
    int bits = 0;
    while (m > 0) ++bits, m >>= 1;
    return Value::Int(bits);
  }
  return Error(Cat(fn, "() is not supported by this interpreter"));
}

absl::StatusOr<Value> CallLoopMethod(const Value& self, std::string_view name, CallArgs& args) {
  LoopData& loop = self.as_loop();
  if (!args.keyword.empty()) {
    return Error(Cat("LoopContext.", name, "() got an unexpected keyword argument '",
                     args.keyword.front().first, "'"));
  }
  if (name == "cycle") {
    if (args.positional.empty()) return Error("no items for cycling given");
    return args.positional[static_cast<size_t>(loop.index0) % args.positional.size()];
  }
  // changed(*values)
  bool same = loop.has_changed_value && loop.last_changed_value.size() == args.positional.size();
  for (size_t i = 0; same && i < args.positional.size(); ++i) {
    same = PyEquals(loop.last_changed_value[i], args.positional[i]);
  }
  if (same) return Value::Bool(false);
  loop.has_changed_value = true;
  loop.last_changed_value = args.positional;
  return Value::Bool(true);
}

}  // namespace

absl::StatusOr<Value> CallMethod(Renderer& renderer, const CallableData& method, CallArgs& args) {
  const Value& self = method.self;
  switch (self.kind()) {
    case ValueKind::kString:
      if (self.is_markup()) return CallMarkupMethod(renderer, self, method.name, args);
      return CallStrMethod(renderer, self, method.name, args);
    case ValueKind::kDict:
      return CallDictMethod(renderer, self, method.name, args);
    case ValueKind::kList:
      return CallSequenceMethod(renderer, self, method.name, args);
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kFloat:
      return CallNumberMethod(self, method.name, args);
    case ValueKind::kLoop:
      return CallLoopMethod(self, method.name, args);
    default:
      break;
  }
  return Error(Cat(method.name, "() is not supported"));
}

}  // namespace tpserve::jinja
