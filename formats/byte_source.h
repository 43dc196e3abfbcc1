// Read-only bytes with a name, the layer under every checkpoint reader. Production reads
// mmapped files; tests feed hand-made bytes through MemoryByteSource without touching disk.
//
//   TP_ASSIGN_OR_RETURN(std::unique_ptr<ByteSource> src, MmapByteSource::Open(path));
//   absl::Span<const uint8_t> bytes = src->bytes();
//
// Thread-safety: immutable once constructed; bytes() and name() are safe to call concurrently.
// The span stays valid for the lifetime of the source.
#ifndef TPSERVE_FORMATS_BYTE_SOURCE_H_
#define TPSERVE_FORMATS_BYTE_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace tpserve {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual absl::Span<const uint8_t> bytes() const = 0;
  // A path or a label, used in error messages.
  virtual const std::string& name() const = 0;
};

// A whole file mapped read-only (PROT_READ, MAP_PRIVATE); pages load on first touch.
class MmapByteSource final : public ByteSource {
 public:
  // NOT_FOUND / PERMISSION_DENIED / ... from errno naming the path; INVALID_ARGUMENT when the
  // path is not a regular file. An empty file gives an empty span (nothing is mapped).
  static absl::StatusOr<std::unique_ptr<MmapByteSource>> Open(const std::string& path);
  ~MmapByteSource() override;

  MmapByteSource(const MmapByteSource&) = delete;
  MmapByteSource& operator=(const MmapByteSource&) = delete;

  absl::Span<const uint8_t> bytes() const override { return {data_, size_bytes_}; }
  const std::string& name() const override { return path_; }

 private:
  MmapByteSource(std::string path, const uint8_t* data, size_t size_bytes)
      : path_(std::move(path)), data_(data), size_bytes_(size_bytes) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_bytes_;
};

// Owns a copy of the bytes. Note std::string storage is only malloc-aligned, so readers must
// not assume tensor data is aligned beyond what the format promises relative to the start.
class MemoryByteSource final : public ByteSource {
 public:
  MemoryByteSource(std::string name, std::string bytes)
      : name_(std::move(name)), bytes_(std::move(bytes)) {}

  absl::Span<const uint8_t> bytes() const override {
    return {reinterpret_cast<const uint8_t*>(bytes_.data()), bytes_.size()};
  }
  const std::string& name() const override { return name_; }

 private:
  std::string name_;
  std::string bytes_;
};

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_BYTE_SOURCE_H_
