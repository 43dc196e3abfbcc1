// Template: parsing, the conversion of the JSON arguments to values, and the output runs.
#include "coordinator/jinja/template.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "coordinator/jinja/ast.h"
#include "coordinator/jinja/parser.h"
#include "coordinator/jinja/renderer.h"

namespace tpserve::jinja {
namespace {

absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& j, bool from_input, int depth) {
  if (depth > kMaxValueDepth) {
    return absl::InvalidArgumentError(
        Cat("render arguments nested deeper than ", kMaxValueDepth, " levels"));
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::None(from_input);
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>(), from_input);
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>(), from_input);
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Value::Float(static_cast<double>(u), from_input);  // Python would keep a big int
      }
      return Value::Int(static_cast<int64_t>(u), from_input);
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>(), from_input);
    case nlohmann::ordered_json::value_t::string: {
      std::string s = j.get<std::string>();
      return Value::String(from_input ? TString::Input(std::move(s)) : TString(std::move(s)));
    }
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) {
        TP_ASSIGN_OR_RETURN(Value v, FromJson(item, from_input, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      DictData dict;
      for (const auto& [key, item] : j.items()) {
        TP_ASSIGN_OR_RETURN(Value v, FromJson(item, from_input, depth + 1));
        dict.Set(Value::String(from_input ? TString::Input(key) : TString(key)), std::move(v));
      }
      return Value::Dict(std::move(dict));
    }
    default:
      return absl::InvalidArgumentError("render arguments hold a value JSON cannot express");
  }
}

absl::Status AddGlobals(const nlohmann::ordered_json& object, bool from_input,
                        std::string_view what, absl::flat_hash_map<std::string, Value>& globals) {
  if (object.is_null()) return absl::OkStatus();
  if (!object.is_object()) {
    return absl::InvalidArgumentError(
        Cat("the ", what, " argument of Render must be a JSON object"));
  }
  for (const auto& [key, item] : object.items()) {
    TP_ASSIGN_OR_RETURN(Value v, FromJson(item, from_input, 1));
    if (!globals.emplace(key, std::move(v)).second) {
      return absl::InvalidArgumentError(Cat("\"", key, "\" is both an input and a trusted value"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Options TransformersOptions() { return Options(); }

absl::StatusOr<Template> Template::Parse(std::string_view source, const Options& options) {
  TP_ASSIGN_OR_RETURN(std::shared_ptr<const Program> program, ParseProgram(source, options));
  return Template(std::move(program));
}

const Options& Template::options() const { return program_->options; }

absl::StatusOr<std::vector<OutputRun>> Template::Render(const nlohmann::ordered_json& input,
                                                        const nlohmann::ordered_json& trusted,
                                                        absl::Time now) const {
  absl::flat_hash_map<std::string, Value> globals;
  TP_RETURN_IF_ERROR(AddGlobals(trusted, /*from_input=*/false, "trusted", globals));
  TP_RETURN_IF_ERROR(AddGlobals(input, /*from_input=*/true, "input", globals));
  TString text;
  {
    Renderer renderer(*program_, now);
    TP_ASSIGN_OR_RETURN(text, renderer.Render(std::move(globals)));
  }
  std::vector<OutputRun> runs;
  size_t pos = 0;
  auto add = [&](size_t begin, size_t end, bool from_input) {
    if (begin < end) runs.push_back(OutputRun{text.bytes().substr(begin, end - begin), from_input});
  };
  for (const InputSpan& span : text.input_spans()) {
    add(pos, span.begin, false);
    add(span.begin, span.end, true);
    pos = span.end;
  }
  add(pos, text.size(), false);
  return runs;
}

absl::StatusOr<std::string> Template::RenderToString(const nlohmann::ordered_json& input,
                                                     const nlohmann::ordered_json& trusted,
                                                     absl::Time now) const {
  TP_ASSIGN_OR_RETURN(std::vector<OutputRun> runs, Render(input, trusted, now));
  std::string out;
  for (const OutputRun& run : runs) out += run.text;
  return out;
}

}  // namespace tpserve::jinja
