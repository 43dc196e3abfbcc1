// A bounds-checked little-endian cursor over a byte span, for parsing untrusted file headers.
// Every read either succeeds or returns INVALID_ARGUMENT naming the source, the field being
// read, its offset and how many bytes were needed versus left; nothing reads past the end.
//
//   ByteReader r(source.bytes(), source.name());
//   TP_ASSIGN_OR_RETURN(uint64_t tensor_count, r.Read<uint64_t>("tensor_count"));
//
// Thread-compatible (a cursor has mutable position; the bytes are never written).
#ifndef TPSERVE_FORMATS_BYTE_READER_H_
#define TPSERVE_FORMATS_BYTE_READER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tpserve {

class ByteReader {
 public:
  ByteReader(absl::Span<const uint8_t> bytes, std::string_view source_name)
      : bytes_(bytes), source_name_(source_name) {}

  size_t position() const { return position_; }
  size_t remaining() const { return bytes_.size() - position_; }
  size_t size() const { return bytes_.size(); }
  std::string_view source_name() const { return source_name_; }

  // Reads a trivially copyable little-endian value (the host is little-endian).
  template <typename T>
  absl::StatusOr<T> Read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    absl::Status s = Require(sizeof(T), what);
    if (!s.ok()) return s;
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  // Returns a view of the next `n` bytes and advances past them.
  absl::StatusOr<std::string_view> ReadBytes(uint64_t n, std::string_view what);
  absl::Status Skip(uint64_t n, std::string_view what);
  // Moves to an absolute offset <= size().
  absl::Status Seek(uint64_t offset, std::string_view what);

  // View of bytes [begin, end) already inside the span. REQUIRES: begin <= end <= size().
  std::string_view Slice(size_t begin, size_t end) const {
    return {reinterpret_cast<const char*>(bytes_.data()) + begin, end - begin};
  }

  // INVALID_ARGUMENT unless at least `n` bytes remain.
  absl::Status Require(uint64_t n, std::string_view what) const;

 private:
  absl::Span<const uint8_t> bytes_;
  std::string source_name_;
  size_t position_ = 0;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_BYTE_READER_H_
