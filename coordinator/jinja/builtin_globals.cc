// Template globals: jinja2's defaults (range as the sandbox limits it, dict, namespace) and
// transformers' raise_exception and strftime_now.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"
#include "base/status_macros.h"
#include "coordinator/jinja/builtins.h"
#include "coordinator/jinja/call_args.h"
#include "coordinator/jinja/operators.h"
#include "coordinator/jinja/renderer.h"
#include "coordinator/jinja/repr.h"

namespace tpserve::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE.
constexpr int64_t kMaxRange = 100000;

absl::StatusOr<Value> GlobalRange(Renderer& r, CallArgs& args) {
  if (!args.keyword.empty())
    return absl::InvalidArgumentError("range() takes no keyword arguments");
  const size_t n = args.positional.size();
  if (n == 0) return absl::InvalidArgumentError("range expected at least 1 argument, got 0");
  if (n > 3) {
    return absl::InvalidArgumentError(Cat("range expected at most 3 arguments, got ", n));
  }
  int64_t bounds[3];
  for (size_t i = 0; i < n; ++i) {
    TP_ASSIGN_OR_RETURN(bounds[i], IndexArg(args.positional[i]));
  }
  const int64_t start = n == 1 ? 0 : bounds[0];
  const int64_t stop = n == 1 ? bounds[0] : bounds[1];
  const int64_t step = n == 3 ? bounds[2] : 1;
  if (step == 0) return absl::InvalidArgumentError("range() arg 3 must not be zero");
  // Length without overflow, as range.__len__.
  const __int128 span =
      step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
  const __int128 abs_step = step > 0 ? step : -static_cast<__int128>(step);
  const __int128 length = span <= 0 ? 0 : (span - 1) / abs_step + 1;
  if (length > kMaxRange) {
    return absl::ResourceExhaustedError(
        Cat("Range too big. The sandbox blocks ranges larger than MAX_RANGE (", kMaxRange, ")."));
  }
  TP_RETURN_IF_ERROR(r.Charge(static_cast<int64_t>(length)));
  return Value::Range(start, stop, step);
}

// dict(*args, **kwargs) / namespace(*args, **kwargs) contents.
absl::StatusOr<DictData> DictFromArgs(std::string_view name, CallArgs& args) {
  DictData dict;
  if (args.positional.size() > 1) {
    return absl::InvalidArgumentError(
        Cat(name, " expected at most 1 argument, got ", args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      dict = source.as_dict();
    } else {
      TP_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(source));
      for (size_t i = 0; i < items.size(); ++i) {
        absl::StatusOr<std::vector<Value>> pair = Iterate(items[i]);
        if (!pair.ok() || pair->size() != 2) {
          return absl::InvalidArgumentError(
              Cat("dictionary update sequence element #", i, " has length ",
                  pair.ok() ? std::to_string(pair->size()) : "?", "; 2 is required"));
        }
        TP_RETURN_IF_ERROR(CheckHashable((*pair)[0]));
        dict.Set((*pair)[0], (*pair)[1]);
      }
    }
  }
  for (auto& [key, value] : args.keyword) dict.Set(Value::String(key), value);
  return dict;
}

absl::StatusOr<Value> GlobalDict(Renderer&, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(DictData dict, DictFromArgs("dict", args));
  return Value::Dict(std::move(dict));
}

absl::StatusOr<Value> GlobalNamespace(Renderer& r, CallArgs& args) {
  auto ns = std::make_shared<NamespaceData>();
  TP_ASSIGN_OR_RETURN(ns->attrs, DictFromArgs("dict", args));
  r.Register(ns);
  return Value::Namespace(std::move(ns));
}

absl::StatusOr<Value> GlobalRaiseException(Renderer&, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a,
                      BindArgs("raise_exception", args, {"message"}, 1, false, false, 0));
  return absl::InvalidArgumentError(PyStr(*a.Get(0)).bytes());
}

std::string Pad(int64_t v, int width, char fill) {
  std::string digits = std::to_string(v);
  if (static_cast<int>(digits.size()) < width) {
    digits.insert(digits.begin(), width - digits.size(), fill);
  }
  return digits;
}

// C strftime (glibc, C locale) on a naive datetime, as Python's datetime.strftime calls it.
std::string Strftime(std::string_view format, absl::Time now) {
  static constexpr const char* kDays[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::CivilSecond t = absl::ToCivilSecond(now, utc);
  const int64_t micros = (absl::ToUnixMicros(now) % 1000000 + 1000000) % 1000000;
  const int weekday = static_cast<int>(absl::GetWeekday(t));  // Monday = 0
  const int yday = absl::GetYearDay(t);                       // 1..366
  const int hour12 = t.hour() % 12 == 0 ? 12 : t.hour() % 12;
  const std::string day_name = kDays[weekday];
  const std::string month_name = kMonths[t.month() - 1];
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    size_t j = i + 1;
    char flag = 0;
    if (format[j] == '-' || format[j] == '_' || format[j] == '0') flag = format[j++];
    if (j >= format.size()) {
      out.append(format.substr(i));
      break;
    }
    auto num = [&](int64_t v, int width) {
      if (flag == '-') return std::to_string(v);
      return Pad(v, width, flag == '_' ? ' ' : '0');
    };
    const int sunday_week = (yday + 6 - (weekday + 1) % 7) / 7;
    const int monday_week = (yday + 6 - weekday) / 7;
    switch (format[j]) {
      case 'a':
        out += day_name.substr(0, 3);
        break;
      case 'A':
        out += day_name;
        break;
      case 'b':
      case 'h':
        out += month_name.substr(0, 3);
        break;
      case 'B':
        out += month_name;
        break;
      case 'c':
        out += Cat(day_name.substr(0, 3), " ", month_name.substr(0, 3), " ", Pad(t.day(), 2, ' '),
                   " ", Pad(t.hour(), 2, '0'), ":", Pad(t.minute(), 2, '0'), ":",
                   Pad(t.second(), 2, '0'), " ", t.year());
        break;
      case 'C':
        out += num(t.year() / 100, 2);
        break;
      case 'd':
        out += num(t.day(), 2);
        break;
      case 'D':
        out += Cat(Pad(t.month(), 2, '0'), "/", Pad(t.day(), 2, '0'), "/",
                   Pad(t.year() % 100, 2, '0'));
        break;
      case 'e':
        out += flag ? num(t.day(), 2) : Pad(t.day(), 2, ' ');
        break;
      case 'f':
        out += Pad(micros, 6, '0');
        break;
      case 'F':
        out += Cat(t.year(), "-", Pad(t.month(), 2, '0'), "-", Pad(t.day(), 2, '0'));
        break;
      case 'H':
        out += num(t.hour(), 2);
        break;
      case 'I':
        out += num(hour12, 2);
        break;
      case 'j':
        out += num(yday, 3);
        break;
      case 'k':
        out += flag ? num(t.hour(), 2) : Pad(t.hour(), 2, ' ');
        break;
      case 'l':
        out += flag ? num(hour12, 2) : Pad(hour12, 2, ' ');
        break;
      case 'm':
        out += num(t.month(), 2);
        break;
      case 'M':
        out += num(t.minute(), 2);
        break;
      case 'n':
        out += "\n";
        break;
      case 'p':
        out += t.hour() < 12 ? "AM" : "PM";
        break;
      case 'P':
        out += t.hour() < 12 ? "am" : "pm";
        break;
      case 'r':
        out += Cat(Pad(hour12, 2, '0'), ":", Pad(t.minute(), 2, '0'), ":", Pad(t.second(), 2, '0'),
                   " ", t.hour() < 12 ? "AM" : "PM");
        break;
      case 'R':
        out += Cat(Pad(t.hour(), 2, '0'), ":", Pad(t.minute(), 2, '0'));
        break;
      case 's':
        out += std::to_string(absl::ToUnixSeconds(now));
        break;
      case 'S':
        out += num(t.second(), 2);
        break;
      case 't':
        out += "\t";
        break;
      case 'T':
      case 'X':
        out +=
            Cat(Pad(t.hour(), 2, '0'), ":", Pad(t.minute(), 2, '0'), ":", Pad(t.second(), 2, '0'));
        break;
      case 'u':
        out += std::to_string(weekday + 1);
        break;
      case 'U':
        out += num(sunday_week, 2);
        break;
      case 'w':
        out += std::to_string((weekday + 1) % 7);
        break;
      case 'W':
        out += num(monday_week, 2);
        break;
      case 'x':
        out += Cat(Pad(t.month(), 2, '0'), "/", Pad(t.day(), 2, '0'), "/",
                   Pad(t.year() % 100, 2, '0'));
        break;
      case 'y':
        out += num(t.year() % 100, 2);
        break;
      case 'Y':
        out += std::to_string(t.year());
        break;
      case 'z':
      case 'Z':
        break;  // a naive datetime has no zone
      case '%':
        out += "%";
        break;
      default:
        out.append(format.substr(i, j + 1 - i));
        break;
    }
    i = j;
  }
  return out;
}

absl::StatusOr<Value> GlobalStrftimeNow(Renderer& r, CallArgs& args) {
  TP_ASSIGN_OR_RETURN(BoundArgs a, BindArgs("strftime_now", args, {"format"}, 1, false, false, 0));
  const Value& format = *a.Get(0);
  if (!format.is_string()) {
    return absl::InvalidArgumentError(
        Cat("strftime() argument 1 must be str, not ", TypeName(format)));
  }
  const std::string text = Strftime(format.str(), r.now());
  TP_RETURN_IF_ERROR(r.CheckStringSize(text.size()));
  return Value::String(TString::Derived(text, format.as_string().any_input()));
}

absl::StatusOr<Value> GlobalUnsupported(Renderer&, CallArgs&) {
  return absl::InvalidArgumentError("lipsum, cycler and joiner are not supported");
}

struct GlobalEntry {
  std::string_view name;
  BuiltinFunction fn;
};

constexpr GlobalEntry kGlobals[] = {
    {"range", GlobalRange},
    {"dict", GlobalDict},
    {"namespace", GlobalNamespace},
    {"raise_exception", GlobalRaiseException},
    {"strftime_now", GlobalStrftimeNow},
    {"lipsum", GlobalUnsupported},
    {"cycler", GlobalUnsupported},
    {"joiner", GlobalUnsupported},
};

}  // namespace

Value FindGlobal(std::string_view name) {
  for (const GlobalEntry& g : kGlobals) {
    if (g.name != name) continue;
    static const auto* const kValues = [] {
      auto* values = new std::vector<Value>;
      for (const GlobalEntry& e : kGlobals) {
        auto data = std::make_shared<CallableData>();
        data->type = CallableType::kBuiltinFunction;
        data->name = std::string(e.name);
        data->builtin = e.fn;
        values->push_back(Value::Callable(std::move(data)));
      }
      return values;
    }();
    return (*kValues)[&g - kGlobals];
  }
  return Value::Undefined("");
}

}  // namespace tpserve::jinja
