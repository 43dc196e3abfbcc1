#include "coordinator/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "coordinator/tokenizer/utf8.h"

namespace tpserve {
namespace {

// Patterns are written with {WS} for the Unicode White_Space set, which is what llama.cpp's
// tables and Rust's/Oniguruma's \s mean. PCRE2's UCP \s also matches U+180E, so \s is not used.
constexpr std::string_view kWhiteSpace =
    R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^{WS}\p{L}\p{N}]+|[{WS}]+(?![^{WS}])|[{WS}]+)";

// llama.cpp spells the case-insensitive contractions as classes so that only ASCII letters
// match (PCRE2's caseless mode would also accept U+017F for 's').
constexpr std::string_view kLlama3Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}{1,3}| ?[^{WS}\p{L}\p{N}]+[\r\n]*|[{WS}]*[\r\n]+|[{WS}]+(?![^{WS}])|[{WS}]+)";

// Qwen2 / llama.cpp "qwen2": Llama 3's rule with every digit alone.
constexpr std::string_view kQwen2Pattern =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)"
    R"(\p{N}| ?[^{WS}\p{L}\p{N}]+[\r\n]*|[{WS}]*[\r\n]+|[{WS}]+(?![^{WS}])|[{WS}]+)";

// Mistral Nemo's tekken, as llama.cpp rewrites it for its regex engine: "upper case" is any
// letter but a-z and "lower case" any letter but A-Z, so a non-ASCII letter is both (the
// original's \p{Lu}/\p{Ll} classes would differ there; llama.cpp's reading is the one we match).
constexpr std::string_view kTekkenPattern =
    R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])*(?:(?=\p{L})[^A-Z])+|)"
    R"([^\r\n\p{L}\p{N}]?(?:(?=\p{L})[^a-z])+(?:(?=\p{L})[^A-Z])*|)"
    R"(\p{N}| ?[^{WS}\p{L}\p{N}]+[\r\n/]*|[{WS}]*[\r\n]+|[{WS}]+(?![^{WS}])|[{WS}]+)";

constexpr std::string_view kDigitPattern = R"(\p{N})";

std::vector<std::string_view> PatternsFor(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return {kGpt2Pattern};
    case PreTokenizerKind::kSmolLm:
      return {kDigitPattern, kGpt2Pattern};
    case PreTokenizerKind::kLlama3:
      return {kLlama3Pattern};
    case PreTokenizerKind::kQwen2:
      return {kQwen2Pattern};
    case PreTokenizerKind::kTekken:
      return {kTekkenPattern};
  }
  return {};
}

std::string ExpandWhiteSpace(std::string_view pattern_template) {
  constexpr std::string_view kPlaceholder = "{WS}";
  std::string pattern(pattern_template);
  for (size_t at = pattern.find(kPlaceholder); at != std::string::npos;
       at = pattern.find(kPlaceholder, at + kWhiteSpace.size())) {
    pattern.replace(at, kPlaceholder.size(), kWhiteSpace);
  }
  return pattern;
}

std::string Pcre2ErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

// One compiled regex. Split() appends the matches and the unmatched gaps between them, in
// order; unmatched text stays a piece of its own (llama.cpp and HF agree on that).
struct PreTokenizer::Stage {
  ~Stage() { pcre2_code_free(code); }
  absl::Status Split(std::string_view piece, std::vector<std::string_view>* out) const;

  pcre2_code* code = nullptr;
};

absl::Status PreTokenizer::Stage::Split(std::string_view piece,
                                        std::vector<std::string_view>* out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match_data(
      pcre2_match_data_create_from_pattern(code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t gap_start = 0;
  while (gap_start < piece.size()) {
    // The subject is the piece alone, so look-aheads stop at its end, as in llama.cpp.
    int rc = pcre2_match(code, subject, piece.size(), gap_start, PCRE2_NO_UTF_CHECK,
                         match_data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, piece.size(), gap_start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       match_data.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::InternalError(
          absl::StrFormat("pre-tokenizer regex failed at byte %d of a %d-byte piece: %s", gap_start,
                          piece.size(), Pcre2ErrorMessage(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data.get());
    const size_t match_start = ovector[0];
    size_t match_end = ovector[1];
    if (match_end == match_start) {
      // None of our patterns match empty, but never loop forever if one did.
      match_end = match_start + Utf8SequenceLength(piece, match_start);
    }
    if (match_start > gap_start) out->push_back(piece.substr(gap_start, match_start - gap_start));
    out->push_back(piece.substr(match_start, match_end - match_start));
    gap_start = match_end;
  }
  if (gap_start < piece.size()) out->push_back(piece.substr(gap_start));
  return absl::OkStatus();
}

// tokenizer.ggml.pre values, as llama.cpp names its pre-tokenizers (several names, one regex).
struct NamedPreTokenizer {
  std::string_view name;
  PreTokenizerKind kind;
};
constexpr NamedPreTokenizer kPreTokenizerNames[] = {
    {"default", PreTokenizerKind::kGpt2},    {"gpt2", PreTokenizerKind::kGpt2},
    {"gpt-2", PreTokenizerKind::kGpt2},      {"smollm", PreTokenizerKind::kSmolLm},
    {"llama-bpe", PreTokenizerKind::kLlama3}, {"llama3", PreTokenizerKind::kLlama3},
    {"llama-v3", PreTokenizerKind::kLlama3},
    // Qwen2/2.5/3 GGUFs say "qwen2"; the distilled DeepSeek-R1 and Megrez share its regex.
    {"qwen2", PreTokenizerKind::kQwen2},     {"deepseek-r1-qwen", PreTokenizerKind::kQwen2},
    {"megrez", PreTokenizerKind::kQwen2},    {"tekken", PreTokenizerKind::kTekken},
};

absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromName(std::string_view name) {
  for (const NamedPreTokenizer& n : kPreTokenizerNames) {
    if (n.name == name) return n.kind;
  }
  return absl::UnimplementedError(absl::StrCat("pre-tokenizer '", std::string(name),
                                               "' is not supported (supported: default, gpt2, "
                                               "smollm, llama-bpe, qwen2, tekken)"));
}

std::string_view PreTokenizerKindName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kSmolLm:
      return "smollm";
    case PreTokenizerKind::kLlama3:
      return "llama-bpe";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
    case PreTokenizerKind::kTekken:
      return "tekken";
  }
  return "unknown";
}

absl::StatusOr<PreTokenizer> PreTokenizer::Create(PreTokenizerKind kind) {
  std::vector<std::unique_ptr<Stage>> stages;
  for (std::string_view pattern_template : PatternsFor(kind)) {
    const std::string pattern = ExpandWhiteSpace(pattern_template);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    auto stage = std::make_unique<Stage>();
    stage->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (stage->code == nullptr) {
      return absl::InternalError(
          absl::StrFormat("PCRE2 rejected pre-tokenizer pattern %s at %d: %s", pattern,
                          error_offset, Pcre2ErrorMessage(error_code)));
    }
    // JIT is an optimisation only: a build without it falls back to the interpreter.
    pcre2_jit_compile(stage->code, PCRE2_JIT_COMPLETE);
    stages.push_back(std::move(stage));
  }
  return PreTokenizer(kind, std::move(stages));
}

PreTokenizer::PreTokenizer(PreTokenizerKind kind, std::vector<std::unique_ptr<Stage>> stages)
    : kind_(kind), stages_(std::move(stages)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

absl::Status PreTokenizer::Split(std::string_view text,
                                 std::vector<std::string_view>* pieces) const {
  size_t run_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t n = Utf8SequenceLength(text, pos);
    if (n != 0) {
      pos += n;
      continue;
    }
    TP_RETURN_IF_ERROR(SplitValid(text.substr(run_start, pos - run_start), pieces));
    pieces->push_back(text.substr(pos, 1));
    run_start = ++pos;
  }
  return SplitValid(text.substr(run_start), pieces);
}

absl::Status PreTokenizer::SplitValid(std::string_view run,
                                      std::vector<std::string_view>* pieces) const {
  if (run.empty()) return absl::OkStatus();
  std::vector<std::string_view> current = {run};
  std::vector<std::string_view> next;
  for (const auto& stage : stages_) {
    next.clear();
    for (std::string_view piece : current) TP_RETURN_IF_ERROR(stage->Split(piece, &next));
    current.swap(next);
  }
  pieces->insert(pieces->end(), current.begin(), current.end());
  return absl::OkStatus();
}

}  // namespace tpserve
