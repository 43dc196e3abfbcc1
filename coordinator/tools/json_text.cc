#include "coordinator/tools/json_text.h"

#include <cstring>

#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes that may appear outside strings in JSON: structure, numbers, true/false/null.
bool IsBareJsonByte(char c) {
  if (IsJsonSpace(c) || (c >= '0' && c <= '9')) return true;
  return std::strchr(",:-+.eEtrufalsn", c) != nullptr && c != '\0';
}

size_t SkipSpace(std::string_view s, size_t p) {
  while (p < s.size() && IsJsonSpace(s[p])) ++p;
  return p;
}

// One past the closing quote of the string that opens at s[p].
size_t StringEnd(std::string_view s, size_t p) {
  for (++p; p < s.size(); ++p) {
    if (s[p] == '\\') {
      ++p;
    } else if (s[p] == '"') {
      return p + 1;
    }
  }
  return s.size();
}

// One past the last byte of the value that starts at s[p] (valid JSON assumed).
size_t ValueEnd(std::string_view s, size_t p) {
  int depth = 0;
  size_t last = p;  // one past the last non-space byte
  while (p < s.size()) {
    const char c = s[p];
    if (c == '"') {
      p = StringEnd(s, p);
      last = p;
      continue;
    }
    if (depth == 0 && (c == ',' || c == '}' || c == ']')) break;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ++p;
    if (!IsJsonSpace(c)) last = p;
  }
  return last;
}

}  // namespace

JsonExtentScanner::State JsonExtentScanner::Scan(std::string_view text) {
  for (; state_ == kIncomplete && scanned_ < text.size(); ++scanned_) {
    const char c = text[scanned_];
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        state_ = kInvalid;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (static_cast<int>(open_.size()) == kMaxDepth) {
        state_ = kInvalid;
      } else {
        open_.push_back(c);
      }
    } else if (c == '}' || c == ']') {
      if (open_.empty() || open_.back() != (c == '}' ? '{' : '[')) {
        state_ = kInvalid;
      } else {
        open_.pop_back();
        if (open_.empty()) {
          state_ = kComplete;
          end_ = scanned_ + 1;
        }
      }
    } else if (!IsBareJsonByte(c) || open_.empty()) {
      state_ = kInvalid;
    }
  }
  return state_;
}

bool IsValidJson(std::string_view text) { return nlohmann::json::accept(text.begin(), text.end()); }

std::vector<JsonMember> ObjectMembers(std::string_view s) {
  std::vector<JsonMember> members;
  size_t p = SkipSpace(s, 1);
  while (p < s.size() && s[p] == '"') {
    const size_t key_end = StringEnd(s, p);
    JsonMember m;
    m.key = nlohmann::json::parse(s.substr(p, key_end - p)).get<std::string>();
    p = SkipSpace(s, SkipSpace(s, key_end) + 1);  // past ':'
    const size_t value_end = ValueEnd(s, p);
    m.value = s.substr(p, value_end - p);
    members.push_back(std::move(m));
    p = SkipSpace(s, value_end);
    if (p < s.size() && s[p] == ',') p = SkipSpace(s, p + 1);
  }
  return members;
}

std::vector<std::string_view> ArrayElements(std::string_view s) {
  std::vector<std::string_view> elements;
  size_t p = SkipSpace(s, 1);
  while (p < s.size() && s[p] != ']') {
    const size_t end = ValueEnd(s, p);
    elements.push_back(s.substr(p, end - p));
    p = SkipSpace(s, end);
    if (p < s.size() && s[p] == ',') p = SkipSpace(s, p + 1);
  }
  return elements;
}

std::optional<std::string> ArgumentsText(std::string_view value) {
  if (!value.empty() && value.front() == '{') return std::string(value);
  if (value.empty() || value.front() != '"') return std::nullopt;
  std::string inner = nlohmann::json::parse(value).get<std::string>();
  size_t start = SkipSpace(inner, 0);
  if (start == inner.size() || inner[start] != '{' || !IsValidJson(inner)) return std::nullopt;
  return inner;
}

std::optional<JsonCall> DecodeJsonCall(std::string_view object_text) {
  if (object_text.empty() || object_text.front() != '{' || !IsValidJson(object_text)) {
    return std::nullopt;
  }
  std::optional<std::string> name;
  std::optional<std::string> arguments;
  bool saw_arguments = false;
  for (const JsonMember& m : ObjectMembers(object_text)) {
    if (m.key == "name") {
      if (name.has_value() || m.value.empty() || m.value.front() != '"') return std::nullopt;
      name = nlohmann::json::parse(m.value).get<std::string>();
    } else if (m.key == "arguments" || m.key == "parameters") {
      if (saw_arguments) return std::nullopt;
      saw_arguments = true;
      if (m.value == "null") continue;
      arguments = ArgumentsText(m.value);
      if (!arguments.has_value()) return std::nullopt;
    }
  }
  if (!name.has_value() || name->empty()) return std::nullopt;
  return JsonCall{std::move(*name), arguments.has_value() ? std::move(*arguments) : "{}"};
}

}  // namespace tpserve
