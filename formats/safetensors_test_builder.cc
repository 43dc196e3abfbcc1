#include "formats/safetensors_test_builder.h"

#include <cstring>
#include <nlohmann/json.hpp>

namespace tpserve {

SafetensorsTestBuilder& SafetensorsTestBuilder::Add(const std::string& name,
                                                    const std::string& dtype,
                                                    const std::vector<int64_t>& shape,
                                                    const std::string& data) {
  tensors_.push_back({name, dtype, shape, data, std::nullopt});
  return *this;
}

SafetensorsTestBuilder& SafetensorsTestBuilder::AppendData(const std::string& extra) {
  extra_data_ += extra;
  return *this;
}

std::string SafetensorsTestBuilder::HeaderJson() const {
  // Written by hand, not through a JSON object, so repeated names survive into the text.
  std::string json = R"({"__metadata__":{"format":"pt"})";
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t begin = t.data_offsets ? t.data_offsets->first : offset;
    const uint64_t end = t.data_offsets ? t.data_offsets->second : offset + t.data.size();
    offset += t.data.size();
    json += "," + nlohmann::json(t.name).dump() + R"(:{"dtype":)" + nlohmann::json(t.dtype).dump() +
            R"(,"shape":[)";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      json += (i ? "," : "") + std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(end) + "]}";
  }
  return json + "}";
}

std::string SafetensorsTestBuilder::Build() const {
  std::string header = HeaderJson();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data;
  for (const Tensor& t : tensors_) data += t.data;
  return Assemble(header, data + extra_data_);
}

std::string SafetensorsTestBuilder::Assemble(const std::string& header_json,
                                             const std::string& data) {
  const uint64_t length = header_json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &length, 8);
  return out + header_json + data;
}

}  // namespace tpserve
