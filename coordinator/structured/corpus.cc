#include "coordinator/structured/corpus.h"

#include <map>
#include <optional>

#include "base/file_text.h"
#include "base/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpserve {
namespace {

// Ordered: a schema's property order is the order its object is generated in.
using Json = nlohmann::ordered_json;

absl::StatusOr<Json> ReadJson(const std::string& path) {
  std::optional<std::string> text = ReadFileText(path);
  if (!text.has_value()) return absl::NotFoundError(StrCat("cannot open ", path));
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(StrCat(path, " is not valid JSON"));
  return j;
}

}  // namespace

absl::StatusOr<std::vector<CorpusCase>> LoadCorpus(const std::string& corpus_path,
                                                   const std::string& walks_path) {
  absl::StatusOr<Json> corpus = ReadJson(corpus_path);
  if (!corpus.ok()) return corpus.status();
  std::map<std::string, std::vector<int32_t>> walks;
  if (!walks_path.empty()) {
    absl::StatusOr<Json> w = ReadJson(walks_path);
    if (!w.ok()) return w.status();
    for (const Json& c : w->value("cases", Json::array())) {
      walks[c.at("name").get<std::string>()] = c.at("tokens").get<std::vector<int32_t>>();
    }
  }
  std::vector<CorpusCase> cases;
  try {
    for (const Json& c : *corpus) {
      CorpusCase out;
      out.name = c.at("name").get<std::string>();
      out.prompt = c.at("prompt").get<std::string>();
      out.example = c.at("example").get<std::string>();
      const std::string kind = c.at("kind").get<std::string>();
      const Json& constraint = c.at("constraint");
      out.spec.field = kind;
      if (kind == "json_schema") {
        out.spec.kind = ConstraintKind::kJsonSchema;
        out.spec.text = constraint.dump();
      } else if (kind == "json_object") {
        out.spec.kind = ConstraintKind::kJsonObject;
      } else if (kind == "regex") {
        out.spec.kind = ConstraintKind::kRegex;
        out.spec.text = constraint.get<std::string>();
      } else if (kind == "grammar") {
        out.spec.kind = ConstraintKind::kGrammar;
        out.spec.text = constraint.get<std::string>();
      } else if (kind == "choice") {
        out.spec.kind = ConstraintKind::kChoice;
        out.spec.choices = constraint.get<std::vector<std::string>>();
        out.spec.field = "choice.choices";
      } else {
        return absl::InvalidArgumentError(StrCat(corpus_path, ": case ", out.name,
                                                 " has unknown kind ", kind));
      }
      if (auto it = walks.find(out.name); it != walks.end()) out.walk = it->second;
      cases.push_back(std::move(out));
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(StrCat(corpus_path, ": ", e.what()));
  }
  return cases;
}

}  // namespace tpserve
