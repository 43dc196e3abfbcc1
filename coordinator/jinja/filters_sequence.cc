// jinja2's filters on sequences and mappings (jinja2/filters.py). Those jinja2 writes as
// Python generators (map, select, reject, selectattr, rejectattr, unique, items, batch, slice)
// return lazy generators here too: their body, and its errors, run when first iterated.
#include <algorithm>

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

std::vector<Value> AttributeParts(const Value& attribute) {
  std::vector<Value> parts;
  if (attribute.is_none()) return parts;
  if (!attribute.is_string()) return {attribute};
  for (const TString& part : PySplit(attribute.as_string(), ".", -1)) {
    const std::string_view p = part.view();
    const bool digits =
        !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
    parts.push_back(digits && p.size() < 18 ? Value::Int(std::stoll(std::string(p)))
                                            : Value::String(part));
  }
  return parts;
}

Value IgnoreCase(const Value& v) {
  if (!v.is_string()) return v;
  return Value::String(TString::Derived(PyLower(v.str()), v.as_string().any_input()));
}

absl::StatusOr<Value> LookupPath(Renderer& r, Value item, const std::vector<Value>& parts,
                                 const Value* default_value) {
  for (const Value& part : parts) {
    TP_ASSIGN_OR_RETURN(item, r.GetItem(item, part));
    if (default_value != nullptr && item.is_undefined()) item = *default_value;
  }
  return item;
}

// Key for sort/unique/min/max: the attribute (comma-separated for sort), lowercased unless
// case-sensitive.
absl::StatusOr<Value> SortKey(Renderer& r, const Value& item,
                              const std::vector<std::vector<Value>>& attribute_lists, bool multi,
                              bool case_sensitive) {
  if (!multi) {
    TP_ASSIGN_OR_RETURN(Value v, LookupPath(r, item, attribute_lists[0], nullptr));
    return case_sensitive ? v : IgnoreCase(v);
  }
  std::vector<Value> keys;
  for (const auto& parts : attribute_lists) {
    TP_ASSIGN_OR_RETURN(Value v, LookupPath(r, item, parts, nullptr));
    keys.push_back(case_sensitive ? v : IgnoreCase(v));
  }
  return Value::List(std::move(keys));
}

absl::Status StableSort(std::vector<size_t>& order, const std::vector<Value>& keys, bool reverse) {
  absl::Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    absl::StatusOr<int> c = reverse ? PyCompare(keys[b], keys[a]) : PyCompare(keys[a], keys[b]);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return *c == -1;
  });
  return error;
}

// ----- filters -----

absl::StatusOr<std::vector<Value>> FilterBatchBody(Renderer& r, const Value& v, CallArgs args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_batch", args, {"linecount", "fill_with"}, 1));
  TP_ASSIGN_OR_RETURN(int64_t count, IndexArg(*a.Get(0)));
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> batches;
  std::vector<Value> current;
  for (Value& item : items) {
    if (static_cast<int64_t>(current.size()) == count) {
      batches.push_back(Value::List(std::move(current)));
      current.clear();
    }
    current.push_back(std::move(item));
  }
  if (!current.empty()) {
    const Value fill = a.Or(1, Value::None());
    if (!fill.is_none()) {
      while (static_cast<int64_t>(current.size()) < count) current.push_back(fill);
    }
    batches.push_back(Value::List(std::move(current)));
  }
  return batches;
}

absl::StatusOr<Value> FilterDictsort(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a,
                      BindArgs("do_dictsort", args, {"case_sensitive", "by", "reverse"}, 0));
  const bool case_sensitive = a.Has(0) && Truthy(*a.Get(0));
  const Value by = a.Or(1, Value::String("key"));
  const bool reverse = a.Has(2) && Truthy(*a.Get(2));
  int pos;
  if (by.is_string() && by.str() == "key") {
    pos = 0;
  } else if (by.is_string() && by.str() == "value") {
    pos = 1;
  } else {
    return Error("You can only sort by either \"key\" or \"value\"");
  }
  if (!v.is_dict()) {
    return Error(Cat("'", TypeName(v), "' object has no attribute 'items'"));
  }
  std::vector<Value> pairs;
  std::vector<Value> keys;
  for (const auto& [key, value] : v.as_dict().entries()) {
    pairs.push_back(Value::Tuple({key, value}));
    const Value& k = pos == 0 ? key : value;
    keys.push_back(case_sensitive ? k : IgnoreCase(k));
  }
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(pairs.size())));
  std::vector<size_t> order(pairs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  TP_RETURN_IF_ERROR(StableSort(order, keys, reverse));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(pairs[i]);
  return Value::List(std::move(sorted));
}

absl::StatusOr<Value> FilterFirst(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("sync_do_first", args, {}, 0).status());
  if (v.is_list()) {
    const ListData& list = v.as_list();
    if (list.kind == SeqKind::kGenerator || list.kind == SeqKind::kReverseIterator) {
      TP_RETURN_IF_ERROR(Materialize(list));
      if (list.consumed < list.items.size()) return list.items[list.consumed++];
      return Value::Undefined("No first item, sequence was empty.");
    }
  }
  if (v.is_string()) {
    if (v.str().empty()) return Value::Undefined("No first item, sequence was empty.");
    return Value::String(PyStrAt(v.as_string(), 0));
  }
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

absl::StatusOr<Value> FilterGroupby(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("sync_do_groupby", args,
                                            {"attribute", "default", "case_sensitive"}, 1));
  const std::vector<Value> parts = AttributeParts(*a.Get(0));
  const Value default_value = a.Or(1, Value::None());
  const Value* dflt = default_value.is_none() ? nullptr : &default_value;
  const bool case_sensitive = a.Has(2) && Truthy(*a.Get(2));
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> keys, real_keys;
  for (const Value& item : items) {
    TP_ASSIGN_OR_RETURN(Value key, LookupPath(r, item, parts, dflt));
    real_keys.push_back(key);
    keys.push_back(case_sensitive ? key : IgnoreCase(key));
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  TP_RETURN_IF_ERROR(StableSort(order, keys, false));
  std::vector<Value> groups;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    std::vector<Value> members;
    while (j < order.size() && PyEquals(keys[order[j]], keys[order[i]])) {
      members.push_back(items[order[j]]);
      ++j;
    }
    auto group = std::make_shared<ListData>();
    group->kind = SeqKind::kTuple;
    group->group_tuple = true;
    group->items = {real_keys[order[i]], Value::List(std::move(members))};
    group->depth = 1 + std::max(ValueDepth(group->items[0]), ValueDepth(group->items[1]));
    groups.push_back(Value::List({}).WithList(std::move(group)));
    i = j;
  }
  return Value::List(std::move(groups));
}

absl::StatusOr<std::vector<Value>> FilterItemsBody(Renderer& r, const Value& v, CallArgs args) {
  TP_RETURN_IF_ERROR(BindArgs("do_items", args, {}, 0).status());
  if (v.is_undefined()) return std::vector<Value>();
  if (!v.is_dict()) return Error("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.as_dict().entries())
    pairs.push_back(Value::Tuple({key, value}));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(pairs.size())));
  return pairs;
}

absl::StatusOr<Value> FilterJoin(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("sync_do_join", args, {"d", "attribute"}, 0));
  const TString separator = Text(a.Or(0, Value::String("")));
  const Value attribute = a.Or(1, Value::None());
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  const std::vector<Value> parts = AttributeParts(attribute);
  TString out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.Append(separator);
    if (!parts.empty()) {
      TP_ASSIGN_OR_RETURN(items[i], LookupPath(r, items[i], parts, nullptr));
    }
    out.Append(Text(items[i]));
    TP_RETURN_IF_ERROR(r.CheckStringSize(out.size()));
  }
  return Str(std::move(out));
}

absl::StatusOr<Value> FilterLast(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_last", args, {}, 0).status());
  if (v.is_list() &&
      (v.as_list().kind == SeqKind::kGenerator || v.as_list().kind == SeqKind::kReverseIterator)) {
    return Error(Cat("'", TypeName(v), "' object is not reversible"));
  }
  if (v.is_string()) {
    const int64_t n = CodePointLength(v.str());
    if (n == 0) return Value::Undefined("No last item, sequence was empty.");
    return Value::String(PyStrAt(v.as_string(), n - 1));
  }
  if (v.is_none() || v.is_number() || v.is_namespace() || v.is_callable()) {
    return Error(Cat("'", TypeName(v), "' object is not reversible"));
  }
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

absl::StatusOr<Value> FilterLength(Renderer&, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("len", args, {}, 0, false, false, 1).status());
  TP_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value::Int(n);
}

absl::StatusOr<Value> FilterList(Renderer& r, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("sync_do_list", args, {}, 0).status());
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  return Value::List(std::move(items));
}

absl::StatusOr<std::vector<Value>> FilterMapBody(Renderer& r, const Value& v, CallArgs args) {
  if (!Truthy(v)) return std::vector<Value>();
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> out;
  out.reserve(items.size());
  const bool by_attribute = args.positional.empty() &&
                            std::any_of(args.keyword.begin(), args.keyword.end(),
                                        [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, default_value;
    for (auto& [k, val] : args.keyword) {
      if (k == "attribute") {
        attribute = val;
      } else if (k == "default") {
        default_value = val;
      } else {
        return Error(Cat("Unexpected keyword argument ", StrRepr(k)));
      }
    }
    const std::vector<Value> parts = AttributeParts(attribute);
    for (const Value& item : items) {
      TP_ASSIGN_OR_RETURN(
          Value mapped,
          LookupPath(r, item, parts, default_value.is_none() ? nullptr : &default_value));
      out.push_back(std::move(mapped));
    }
    return out;
  }
  if (args.positional.empty()) return Error("map requires a filter argument");
  const Value name = args.positional[0];
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  if (!name.is_string()) return Error(Cat("No filter named ", PyRepr(name), "."));
  for (const Value& item : items) {
    CallArgs call = rest;
    TP_ASSIGN_OR_RETURN(Value mapped, r.CallFilter(name.str(), item, call));
    out.push_back(std::move(mapped));
  }
  return out;
}

absl::StatusOr<Value> MinOrMax(Renderer& r, const Value& v, CallArgs& args, bool max) {
  TP_ASSIGN_OR_RETURN(
      BoundArgs a, BindArgs(max ? "do_max" : "do_min", args, {"case_sensitive", "attribute"}, 0));
  const bool case_sensitive = a.Has(0) && Truthy(*a.Get(0));
  const std::vector<std::vector<Value>> parts = {AttributeParts(a.Or(1, Value::None()))};
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  size_t best = 0;
  TP_ASSIGN_OR_RETURN(Value best_key, SortKey(r, items[0], parts, false, case_sensitive));
  for (size_t i = 1; i < items.size(); ++i) {
    TP_ASSIGN_OR_RETURN(Value key, SortKey(r, items[i], parts, false, case_sensitive));
    // Python's max keeps the first of equal items; it asks key > best (min: key < best).
    TP_ASSIGN_OR_RETURN(int c, max ? PyCompare(best_key, key) : PyCompare(key, best_key));
    if (c == -1) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

absl::StatusOr<Value> FilterMax(Renderer& r, const Value& v, CallArgs& args) {
  return MinOrMax(r, v, args, true);
}

absl::StatusOr<Value> FilterMin(Renderer& r, const Value& v, CallArgs& args) {
  return MinOrMax(r, v, args, false);
}

absl::StatusOr<std::vector<Value>> SelectOrRejectBody(Renderer& r, const Value& v, CallArgs args,
                                                      bool select, bool by_attribute) {
  if (!Truthy(v)) return std::vector<Value>();
  size_t off = 0;
  std::vector<Value> parts;
  if (by_attribute) {
    if (args.positional.empty()) return Error("Missing parameter for attribute name");
    parts = AttributeParts(args.positional[0]);
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > off) {
    const Value& name = args.positional[off];
    if (!name.is_string()) return Error(Cat("No test named ", PyRepr(name), "."));
    test = std::string(name.str());
    test_args.positional.assign(args.positional.begin() + off + 1, args.positional.end());
  }
  test_args.keyword = args.keyword;
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> out;
  for (Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      TP_ASSIGN_OR_RETURN(subject, LookupPath(r, item, parts, nullptr));
    }
    bool passed;
    if (test) {
      CallArgs call = test_args;
      TP_ASSIGN_OR_RETURN(passed, r.CallTest(*test, subject, call));
    } else {
      passed = Truthy(subject);
    }
    if (passed == select) out.push_back(std::move(item));
  }
  return out;
}

int ArgsDepth(const Value& v, const CallArgs& args) {
  int depth = ValueDepth(v);
  for (const Value& a : args.positional) depth = std::max(depth, ValueDepth(a));
  for (const auto& [k, a] : args.keyword) depth = std::max(depth, ValueDepth(a));
  return depth + 1;
}

absl::StatusOr<std::vector<Value>> FilterSliceBody(Renderer& r, const Value& v, CallArgs args);

absl::StatusOr<std::vector<Value>> FilterUniqueBody(Renderer& r, const Value& v, CallArgs args);

// jinja2's generator filters: the body runs when the result is first iterated.
#define TP_LAZY_FILTER(Name, python_name, ...)                                   \
  absl::StatusOr<Value> Name(Renderer& r, const Value& v, CallArgs& args) {      \
    __VA_ARGS__;                                                                 \
    return Value::Generator(python_name, ArgsDepth(v, args),                     \
                            [&r, v, args]() { return Name##Body(r, v, args); }); \
  }

TP_LAZY_FILTER(
    FilterBatch, "do_batch",
    TP_RETURN_IF_ERROR(BindArgs("do_batch", args, {"linecount", "fill_with"}, 1).status()))

TP_LAZY_FILTER(FilterItems, "do_items",
               TP_RETURN_IF_ERROR(BindArgs("do_items", args, {}, 0).status()))

TP_LAZY_FILTER(FilterMap, "sync_do_map", (void)0)

TP_LAZY_FILTER(
    FilterSlice, "sync_do_slice",
    TP_RETURN_IF_ERROR(BindArgs("sync_do_slice", args, {"slices", "fill_with"}, 1).status()))

TP_LAZY_FILTER(
    FilterUnique, "sync_do_unique",
    TP_RETURN_IF_ERROR(BindArgs("do_unique", args, {"case_sensitive", "attribute"}, 0).status()))

#undef TP_LAZY_FILTER

Value SelectOrReject(Renderer& r, const Value& v, CallArgs& args, bool select, bool by_attribute) {
  return Value::Generator("select_or_reject", ArgsDepth(v, args),
                          [&r, v, args, select, by_attribute]() {
                            return SelectOrRejectBody(r, v, args, select, by_attribute);
                          });
}

absl::StatusOr<Value> FilterSelect(Renderer& r, const Value& v, CallArgs& args) {
  return SelectOrReject(r, v, args, true, false);
}

absl::StatusOr<Value> FilterReject(Renderer& r, const Value& v, CallArgs& args) {
  return SelectOrReject(r, v, args, false, false);
}

absl::StatusOr<Value> FilterSelectattr(Renderer& r, const Value& v, CallArgs& args) {
  return SelectOrReject(r, v, args, true, true);
}

absl::StatusOr<Value> FilterRejectattr(Renderer& r, const Value& v, CallArgs& args) {
  return SelectOrReject(r, v, args, false, true);
}

absl::StatusOr<Value> FilterReverse(Renderer& r, const Value& v, CallArgs& args) {
  TP_RETURN_IF_ERROR(BindArgs("do_reverse", args, {}, 0).status());
  if (v.is_string()) {
    return Value::StringLike(PyStrSlice(v.as_string(), std::nullopt, std::nullopt, -1),
                             v.is_markup());
  }
  if (v.is_list() &&
      (v.as_list().kind == SeqKind::kGenerator || v.as_list().kind == SeqKind::kReverseIterator)) {
    TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (v.is_list() || v.is_dict() || v.is_undefined()) {
    TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
    std::reverse(items.begin(), items.end());
    auto data = std::make_shared<ListData>();
    data->kind = SeqKind::kReverseIterator;
    data->items = std::move(items);
    // The iterator Python's reversed() returns, for its repr.
    if (v.is_dict()) {
      data->repr_name = "dict_reversekeyiterator";
    } else if (v.is_list()) {
      switch (v.as_list().kind) {
        case SeqKind::kList:
          data->repr_name = "list_reverseiterator";
          break;
        case SeqKind::kRange:
          data->repr_name = "range_iterator";
          break;
        case SeqKind::kDictKeys:
          data->repr_name = "dict_reversekeyiterator";
          break;
        case SeqKind::kDictValues:
          data->repr_name = "dict_reversevalueiterator";
          break;
        case SeqKind::kDictItems:
          data->repr_name = "dict_reverseitemiterator";
          break;
        default:
          data->repr_name = "reversed";
          break;
      }
    } else {
      data->repr_name = "reversed";
    }
    for (const Value& item : data->items) data->depth = std::max(data->depth, 1 + ValueDepth(item));
    return Value::List({}).WithList(std::move(data));
  }
  return Error("argument must be iterable");
}

absl::StatusOr<std::vector<Value>> FilterSliceBody(Renderer& r, const Value& v, CallArgs args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("sync_do_slice", args, {"slices", "fill_with"}, 1));
  TP_ASSIGN_OR_RETURN(int64_t slices, IndexArg(*a.Get(0)));
  TP_ASSIGN_OR_RETURN(std::vector<Value> seq, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(seq.size())));
  if (slices <= 0) return Error("integer division or modulo by zero");
  const int64_t length = static_cast<int64_t>(seq.size());
  const int64_t items_per_slice = length / slices;
  const int64_t slices_with_extra = length % slices;
  const Value fill = a.Or(1, Value::None());
  std::vector<Value> out;
  int64_t offset = 0;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * items_per_slice;
    if (i < slices_with_extra) ++offset;
    const int64_t end = offset + (i + 1) * items_per_slice;
    std::vector<Value> part(seq.begin() + std::min(start, length),
                            seq.begin() + std::min(end, length));
    if (!fill.is_none() && i >= slices_with_extra) part.push_back(fill);
    out.push_back(Value::List(std::move(part)));
  }
  return out;
}

absl::StatusOr<Value> FilterSort(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a,
                      BindArgs("do_sort", args, {"reverse", "case_sensitive", "attribute"}, 0));
  const bool reverse = a.Has(0) && Truthy(*a.Get(0));
  const bool case_sensitive = a.Has(1) && Truthy(*a.Get(1));
  const Value attribute = a.Or(2, Value::None());
  std::vector<std::vector<Value>> parts;
  bool multi = false;
  if (attribute.is_string()) {
    multi = true;
    for (const TString& piece : PySplit(attribute.as_string(), ",", -1)) {
      parts.push_back(AttributeParts(Value::String(piece)));
    }
  } else {
    parts.push_back(AttributeParts(attribute));
  }
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> keys;
  for (const Value& item : items) {
    TP_ASSIGN_OR_RETURN(Value key, SortKey(r, item, parts, multi, case_sensitive));
    keys.push_back(std::move(key));
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  TP_RETURN_IF_ERROR(StableSort(order, keys, reverse));
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  return Value::List(std::move(sorted));
}

absl::StatusOr<Value> FilterSum(Renderer& r, const Value& v, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("sync_do_sum", args, {"attribute", "start"}, 0));
  const std::vector<Value> parts = AttributeParts(a.Or(0, Value::None()));
  Value total = a.Or(1, Value::Int(0));
  if (total.is_string()) return Error("sum() can't sum strings [use ''.join(seq) instead]");
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  for (const Value& item : items) {
    TP_ASSIGN_OR_RETURN(Value x, LookupPath(r, item, parts, nullptr));
    TP_ASSIGN_OR_RETURN(total, BinaryOperation(BinaryOp::kAdd, total, x, r));
  }
  return total;
}

absl::StatusOr<std::vector<Value>> FilterUniqueBody(Renderer& r, const Value& v, CallArgs args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("do_unique", args, {"case_sensitive", "attribute"}, 0));
  const bool case_sensitive = a.Has(0) && Truthy(*a.Get(0));
  const std::vector<std::vector<Value>> parts = {AttributeParts(a.Or(1, Value::None()))};
  TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(items.size())));
  std::vector<Value> seen, out;
  for (const Value& item : items) {
    TP_ASSIGN_OR_RETURN(Value key, SortKey(r, item, parts, false, case_sensitive));
    TP_RETURN_IF_ERROR(CheckHashable(key));
    TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(seen.size())));  // comparisons made
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return PyEquals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return out;
}

constexpr FilterEntry kSequenceFilters[] = {
    {"batch", FilterBatch},     {"count", FilterLength},    {"dictsort", FilterDictsort},
    {"first", FilterFirst},     {"groupby", FilterGroupby}, {"items", FilterItems},
    {"join", FilterJoin},       {"last", FilterLast},       {"length", FilterLength},
    {"list", FilterList},       {"map", FilterMap},         {"max", FilterMax},
    {"min", FilterMin},         {"reject", FilterReject},   {"rejectattr", FilterRejectattr},
    {"reverse", FilterReverse}, {"select", FilterSelect},   {"selectattr", FilterSelectattr},
    {"slice", FilterSlice},     {"sort", FilterSort},       {"sum", FilterSum},
    {"unique", FilterUnique},
};

}  // namespace

absl::Span<const FilterEntry> SequenceFilters() { return kSequenceFilters; }

}  // namespace tpserve::jinja
