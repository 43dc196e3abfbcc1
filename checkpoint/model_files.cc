#include "checkpoint/model_files.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "checkpoint/stored_formats.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

// The most common dtype among 2-D tensors, by bytes: what an operator would call the format.
std::string DominantWeightType(const WeightSource& weights, const char* prefix) {
  std::map<std::string, int64_t> bytes;
  for (const std::string& name : weights.TensorNames()) {
    absl::StatusOr<TensorView> t = weights.Find(name);
    if (t.ok() && t->shape.size() == 2) bytes[std::string(DTypeName(t->dtype))] += t->nbytes;
  }
  std::string best = "unknown";
  int64_t most = -1;
  for (const auto& [name, n] : bytes) {
    if (n > most) {
      most = n;
      best = name;
    }
  }
  return absl::StrCat(prefix, best);
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", p.string()));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<ModelFiles> OpenModelFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("model path ", path, " does not exist"));
  }
  ModelFiles files;
  files.path = path;
  if (fs::is_regular_file(path, ec) && fs::path(path).extension() == ".gguf") {
    TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
    TP_ASSIGN_OR_RETURN(files.config, ModelSpecFromGguf(*gguf));
    files.gguf = std::shared_ptr<const GgufFile>(std::move(gguf));
    files.weights = files.gguf;
    files.weight_format = DominantWeightType(*files.weights, "gguf:");
    TP_ASSIGN_OR_RETURN(files.stored_formats,
                        StoredWeightFormats(*files.weights, files.scheme, files.config));
    return files;
  }
  if (!fs::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat(
        "model path ", path, " is neither a .gguf file nor a directory with config.json"));
  }
  const fs::path config_path = fs::path(path) / "config.json";
  TP_ASSIGN_OR_RETURN(std::string config_json, ReadFile(config_path));
  TP_ASSIGN_OR_RETURN(files.config, ModelSpecFromHfJson(config_json));
  TP_ASSIGN_OR_RETURN(files.scheme, ParseQuantizationConfig(config_json));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> weights, OpenWeightSource(path));
  files.weights = std::shared_ptr<const WeightSource>(std::move(weights));
  files.hf_directory = path;
  TP_ASSIGN_OR_RETURN(files.stored_formats,
                      StoredWeightFormats(*files.weights, files.scheme, files.config));
  // A quantized checkpoint's dominant dtype would be I32 (AWQ/GPTQ words): name the scheme.
  files.weight_format =
      files.scheme.method == QuantMethod::kNone
          ? DominantWeightType(*files.weights, "safetensors:")
          : StrCat("safetensors:", QuantMethodName(files.scheme.method), " ",
                   TensorFormatName(files.stored_formats[TensorRole::kDown]));
  return files;
}

absl::StatusOr<ModelFiles> MtpDraftFiles(const ModelFiles& target) {
  ModelFiles draft = target;
  TP_ASSIGN_OR_RETURN(draft.config, MtpDraftSpec(target.config));
  TP_ASSIGN_OR_RETURN(draft.stored_formats,
                      StoredWeightFormats(*draft.weights, draft.scheme, draft.config));
  return draft;
}

}  // namespace tpserve
