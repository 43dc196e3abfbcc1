#include "checkpoint/testing/edited_checkpoint.h"

#include <filesystem>
#include <fstream>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "formats/safetensors.h"
#include "formats/test_files.h"

namespace tpserve {

absl::Status WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) return absl::InternalError(StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::string> EditedHfDir(const std::string& from, const std::string& dir,
                                        const TensorEdit& edit, const ConfigEdit& edit_config) {
  std::filesystem::create_directories(dir);
  TP_ASSIGN_OR_RETURN(std::string config, ReadFileBytes(from + "/config.json"));
  if (edit_config) edit_config(config);
  TP_RETURN_IF_ERROR(WriteFileBytes(dir + "/config.json", config));
  TP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> golden,
                      SafetensorsFile::Open(from + "/model.safetensors"));
  std::vector<SafetensorsTestBuilder::Tensor> tensors;
  for (const std::string& name : golden->TensorNames()) {
    TP_ASSIGN_OR_RETURN(TensorView t, golden->Find(name));
    tensors.push_back({name, std::string(DTypeName(t.dtype)), t.shape,
                       std::string(reinterpret_cast<const char*>(t.data), t.nbytes)});
  }
  edit(tensors);
  SafetensorsTestBuilder b;
  for (const SafetensorsTestBuilder::Tensor& t : tensors) b.Add(t.name, t.dtype, t.shape, t.data);
  TP_RETURN_IF_ERROR(WriteFileBytes(dir + "/model.safetensors", b.Build()));
  return dir;
}

absl::Status DropTensor(std::vector<SafetensorsTestBuilder::Tensor>& tensors,
                        const std::string& name) {
  const size_t before = tensors.size();
  std::erase_if(tensors, [&](const auto& t) { return t.name == name; });
  if (tensors.size() + 1 != before) {
    return absl::InvalidArgumentError(StrCat("no tensor ", name, " to drop"));
  }
  return absl::OkStatus();
}

}  // namespace tpserve
