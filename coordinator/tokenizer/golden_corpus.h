// Test-only reader for the tokenizer golden files in tests/golden/tokenizer/ (written by
// make_tokenizer_golden.py from llama.cpp and HF `tokenizers`).
//
//   auto rows = ReadGoldenRows(GoldenPath("tiny_smollm_ids.jsonl"));
//   for (const GoldenRow& row : *rows) EXPECT_EQ(*tok.Encode(row.text), row.ids);
//
// Threading: plain functions.
#ifndef TPSERVE_COORDINATOR_TOKENIZER_GOLDEN_CORPUS_H_
#define TPSERVE_COORDINATOR_TOKENIZER_GOLDEN_CORPUS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/tokenizer/tokenizer.h"

namespace tpserve {

struct GoldenRow {
  std::string text;  // the input bytes (from "text", or "text_hex" when not UTF-8)
  std::vector<int32_t> ids;                         // special-token text as plain text
  std::optional<std::vector<int32_t>> ids_special;  // special-token text parsed
  bool add_bos = false;                             // ids include the BOS the model adds
  // The reference's detokenization of `ids` where it differs from `text` ("decoded_hex").
  std::optional<std::string> decoded;
};

// Path of a golden file relative to the test's working directory (the runfiles root).
std::string GoldenPath(std::string_view file_name);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// One JSON object per line: {"text": str | "text_hex": hex, "ids": [int], "ids_special"?: [int],
// "add_bos"?: bool, "decoded_hex"?: hex}. INVALID_ARGUMENT naming the line for a bad row.
absl::StatusOr<std::vector<GoldenRow>> ReadGoldenRows(const std::string& path);

// `ids` pushed one by one through an IncrementalDetokenizer of `tokenizer`, then flushed: the
// streamed text, or an error naming the first chunk that was not whole UTF-8 (a stream must
// never split a character) or the detokenizer's own error.
absl::StatusOr<std::string> StreamIds(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_GOLDEN_CORPUS_H_
