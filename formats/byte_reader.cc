#include "formats/byte_reader.h"

#include "base/str_cat.h"

namespace tpserve {

absl::Status ByteReader::Require(uint64_t n, std::string_view what) const {
  if (n <= remaining()) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(source_name_, ": truncated reading ", what,
                                           " at offset ", position_, ": needs ", n, " bytes, only ",
                                           remaining(), " left"));
}

absl::StatusOr<std::string_view> ByteReader::ReadBytes(uint64_t n, std::string_view what) {
  absl::Status s = Require(n, what);
  if (!s.ok()) return s;
  std::string_view view(reinterpret_cast<const char*>(bytes_.data()) + position_,
                        static_cast<size_t>(n));
  position_ += static_cast<size_t>(n);
  return view;
}

absl::Status ByteReader::Skip(uint64_t n, std::string_view what) {
  absl::Status s = Require(n, what);
  if (s.ok()) position_ += static_cast<size_t>(n);
  return s;
}

absl::Status ByteReader::Seek(uint64_t offset, std::string_view what) {
  if (offset > bytes_.size()) {
    return absl::InvalidArgumentError(StrCat(source_name_, ": ", what, " offset ", offset,
                                             " is past the end of the file (", bytes_.size(),
                                             " bytes)"));
  }
  position_ = static_cast<size_t>(offset);
  return absl::OkStatus();
}

}  // namespace tpserve
