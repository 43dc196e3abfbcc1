// The key-value section of a GGUF file: parsing with full validation, and typed getters.
// Values are not copied: each entry keeps a view of its encoded bytes inside the file, and the
// getters decode on demand (49k tokenizer strings cost nothing until someone asks for them).
//
//   TP_ASSIGN_OR_RETURN(uint32_t layers, metadata.GetU32("llama.block_count"));
//   TP_ASSIGN_OR_RETURN(std::vector<std::string> tokens,
//                       metadata.GetStringArray("tokenizer.ggml.tokens"));
//
// Getter errors: NOT_FOUND naming the key when absent; INVALID_ARGUMENT naming the key, the
// stored type and the expected one, or the value and the violated range.
// Thread-safety: const methods are safe to call concurrently. The viewed bytes must outlive
// the metadata (GgufFile owns both).
#ifndef TPSERVE_FORMATS_GGUF_METADATA_H_
#define TPSERVE_FORMATS_GGUF_METADATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/byte_reader.h"

namespace tpserve {

enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,  // u64 byte length, then the bytes (no terminator)
  kArray = 9,   // u32 element type, u64 element count, then the elements (may nest)
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

std::string_view GgufValueTypeName(GgufValueType t);

// Reads a GGUF string (u64 byte length, then the bytes), bounds-checked; the view points into
// the reader's bytes.
absl::StatusOr<std::string_view> ReadGgufString(ByteReader& reader, std::string_view what);

class GgufMetadata {
 public:
  // Deepest array-of-arrays accepted; real files never nest, and a bound keeps a hostile file
  // from exhausting the stack.
  static constexpr int kMaxArrayNesting = 8;

  // Parses `kv_count` entries at the reader's position and leaves it after the last one.
  // INVALID_ARGUMENT (naming the source, the key and the bound) for: a count that the
  // remaining bytes cannot hold, truncation, unknown value types, a bool that is not 0 or 1,
  // nesting deeper than kMaxArrayNesting, duplicate keys.
  static absl::StatusOr<GgufMetadata> Parse(ByteReader& reader, uint64_t kv_count);

  bool HasKey(std::string_view key) const;
  // Keys in file order.
  const std::vector<std::string>& keys() const { return keys_; }
  absl::StatusOr<GgufValueType> GetType(std::string_view key) const;

  // Integer getters accept any integer value type and check the value fits the result.
  absl::StatusOr<uint32_t> GetU32(std::string_view key) const;
  absl::StatusOr<int64_t> GetI64(std::string_view key) const;
  // Accepts F32 or F64 (rounded to nearest).
  absl::StatusOr<float> GetF32(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;

  // Element count of an array value, without decoding it.
  absl::StatusOr<uint64_t> GetArraySize(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Elements of any integer type, each range-checked into int32.
  absl::StatusOr<std::vector<int32_t>> GetI32Array(std::string_view key) const;
  // Elements of type F32 or F64.
  absl::StatusOr<std::vector<float>> GetF32Array(std::string_view key) const;

 private:
  struct Entry {
    GgufValueType type;
    GgufValueType element_type;  // arrays only
    uint64_t array_size = 0;     // arrays only
    std::string_view value;      // the encoded value; for arrays, the elements only
  };

  explicit GgufMetadata(std::string source_name) : source_name_(std::move(source_name)) {}
  absl::StatusOr<const Entry*> Lookup(std::string_view key) const;
  absl::Status WrongType(std::string_view key, const Entry& entry, std::string_view expected) const;
  absl::Status OutOfRange(std::string_view key, std::string_view value,
                          std::string_view bound) const;
  absl::StatusOr<const Entry*> LookupArray(std::string_view key) const;

  std::string source_name_;
  std::vector<std::string> keys_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_GGUF_METADATA_H_
