// TString: the string value of the interpreter. UTF-8 bytes plus the sorted byte ranges of
// them that came from user input (provenance), kept exact through concatenation and slicing.
//
//   TString s("<|im_start|>user\n");       // template text: not input
//   s.Append(TString::Input(content));    // message content: input
//   s.Substr(3, 9).input_spans();          // the part of the input inside bytes [3, 9)
//
// Transformations that cannot follow bytes (upper, replace, tojson...) build their result
// with TString::Derived(bytes, any_input), marking all of it as input when any input went in.
// Threading: a value type; no shared state.
#ifndef TPSERVE_COORDINATOR_JINJA_TAINTED_STRING_H_
#define TPSERVE_COORDINATOR_JINJA_TAINTED_STRING_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpserve::jinja {

// Debian's Abseil has a string_view type of its own; this converts for absl::StrCat and
// absl containers.
inline absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

template <typename T>
decltype(auto) AbslArg(const T& v) {
  if constexpr (std::is_convertible_v<const T&, std::string_view> &&
                !std::is_convertible_v<const T&, absl::string_view>) {
    return Absl(std::string_view(v));
  } else {
    return (v);
  }
}
// absl::StrCat / StrAppend that also take std::string_view.
template <typename... Args>
std::string Cat(const Args&... args) {
  return absl::StrCat(AbslArg(args)...);
}
template <typename... Args>
void CatTo(std::string* out, const Args&... args) {
  absl::StrAppend(out, AbslArg(args)...);
}

// Bytes [begin, end) came from input.
struct InputSpan {
  size_t begin;
  size_t end;
  bool operator==(const InputSpan&) const = default;
};

class TString {
 public:
  TString() = default;
  explicit TString(std::string bytes) : bytes_(std::move(bytes)) {}
  static TString Input(std::string bytes);
  // All of `bytes` from input when any_input, none of it otherwise.
  static TString Derived(std::string bytes, bool any_input);

  const std::string& bytes() const { return bytes_; }
  std::string_view view() const { return bytes_; }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  // Sorted, disjoint, never adjacent, never empty.
  const std::vector<InputSpan>& input_spans() const { return spans_; }
  bool any_input() const { return !spans_.empty(); }

  void Append(const TString& other);
  void Append(std::string_view bytes, bool from_input = false);
  void Reserve(size_t n) { bytes_.reserve(n); }
  // Bytes [begin, end) with their provenance. REQUIRES: begin <= end <= size().
  TString Substr(size_t begin, size_t end) const;
  void MarkAllInput();

  bool operator==(const TString& other) const { return bytes_ == other.bytes_; }

 private:
  void AddSpan(size_t begin, size_t end);

  std::string bytes_;
  std::vector<InputSpan> spans_;
};

}  // namespace tpserve::jinja

#endif  // TPSERVE_COORDINATOR_JINJA_TAINTED_STRING_H_
