// Pre-tokenizer: splits text into the pieces ("pre-tokens") that BPE encodes independently,
// using the regular expressions of llama.cpp / Hugging Face for each supported model family,
// run by PCRE2 in UTF-8 + Unicode-property mode (JIT-compiled when available).
//
//   TP_ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::Create(PreTokenizerKind::kSmolLm));
//   TP_RETURN_IF_ERROR(pre.Split("Hello world 42", &pieces));  // "Hello", " world", " ", "4", "2"
//
// Invalid UTF-8: each byte that is not part of a well-formed sequence becomes a piece of its
// own, and the valid runs around it are split independently (so the bytes survive a round
// trip; llama.cpp instead turns them into U+FFFD).
//
// Threading: immutable after Create; Split may be called from many threads at once.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_PRE_TOKENIZER_H_
#define TPSERVE_COORDINATOR_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpserve {

enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // SmolLM2 / llama.cpp "smollm": every \p{N} split off alone first, then the GPT-2 rule
  // (Hugging Face: Sequence[Digits(individual_digits), ByteLevel]).
  kSmolLm,
  // Llama 3 / llama.cpp "llama-bpe": letters with one leading non-letter, digits in runs of
  // at most 3, punctuation with trailing newlines, newline runs.
  kLlama3,
  // Qwen2 / Qwen2.5 / Qwen3 / llama.cpp "qwen2": Llama 3's rule but every digit alone.
  kQwen2,
  // Mistral Nemo / llama.cpp "tekken": words split at case changes (ASCII cases only, as
  // llama.cpp reads it), digits alone, punctuation runs with trailing newlines or slashes.
  kTekken,
};

// Maps a GGUF `tokenizer.ggml.pre` value ("default", "gpt2", "smollm", "llama-bpe", "llama3",
// "llama-v3", "qwen2", "deepseek-r1-qwen", "megrez", "tekken") to a kind; UNIMPLEMENTED naming
// the value otherwise.
absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromName(std::string_view name);
std::string_view PreTokenizerKindName(PreTokenizerKind kind);

class PreTokenizer {
 public:
  // INTERNAL if PCRE2 rejects a pattern (a bug here, not bad input).
  static absl::StatusOr<PreTokenizer> Create(PreTokenizerKind kind);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the pieces of `text`, in order, as views into `text`; their concatenation is
  // `text`. INTERNAL if PCRE2 fails at match time (e.g. a resource limit).
  absl::Status Split(std::string_view text, std::vector<std::string_view>* pieces) const;

  PreTokenizerKind kind() const { return kind_; }

 private:
  struct Stage;
  PreTokenizer(PreTokenizerKind kind, std::vector<std::unique_ptr<Stage>> stages);
  // Splits one well-formed UTF-8 run through all stages.
  absl::Status SplitValid(std::string_view run, std::vector<std::string_view>* pieces) const;

  PreTokenizerKind kind_;
  // Applied in order: each stage splits every piece the previous one produced.
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_PRE_TOKENIZER_H_
