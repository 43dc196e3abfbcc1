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

namespace tpserve {

struct GoldenRow {
  std::string text;
  std::vector<int32_t> ids;                         // special-token text as plain text
  std::optional<std::vector<int32_t>> ids_special;  // special-token text parsed
  bool add_bos = false;                             // ids include the BOS the model adds
};

// Path of a golden file relative to the test's working directory (the runfiles root).
std::string GoldenPath(std::string_view file_name);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// One JSON object per line: {"text": str, "ids": [int], "ids_special"?: [int], "add_bos"?}.
absl::StatusOr<std::vector<GoldenRow>> ReadGoldenRows(const std::string& path);

}  // namespace tpserve

#endif  // TPSERVE_COORDINATOR_TOKENIZER_GOLDEN_CORPUS_H_
