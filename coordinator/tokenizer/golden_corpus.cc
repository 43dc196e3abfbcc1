#include "coordinator/tokenizer/golden_corpus.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpserve {

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
      golden.text = row.at("text").get<std::string>();
      golden.ids = row.at("ids").get<std::vector<int32_t>>();
      if (row.contains("ids_special")) {
        golden.ids_special = row["ids_special"].get<std::vector<int32_t>>();
      }
      golden.add_bos = row.value("add_bos", false);
      rows.push_back(std::move(golden));
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": bad golden row: ", e.what()));
    }
  }
  return rows;
}

}  // namespace tpserve
