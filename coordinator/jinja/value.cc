// Value construction and Python's object protocol: truthiness, type names, ==, <, hashing.
#include "coordinator/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace tpserve::jinja {

Value Value::Undefined(std::string message, bool security_error) {
  auto data = std::make_shared<UndefinedData>();
  data->hint = std::move(message);
  data->security_error = security_error;
  Value v;
  v.payload_ = std::shared_ptr<const UndefinedData>(std::move(data));
  return v;
}

Value Value::UndefinedLookup(Value object, Value name) {
  auto data = std::make_shared<UndefinedData>();
  data->is_lookup = true;
  data->object = std::move(object);
  data->name = std::move(name);
  Value v;
  v.payload_ = std::shared_ptr<const UndefinedData>(std::move(data));
  return v;
}
Value Value::None(bool from_input) {
  Value v;
  v.from_input_ = from_input;
  return v;
}
Value Value::Bool(bool b, bool from_input) {
  Value v;
  v.payload_ = b;
  v.from_input_ = from_input;
  return v;
}
Value Value::Int(int64_t i, bool from_input) {
  Value v;
  v.payload_ = i;
  v.from_input_ = from_input;
  return v;
}
Value Value::Float(double d, bool from_input) {
  Value v;
  v.payload_ = d;
  v.from_input_ = from_input;
  return v;
}
Value Value::String(TString s) {
  Value v;
  v.payload_ = std::make_shared<const TString>(std::move(s));
  return v;
}
Value Value::Markup(TString s) {
  Value v = String(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::List(std::vector<Value> items, SeqKind kind) {
  auto data = std::make_shared<ListData>();
  data->kind = kind;
  data->items = std::move(items);
  for (const Value& item : data->items) data->depth = std::max(data->depth, 1 + ValueDepth(item));
  Value v;
  v.payload_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}
Value Value::Generator(std::string repr_name, int depth,
                       std::function<absl::StatusOr<std::vector<Value>>()> body) {
  auto data = std::make_shared<ListData>();
  data->kind = SeqKind::kGenerator;
  data->depth = depth;
  data->body = std::move(body);
  data->repr_name = std::move(repr_name);
  Value v;
  v.payload_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}

absl::Status Materialize(const ListData& list) {
  if (!list.body) return absl::OkStatus();
  GeneratorBody body = std::move(list.body);
  list.body = nullptr;
  absl::StatusOr<std::vector<Value>> items = body();
  if (!items.ok()) return items.status();
  list.items = std::move(*items);
  return absl::OkStatus();
}

Value Value::Range(int64_t start, int64_t stop, int64_t step) {
  auto data = std::make_shared<ListData>();
  data->kind = SeqKind::kRange;
  data->range_start = start;
  data->range_stop = stop;
  data->range_step = step;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    data->items.push_back(Value::Int(i));
  }
  Value v;
  v.payload_ = std::shared_ptr<const ListData>(std::move(data));
  return v;
}
Value Value::Dict(DictData dict) {
  Value v;
  v.payload_ = std::make_shared<const DictData>(std::move(dict));
  return v;
}
Value Value::Namespace(std::shared_ptr<NamespaceData> ns) {
  Value v;
  v.payload_ = std::move(ns);
  return v;
}
Value Value::Callable(std::shared_ptr<const CallableData> callable) {
  Value v;
  v.payload_ = std::move(callable);
  return v;
}
Value Value::Loop(std::shared_ptr<LoopData> loop) {
  Value v;
  v.payload_ = std::move(loop);
  return v;
}

ValueKind Value::kind() const {
  switch (payload_.index()) {
    case 0:
      return ValueKind::kNone;
    case 1:
      return ValueKind::kBool;
    case 2:
      return ValueKind::kInt;
    case 3:
      return ValueKind::kFloat;
    case 4:
      return ValueKind::kString;
    case 5:
      return ValueKind::kList;
    case 6:
      return ValueKind::kDict;
    case 7:
      return ValueKind::kNamespace;
    case 8:
      return ValueKind::kCallable;
    case 9:
      return ValueKind::kLoop;
    default:
      return ValueKind::kUndefined;
  }
}

bool Value::is_sequence() const {
  if (!is_list()) return false;
  const SeqKind k = as_list().kind;
  return k == SeqKind::kList || k == SeqKind::kTuple || k == SeqKind::kRange;
}

Value Value::WithInputFlag(bool from_input) const {
  Value v = *this;
  v.from_input_ = from_input;
  return v;
}

Value Value::WithList(std::shared_ptr<const ListData> data) const {
  Value v;
  v.payload_ = std::move(data);
  return v;
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(payload_);
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(payload_);
  return static_cast<double>(as_int());
}

const void* Value::identity() const {
  return std::visit(
      [](const auto& p) -> const void* {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, bool> ||
                      std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
          return nullptr;
        } else {
          return p.get();
        }
      },
      payload_);
}

namespace {

size_t FindLinear(const std::vector<std::pair<Value, Value>>& entries, const Value& key) {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (PyEquals(entries[i].first, key)) return i;
  }
  return entries.size();
}

constexpr size_t kIndexFrom = 8;

}  // namespace

const Value* DictData::Find(const Value& key) const {
  if (!string_index_.empty() && key.is_string()) {
    auto it = string_index_.find(Absl(key.str()));
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  const size_t i = FindLinear(entries_, key);
  return i == entries_.size() ? nullptr : &entries_[i].second;
}

const Value* DictData::FindString(std::string_view key) const {
  if (!string_index_.empty()) {
    auto it = string_index_.find(Absl(key));
    return it == string_index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void DictData::Set(Value key, Value value) {
  size_t i;
  if (!string_index_.empty() && key.is_string()) {
    auto it = string_index_.find(Absl(key.str()));
    i = it == string_index_.end() ? entries_.size() : it->second;
  } else {
    i = FindLinear(entries_, key);
  }
  if (i < entries_.size()) {
    depth_ = std::max(depth_, 1 + ValueDepth(value));
    entries_[i].second = std::move(value);
    return;
  }
  depth_ = std::max({depth_, 1 + ValueDepth(key), 1 + ValueDepth(value)});
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() == kIndexFrom) {
    for (size_t j = 0; j < entries_.size(); ++j) {
      if (entries_[j].first.is_string())
        string_index_.emplace(std::string(entries_[j].first.str()), j);
    }
  } else if (entries_.size() > kIndexFrom && entries_.back().first.is_string()) {
    string_index_.emplace(std::string(entries_.back().first.str()), entries_.size() - 1);
  }
}

int ValueDepth(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kList:
      return v.as_list().depth;
    case ValueKind::kDict:
      return v.as_dict().depth();
    case ValueKind::kNamespace:
      return 1;
    default:
      return 0;
  }
}

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return v.as_bool();
    case ValueKind::kInt:
      return v.as_int() != 0;
    case ValueKind::kFloat:
      return v.as_float() != 0.0;
    case ValueKind::kString:
      return !v.str().empty();
    case ValueKind::kList: {
      const ListData& list = v.as_list();
      if (list.kind == SeqKind::kGenerator || list.kind == SeqKind::kReverseIterator) return true;
      return !list.items.empty();
    }
    case ValueKind::kDict:
      return v.as_dict().size() != 0;
    case ValueKind::kLoop:
      return v.as_loop().items->items.size() != 0;
    case ValueKind::kNamespace:
    case ValueKind::kCallable:
      return true;
  }
  return true;
}

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return "Undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return v.is_markup() ? "Markup" : "str";
    case ValueKind::kList:
      switch (v.as_list().kind) {
        case SeqKind::kList:
          return "list";
        case SeqKind::kTuple:
          return "tuple";
        case SeqKind::kRange:
          return "range";
        case SeqKind::kGenerator:
          return "generator";
        case SeqKind::kReverseIterator:
          return "list_reverseiterator";
        case SeqKind::kDictKeys:
          return "dict_keys";
        case SeqKind::kDictValues:
          return "dict_values";
        case SeqKind::kDictItems:
          return "dict_items";
      }
      return "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "Namespace";
    case ValueKind::kLoop:
      return "LoopContext";
    case ValueKind::kCallable:
      switch (v.as_callable().type) {
        case CallableType::kBuiltinFunction: {
          const std::string& name = v.as_callable().name;
          return name == "namespace" || name == "dict" || name == "cycler" || name == "joiner"
                     ? "type"
                     : "function";
        }
        case CallableType::kMethod:
          return v.as_callable().self.is_loop() ? "method" : "builtin_function_or_method";
        case CallableType::kMacro:
          return "Macro";
      }
  }
  return "object";
}

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_none()) return "None";
  switch (v.kind()) {
    case ValueKind::kNamespace:
      return "jinja2.utils.Namespace object";
    case ValueKind::kLoop:
      return "jinja2.runtime.LoopContext object";
    case ValueKind::kUndefined:
      return "jinja2.runtime.Undefined object";
    case ValueKind::kString:
      if (v.is_markup()) return "markupsafe.Markup object";
      break;
    case ValueKind::kCallable:
      if (v.as_callable().type == CallableType::kMacro) return "jinja2.runtime.Macro object";
      break;
    default:
      break;
  }
  return TypeName(v) + " object";
}

bool IsHashable(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kDict:
      return false;
    case ValueKind::kList: {
      const ListData& list = v.as_list();
      switch (list.kind) {
        case SeqKind::kTuple:
          for (const Value& item : list.items) {
            if (!IsHashable(item)) return false;
          }
          return true;
        case SeqKind::kList:
        case SeqKind::kDictKeys:
        case SeqKind::kDictItems:
          return false;
        default:
          return true;
      }
    }
    default:
      return true;
  }
}

absl::Status CheckHashable(const Value& v) {
  if (IsHashable(v)) return absl::OkStatus();
  if (v.is_list() && v.as_list().kind == SeqKind::kTuple) {
    for (const Value& item : v.as_list().items) {
      if (!IsHashable(item)) return CheckHashable(item);
    }
  }
  return absl::InvalidArgumentError(Cat("unhashable type: '", TypeName(v), "'"));
}

namespace {

// Exact comparison of an int with a double (Python compares them exactly).
int CompareIntFloat(int64_t i, double d) {
  if (std::isnan(d)) return 2;  // unordered
  if (d >= 9.3e18) return -1;
  if (d <= -9.3e18) return 1;
  const double fl = std::floor(d);
  const int64_t di = static_cast<int64_t>(fl);
  if (i < di) return -1;
  if (i > di) return 1;
  return fl == d ? 0 : -1;  // i == floor(d) < d when d has a fraction
}

int CompareNumbers(const Value& a, const Value& b) {
  if (!a.is_float() && !b.is_float()) {
    const int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_float() && b.is_float()) {
    const double x = a.as_float(), y = b.as_float();
    if (std::isnan(x) || std::isnan(y)) return 2;
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_float()) {
    const int c = CompareIntFloat(b.as_int(), a.as_float());
    return c == 2 ? 2 : -c;
  }
  return CompareIntFloat(a.as_int(), b.as_float());
}

bool SameSeqFamily(const ListData& a, const ListData& b) {
  auto family = [](SeqKind k) { return k == SeqKind::kRange ? SeqKind::kRange : k; };
  return family(a.kind) == family(b.kind);
}

}  // namespace

bool PyEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return CompareNumbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.str() == b.str();
    case ValueKind::kList: {
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      if (&x == &y) return true;
      if (!SameSeqFamily(x, y)) return false;
      if (x.kind == SeqKind::kGenerator || x.kind == SeqKind::kReverseIterator) return false;
      if (x.items.size() != y.items.size()) return false;
      if (x.kind == SeqKind::kDictKeys || x.kind == SeqKind::kDictItems) {
        for (const Value& item : x.items) {  // set semantics
          bool found = false;
          for (const Value& other : y.items) {
            if (PyEquals(item, other)) {
              found = true;
              break;
            }
          }
          if (!found) return false;
        }
        return true;
      }
      if (x.kind == SeqKind::kDictValues) return false;  // dict_values compare by identity
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!PyEquals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !PyEquals(value, *other)) return false;
      }
      return true;
    }
    case ValueKind::kCallable: {
      const CallableData& x = a.as_callable();
      const CallableData& y = b.as_callable();
      if (&x == &y) return true;
      if (x.type == CallableType::kMethod && y.type == CallableType::kMethod) {
        return x.name == y.name && a.identity() == b.identity() && PyEquals(x.self, y.self) &&
               x.self.identity() == y.self.identity();
      }
      return x.type == y.type && x.builtin != nullptr && x.builtin == y.builtin;
    }
    default:
      return a.identity() == b.identity();
  }
}

absl::StatusOr<int> PyCompare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    const int c = CompareNumbers(a, b);
    return c == 2 ? 3 : c;  // 3: unordered (NaN); callers treat it as "false"
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const ListData& x = a.as_list();
    const ListData& y = b.as_list();
    if (x.kind == y.kind && (x.kind == SeqKind::kList || x.kind == SeqKind::kTuple)) {
      const size_t n = std::min(x.items.size(), y.items.size());
      for (size_t i = 0; i < n; ++i) {
        if (PyEquals(x.items[i], y.items[i])) continue;
        return PyCompare(x.items[i], y.items[i], op);
      }
      return x.items.size() < y.items.size() ? -1 : (x.items.size() > y.items.size() ? 1 : 0);
    }
  }
  return absl::InvalidArgumentError(Cat("'", op, "' not supported between instances of '",
                                        TypeName(a), "' and '", TypeName(b), "'"));
}

bool ContainsInput(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kString:
      return v.as_string().any_input();
    case ValueKind::kList:
      for (const Value& item : v.as_list().items) {
        if (ContainsInput(item)) return true;
      }
      return false;
    case ValueKind::kDict:
      for (const auto& [key, value] : v.as_dict().entries()) {
        if (ContainsInput(key) || ContainsInput(value)) return true;
      }
      return false;
    case ValueKind::kNamespace:
      return true;  // mutable and possibly cyclic: assume so
    default:
      return v.from_input();
  }
}

}  // namespace tpserve::jinja
