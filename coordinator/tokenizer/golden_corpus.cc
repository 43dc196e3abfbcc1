#include "coordinator/tokenizer/golden_corpus.h"

#include "absl/strings/str_cat.h"
#include "coordinator/tokenizer/incremental_detokenizer.h"
#include "coordinator/tokenizer/utf8.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpserve {
namespace {

// Bytes of an even-length hex string; false if it is not one.
bool HexToBytes(const std::string& hex, std::string* bytes) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int high = nibble(hex[i]);
    const int low = nibble(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    bytes->push_back(static_cast<char>(high * 16 + low));
  }
  return true;
}

}  // namespace

std::string GoldenPath(std::string_view file_name) {
  return absl::StrCat("tests/golden/tokenizer/", std::string(file_name));
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

absl::StatusOr<std::vector<GoldenRow>> ReadGoldenRows(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<GoldenRow> rows;
  std::string line;
  int line_number = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.empty()) continue;
    try {
      const nlohmann::json row = nlohmann::json::parse(line);
      GoldenRow golden;
      if (row.contains("text_hex")) {
        if (!HexToBytes(row["text_hex"].get<std::string>(), &golden.text)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ":", line_number, ": text_hex is not hex"));
        }
      } else {
        golden.text = row.at("text").get<std::string>();
      }
      golden.ids = row.at("ids").get<std::vector<int32_t>>();
      if (row.contains("ids_special")) {
        golden.ids_special = row["ids_special"].get<std::vector<int32_t>>();
      }
      golden.add_bos = row.value("add_bos", false);
      if (row.contains("decoded_hex")) {
        std::string decoded;
        if (!HexToBytes(row["decoded_hex"].get<std::string>(), &decoded)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ":", line_number, ": decoded_hex is not hex"));
        }
        golden.decoded = std::move(decoded);
      }
      rows.push_back(std::move(golden));
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": bad golden row: ", e.what()));
    }
  }
  return rows;
}

absl::StatusOr<std::string> StreamIds(const Tokenizer& tokenizer,
                                      const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(&tokenizer);
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<std::string> chunk = detok.Push(ids[i]);
    if (!chunk.ok()) return chunk.status();
    if (!IsValidUtf8(*chunk)) {
      return absl::InternalError(absl::StrCat("chunk ", i, " (id ", ids[i],
                                              ") is not whole UTF-8"));
    }
    streamed += *chunk;
  }
  return streamed + detok.Flush();
}

}  // namespace tpserve
