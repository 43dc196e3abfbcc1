#include "kernels/backend.h"

#include "formats/str_cat.h"
#include "base/status_macros.h"

namespace tpserve {

std::string_view BackendKindName(BackendKind kind) {
  return kind == BackendKind::kCuda ? "cuda" : "cpu";
}

absl::StatusOr<BackendKind> ParseBackendKind(std::string_view name) {
  if (name == "cpu") return BackendKind::kCpu;
  if (name == "cuda") return BackendKind::kCuda;
  return absl::InvalidArgumentError(
      StrCat("backend \"", name, "\" is not one of: cpu, cuda"));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = other.owner_;
    data_ = other.data_;
    bytes_ = other.bytes_;
    other.owner_ = nullptr;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->Free(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

int64_t ActivationBytes(const Backend& backend) {
  return BlockBytes(backend.activation_dtype());
}

absl::StatusOr<DeviceBuffer> Upload(Backend& backend, const void* src, int64_t bytes,
                                    std::string_view what) {
  TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, backend.Allocate(bytes, what));
  backend.CopyToDevice(buffer.data(), src, bytes);
  return buffer;
}

}  // namespace tpserve
