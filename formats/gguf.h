// Reader for GGUF (llama.cpp's checkpoint format), versions 2 and 3, little-endian.
//
// Byte layout (all integers little-endian; "string" = u64 byte length + bytes, no NUL):
//   u32    magic          "GGUF" (0x46554747)
//   u32    version        2 or 3 (3 only added big-endian files, which are not read here)
//   u64    tensor_count
//   u64    kv_count
//   kv_count times:       string key; u32 value_type; value
//                         value_type 0..12 = U8 I8 U16 I16 U32 I32 F32 BOOL STRING ARRAY U64
//                         I64 F64; an ARRAY is u32 element_type, u64 count, elements (may nest)
//   tensor_count times:   string name; u32 n_dims (1..4); u64 dims[n_dims] (innermost first);
//                         u32 ggml_type; u64 offset (relative to the data section,
//                         a multiple of the alignment)
//   padding to a multiple of `general.alignment` (a u32 key; 32 when absent)
//   data section          tensor bytes; rows run along dims[0]
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(path));
//   TP_ASSIGN_OR_RETURN(uint32_t layers, gguf->GetU32("llama.block_count"));
//
// Open() validates every count, length, dimension, type and offset before anything is used;
// errors are INVALID_ARGUMENT (UNIMPLEMENTED for a version or tensor type this reader does not
// know) and name the file, the key or tensor, and the violated bound. A tensor of a known
// ggml type that cannot be decoded here (e.g. Q6_K) is listed, but Find() returns
// UNIMPLEMENTED for it.
// Thread-safety: immutable after Open; all methods are const and safe to call concurrently.
#ifndef TPSERVE_FORMATS_GGUF_H_
#define TPSERVE_FORMATS_GGUF_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/byte_source.h"
#include "formats/gguf_metadata.h"
#include "formats/weight_source.h"

namespace tpserve {

struct GgufTensorInfo {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<int64_t> ggml_dims;  // as stored: innermost (contiguous) first
  uint64_t offset_bytes = 0;       // from the start of the data section
  int64_t nbytes = 0;
};

class GgufFile final : public WeightSource {
 public:
  static constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
  static constexpr uint32_t kDefaultAlignmentBytes = 32;
  static constexpr uint32_t kMaxDims = 4;

  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromSource(std::unique_ptr<ByteSource> source);

  uint32_t version() const { return version_; }
  uint32_t alignment_bytes() const { return alignment_bytes_; }
  // Absolute file offset of the data section.
  uint64_t data_offset_bytes() const { return data_offset_bytes_; }
  const GgufMetadata& metadata() const { return metadata_; }
  // In file order.
  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  // True for any listed tensor, including ones Find() cannot decode.
  bool HasTensor(std::string_view name) const { return index_by_name_.contains(name); }

  // Typed metadata getters; see GgufMetadata for the exact contracts.
  bool HasKey(std::string_view key) const { return metadata_.HasKey(key); }
  absl::StatusOr<uint32_t> GetU32(std::string_view key) const { return metadata_.GetU32(key); }
  absl::StatusOr<int64_t> GetI64(std::string_view key) const { return metadata_.GetI64(key); }
  absl::StatusOr<float> GetF32(std::string_view key) const { return metadata_.GetF32(key); }
  absl::StatusOr<bool> GetBool(std::string_view key) const { return metadata_.GetBool(key); }
  absl::StatusOr<std::string> GetString(std::string_view key) const {
    return metadata_.GetString(key);
  }
  absl::StatusOr<uint64_t> GetArraySize(std::string_view key) const {
    return metadata_.GetArraySize(key);
  }
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const {
    return metadata_.GetStringArray(key);
  }
  absl::StatusOr<std::vector<int32_t>> GetI32Array(std::string_view key) const {
    return metadata_.GetI32Array(key);
  }
  absl::StatusOr<std::vector<float>> GetF32Array(std::string_view key) const {
    return metadata_.GetF32Array(key);
  }

  // WeightSource. Shapes are reversed to outermost-first.
  CheckpointFormat format() const override { return CheckpointFormat::kGguf; }
  absl::StatusOr<TensorView> Find(std::string_view name) const override;
  std::vector<std::string> TensorNames() const override;
  std::string Describe() const override { return source_->name(); }

 private:
  GgufFile(std::unique_ptr<ByteSource> source, GgufMetadata metadata)
      : source_(std::move(source)), metadata_(std::move(metadata)) {}

  absl::Status ParseTensorInfos(ByteReader& reader, uint64_t tensor_count);
  absl::Status ValidateDataSection();

  std::unique_ptr<ByteSource> source_;
  GgufMetadata metadata_;  // views into source_'s bytes
  uint32_t version_ = 0;
  uint32_t alignment_bytes_ = kDefaultAlignmentBytes;
  uint64_t data_offset_bytes_ = 0;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_by_name_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_GGUF_H_
