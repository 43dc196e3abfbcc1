// Value: a Python object as a chat template sees it (None, bool, int, float, str, list, tuple,
// dict, Undefined, namespace, callables, the loop object, generators and dict views), with
// Python's truthiness, equality, ordering and type names.
//
//   Value v = Value::List({Value::Int(1), Value::String(TString("a"))});
//   Truthy(v);          // true
//   TypeName(v);        // "list"
//
// Strings carry their input provenance (TString); numbers, bools and None carry one flag,
// `from_input`, set when they came from the input JSON or were computed from such a value.
// Containers are immutable once built (the sandbox forbids mutating methods); only a namespace
// changes, through {% set ns.attr = ... %}.
// Threading: values belong to one render; they are not shared between threads.
#ifndef TPSERVE_COORDINATOR_JINJA_VALUE_H_
#define TPSERVE_COORDINATOR_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "coordinator/jinja/tainted_string.h"

namespace tpserve::jinja {

class Value;
struct ListData;
class DictData;
struct NamespaceData;
struct CallableData;
struct LoopData;
struct UndefinedData;

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list, tuple, range, generator, iterator, dict views: see SeqKind
  kDict,
  kNamespace,
  kCallable,
  kLoop,
};

// What a kList value is in Python. Generators and iterators are single-pass, always truthy and
// have no len(); dict views and ranges have len() but no indexing of their own.
enum class SeqKind {
  kList,
  kTuple,
  kRange,
  kGenerator,
  kReverseIterator,
  kDictKeys,
  kDictValues,
  kDictItems,
};

class Value {
 public:
  Value() = default;  // None
  static Value Undefined(std::string message, bool security_error = false);
  // The Undefined of a failed `object.name` / `object[name]`.
  static Value UndefinedLookup(Value object, Value name);
  static Value None(bool from_input = false);
  static Value Bool(bool b, bool from_input = false);
  static Value Int(int64_t i, bool from_input = false);
  static Value Float(double d, bool from_input = false);
  static Value String(TString s);
  static Value String(std::string trusted_text) { return String(TString(std::move(trusted_text))); }
  // markupsafe.Markup: a str marked HTML-safe (|safe, |escape). It prints as plain text, but
  // combining it with str escapes the str (see operators.cc) and its repr is Markup('...').
  static Value Markup(TString s);
  // `s` as a Markup when `markup`, a str otherwise.
  static Value StringLike(TString s, bool markup) {
    return markup ? Markup(std::move(s)) : String(std::move(s));
  }
  static Value List(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  static Value Tuple(std::vector<Value> items) { return List(std::move(items), SeqKind::kTuple); }
  static Value Range(int64_t start, int64_t stop, int64_t step);
  static Value Dict(DictData dict);
  static Value Namespace(std::shared_ptr<NamespaceData> ns);
  static Value Callable(std::shared_ptr<const CallableData> callable);
  static Value Loop(std::shared_ptr<LoopData> loop);
  // A generator whose items `body` produces when first iterated. `depth` bounds what it may
  // hold (1 + the depth of the values the body reads).
  static Value Generator(std::string repr_name, int depth,
                         std::function<absl::StatusOr<std::vector<Value>>()> body);

  ValueKind kind() const;
  bool is_undefined() const { return kind() == ValueKind::kUndefined; }
  bool is_none() const { return kind() == ValueKind::kNone; }
  bool is_bool() const { return kind() == ValueKind::kBool; }
  bool is_int() const { return kind() == ValueKind::kInt; }  // not bool
  bool is_float() const { return kind() == ValueKind::kFloat; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }  // Python Number
  bool is_string() const { return kind() == ValueKind::kString; }         // str or Markup
  bool is_markup() const { return markup_; }
  bool is_list() const { return kind() == ValueKind::kList; }
  bool is_dict() const { return kind() == ValueKind::kDict; }
  bool is_namespace() const { return kind() == ValueKind::kNamespace; }
  bool is_callable() const { return kind() == ValueKind::kCallable; }
  bool is_loop() const { return kind() == ValueKind::kLoop; }
  // A list, tuple or range: has len() and integer indexing.
  bool is_sequence() const;

  // Scalars: came from input. Other kinds: false (see ContainsInput).
  bool from_input() const { return from_input_; }
  Value WithInputFlag(bool from_input) const;
  // A list value over `data` (for builders that fill ListData themselves).
  Value WithList(std::shared_ptr<const ListData> data) const;

  bool as_bool() const { return std::get<bool>(payload_); }
  int64_t as_int() const;   // bool or int
  double as_float() const;  // any number
  const TString& as_string() const { return *std::get<std::shared_ptr<const TString>>(payload_); }
  std::string_view str() const { return as_string().view(); }
  const ListData& as_list() const { return *std::get<std::shared_ptr<const ListData>>(payload_); }
  const std::shared_ptr<const ListData>& list_ptr() const {
    return std::get<std::shared_ptr<const ListData>>(payload_);
  }
  const DictData& as_dict() const { return *std::get<std::shared_ptr<const DictData>>(payload_); }
  NamespaceData& as_namespace() const {
    return *std::get<std::shared_ptr<NamespaceData>>(payload_);
  }
  const CallableData& as_callable() const {
    return *std::get<std::shared_ptr<const CallableData>>(payload_);
  }
  LoopData& as_loop() const { return *std::get<std::shared_ptr<LoopData>>(payload_); }
  const UndefinedData& as_undefined() const {
    return *std::get<std::shared_ptr<const UndefinedData>>(payload_);
  }
  // Identity for Python's `is` on mutable/heap objects.
  const void* identity() const;

 private:
  using Payload =
      std::variant<std::monostate, bool, int64_t, double, std::shared_ptr<const TString>,
                   std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                   std::shared_ptr<NamespaceData>, std::shared_ptr<const CallableData>,
                   std::shared_ptr<LoopData>, std::shared_ptr<const UndefinedData>>;
  Payload payload_;
  bool from_input_ = false;
  bool markup_ = false;
};

struct UndefinedData {
  std::string hint;        // what an operation on it reports, unless it is a failed lookup:
  bool is_lookup = false;  // object[name] / object.name found nothing (message made on use)
  Value object;
  Value name;
  bool security_error = false;  // an attribute the sandbox refused
};

// Containers deeper than this are refused where a template stores a value (set, namespace
// attributes) and where input is converted, so recursion over values is bounded.
inline constexpr int kMaxValueDepth = 512;
// 0 for scalars; 1 + the deepest item for lists and dicts; 1 for a namespace (its attributes
// are checked when set).
int ValueDepth(const Value& v);

using GeneratorBody = std::function<absl::StatusOr<std::vector<Value>>()>;

struct ListData {
  SeqKind kind = SeqKind::kList;
  int depth = 1;
  // Generators fill `items` on first use (Materialize): jinja2's filters that return
  // generators run their body, and raise their errors, only when iterated.
  mutable std::vector<Value> items;
  mutable GeneratorBody body;
  std::string repr_name;  // kGenerator: the Python function, as in "<generator object NAME>"
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange, for repr
  bool group_tuple = false;                                 // groupby's (grouper, list) namedtuple
  // Generators/iterators: items before this index have been consumed.
  mutable size_t consumed = 0;
};

// An insertion-ordered dict with Python key equality (1 == 1.0 == True).
class DictData {
 public:
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  int depth() const { return depth_; }
  // nullptr when absent. REQUIRES: key is hashable (see IsHashable).
  const Value* Find(const Value& key) const;
  const Value* FindString(std::string_view key) const;
  // Inserts or replaces (keeping the first key and position, as Python does).
  void Set(Value key, Value value);

 private:
  std::vector<std::pair<Value, Value>> entries_;
  int depth_ = 1;
  absl::flat_hash_map<std::string, size_t> string_index_;  // built once the dict grows
};

struct NamespaceData {
  DictData attrs;
};

class Renderer;
struct Scope;
struct MacroStmt;
struct ForStmt;

// Arguments of a call, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using BuiltinFunction = absl::StatusOr<Value> (*)(Renderer& renderer, CallArgs& args);

enum class CallableType {
  kBuiltinFunction,  // a global: range, dict, namespace, raise_exception, strftime_now, ...
  kMethod,           // a bound method of a str/dict/list/tuple/int/float or of `loop`
  kMacro,            // {% macro %}, or the `caller` of a {% call %} block
};

struct CallableData {
  CallableType type;
  std::string name;
  BuiltinFunction builtin = nullptr;  // kBuiltinFunction
  Value self;                         // kMethod: the receiver
  const MacroStmt* macro = nullptr;   // kMacro
  std::shared_ptr<Scope> closure;     // kMacro: the scope the macro was defined in
  bool is_caller = false;             // kMacro: a {% call %} body
};

// The `loop` object of a {% for %}.
struct LoopData {
  std::shared_ptr<const ListData> items;  // after the loop's `if` filter
  int64_t index0 = -1;
  int64_t depth0 = 0;
  bool has_changed_value = false;
  std::vector<Value> last_changed_value;
  const ForStmt* recursive_for = nullptr;  // set for a `recursive` loop
  std::shared_ptr<Scope> outer_scope;      // where the recursive loop runs again
};

// Runs a generator's body if it has not run (no-op for other lists).
absl::Status Materialize(const ListData& list);

// Python's bool(v).
bool Truthy(const Value& v);
// type(v).__name__: "int", "str", "NoneType", "list", "Undefined", "generator", ...
std::string TypeName(const Value& v);
// jinja2's object_type_repr: "None", "dict object", "jinja2.utils.Namespace object", ...
std::string ObjectTypeRepr(const Value& v);
bool IsHashable(const Value& v);
absl::Status CheckHashable(const Value& v);  // "unhashable type: 'list'"
// Python ==.
bool PyEquals(const Value& a, const Value& b);
// Python's <, as -1/0/1 for a total order on comparable values; INVALID_ARGUMENT
// "'<' not supported between instances of 'str' and 'int'" otherwise (`op` names the operator).
absl::StatusOr<int> PyCompare(const Value& a, const Value& b, std::string_view op = "<");
// Does any string (or scalar) inside come from input?
bool ContainsInput(const Value& v);

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_VALUE_H_
