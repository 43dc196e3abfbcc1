// Finds special-token text (e.g. "<|im_start|>") inside raw input before pre-tokenization,
// with llama.cpp's rule: tokens are tried longest first, each splitting every remaining text
// fragment at all of its non-overlapping occurrences (left to right). User-defined tokens
// are always matched; control tokens only when the caller allows special tokens, so text a
// user typed stays plain text by default.
//
//   SpecialTokenSplitter splitter({{1, "<|im_start|>", true}});
//   splitter.Split("a<|im_start|>b", /*match_control=*/true);  // "a", [1], "b"
//
// Threading: immutable after construction; Split is safe from many threads at once.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_SPECIAL_TOKEN_SPLITTER_H_
#define TPSERVE_COORDINATOR_TOKENIZER_SPECIAL_TOKEN_SPLITTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

class SpecialTokenSplitter {
 public:
  struct Entry {
    int32_t id;
    std::string text;
    bool is_control;  // false: user-defined, matched even when special tokens are not allowed
  };
  // A piece of the input: plain text (special_id < 0) or one matched special token.
  struct Fragment {
    std::string_view text;
    int32_t special_id;
  };

  // Entries with empty text are ignored.
  explicit SpecialTokenSplitter(std::vector<Entry> entries);

  // The fragments of `text` in order; their texts concatenate to `text`. Empty plain
  // fragments are never produced.
  std::vector<Fragment> Split(std::string_view text, bool match_control) const;

 private:
  std::vector<Entry> entries_;  // longest text first, then lowest id
  bool has_user_defined_ = false;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_SPECIAL_TOKEN_SPLITTER_H_
