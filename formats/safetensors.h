// Reader for one Hugging Face safetensors file.
//
// Byte layout:
//   u64    header_bytes   little-endian length of the JSON header
//   header_bytes          UTF-8 JSON object (writers pad it with spaces):
//                           {"__metadata__": {"format": "pt", ...},          <- ignored
//                            "<tensor name>": {"dtype": "BF16", "shape": [out, in],
//                                              "data_offsets": [begin, end]}, ...}
//   data section          starts right after the header; [begin, end) are relative to it;
//                         tensors are row-major (shape outermost-first) and tile it exactly.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st, SafetensorsFile::Open(path));
//   TP_ASSIGN_OR_RETURN(TensorView wq, st->Find("model.layers.0.self_attn.q_proj.weight"));
//
// Open() refuses, with INVALID_ARGUMENT naming the file, the tensor and the bound: a header
// length past the end of the file or above kMaxHeaderBytes, invalid JSON or duplicate keys, a
// malformed entry, begin > end, bytes outside the data section, nbytes != elements * element
// size, overlapping tensors, and data-section bytes no tensor covers (as the reference
// implementation does). An unknown dtype is UNIMPLEMENTED naming the tensor; a known one that
// cannot be decoded here (I64, F64, ...) is listed, but Find() returns UNIMPLEMENTED for it.
// I32 tensors (packed INT4 words, GPTQ g_idx) are found as DType::kI32.
// Thread-safety: immutable after Open; all methods are const and safe to call concurrently.
#ifndef TPSERVE_FORMATS_SAFETENSORS_H_
#define TPSERVE_FORMATS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/byte_source.h"
#include "formats/weight_source.h"

namespace tpserve {

struct SafetensorsTensorInfo {
  std::string name;
  std::string dtype_name;      // as written: "BF16", "F8_E4M3", "I64", ...
  std::optional<DType> dtype;  // set when DequantizeRow handles it (I32 included)
  std::vector<int64_t> shape;  // outermost first; may be empty (a scalar) or hold zeros
  uint64_t begin_bytes = 0;    // [begin, end) within the data section
  uint64_t end_bytes = 0;
};

class SafetensorsFile final : public WeightSource {
 public:
  static constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> FromSource(
      std::unique_ptr<ByteSource> source);

  // In data-section order.
  const std::vector<SafetensorsTensorInfo>& tensor_infos() const { return tensors_; }
  // True for any listed tensor, including ones Find() cannot decode.
  bool HasTensor(std::string_view name) const { return index_by_name_.contains(name); }
  uint64_t data_offset_bytes() const { return data_offset_bytes_; }

  CheckpointFormat format() const override { return CheckpointFormat::kSafetensors; }
  absl::StatusOr<TensorView> Find(std::string_view name) const override;
  std::vector<std::string> TensorNames() const override;
  std::string Describe() const override { return source_->name(); }

 private:
  explicit SafetensorsFile(std::unique_ptr<ByteSource> source) : source_(std::move(source)) {}

  absl::Status ParseHeader(std::string_view header_text);
  absl::Status CheckLayout() const;

  std::unique_ptr<ByteSource> source_;
  uint64_t data_offset_bytes_ = 0;
  uint64_t data_bytes_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_by_name_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_SAFETENSORS_H_
