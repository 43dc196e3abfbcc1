// Test-only writer of safetensors bytes. Well-formed by default (tensors laid end to end in
// the order added); every field can be overridden so corrupt-file tests can break one rule.
//
//   SafetensorsTestBuilder b;
//   b.Add("w", "F32", {2, 2}, std::string(16, '\0'));
//   std::string bytes = b.Build();
//
// Thread-compatible.
#ifndef TPSERVE_FORMATS_SAFETENSORS_TEST_BUILDER_H_
#define TPSERVE_FORMATS_SAFETENSORS_TEST_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tpserve {

class SafetensorsTestBuilder {
 public:
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string data;
    // When set, written instead of the computed [begin, end].
    std::optional<std::pair<uint64_t, uint64_t>> data_offsets;
  };

  SafetensorsTestBuilder& Add(const std::string& name, const std::string& dtype,
                              const std::vector<int64_t>& shape, const std::string& data);
  Tensor& tensor(size_t i) { return tensors_[i]; }
  // Bytes appended to the data section after the tensors.
  SafetensorsTestBuilder& AppendData(const std::string& extra);

  // The JSON header: {"__metadata__": {"format": "pt"}, "<name>": {...}, ...}.
  std::string HeaderJson() const;
  // Length prefix + header padded with spaces to a multiple of 8 + data.
  std::string Build() const;
  // Length prefix + `header_json` as is + `data`.
  static std::string Assemble(const std::string& header_json, const std::string& data);

 private:
  std::vector<Tensor> tensors_;
  std::string extra_data_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_SAFETENSORS_TEST_BUILDER_H_
