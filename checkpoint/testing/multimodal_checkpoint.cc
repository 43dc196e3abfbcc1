#include "checkpoint/testing/multimodal_checkpoint.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "base/status_macros.h"
#include "base/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpserve {

absl::Status WriteSafetensors(const std::string& path, absl::Span<const TensorView> tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  int64_t offset = 0;
  for (const TensorView& t : tensors) {
    header[t.name] = {{"dtype", std::string(DTypeName(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const TensorView& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.data), t.nbytes);
  }
  if (!out.good()) return absl::InternalError(StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status WriteMultimodalCheckpoint(const std::string& text_dir, const std::string& out_dir,
                                       std::string_view model_type,
                                       std::string_view text_prefix) {
  std::ifstream in(text_dir + "/config.json");
  std::stringstream config_text;
  config_text << in.rdbuf();
  if (!in.good()) return absl::NotFoundError(StrCat("cannot read ", text_dir, "/config.json"));
  const nlohmann::json text_config = nlohmann::json::parse(config_text.str());
  nlohmann::json config = {{"architectures", {"Llama4ForConditionalGeneration"}},
                           {"model_type", std::string(model_type)},
                           {"text_config", text_config},
                           {"vision_config", {{"hidden_size", 8}, {"model_type", "vision"}}},
                           {"tie_word_embeddings", text_config.value("tie_word_embeddings",
                                                                     false)}};
  std::ofstream(out_dir + "/config.json") << config.dump(2);
  TP_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> source, OpenWeightSource(text_dir));
  std::vector<TensorView> tensors;
  for (const std::string& name : source->TensorNames()) {
    TP_ASSIGN_OR_RETURN(TensorView t, source->Find(name));
    t.name = StrCat(text_prefix, name);
    tensors.push_back(std::move(t));
  }
  const int64_t hidden = text_config.at("hidden_size").get<int64_t>();
  static const std::vector<float> kTower(8 * 4 + 8 * 1024, 0.5f);  // hidden <= 1024
  if (hidden > 1024) return absl::InvalidArgumentError("hidden_size above 1024");
  const auto* tower = reinterpret_cast<const uint8_t*>(kTower.data());
  tensors.push_back({"vision_model.patch_embedding.linear.weight", DType::kF32, {8, 4}, tower,
                     8 * 4 * 4});
  tensors.push_back({"multi_modal_projector.linear_1.weight", DType::kF32, {hidden, 8}, tower,
                     hidden * 8 * 4});
  return WriteSafetensors(out_dir + "/model.safetensors", tensors);
}

}  // namespace tpserve
