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

bool IsKvDtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF8E4M3;
}

absl::StatusOr<DType> ParseKvDtype(std::string_view name) {
  if (name.empty() || name == "f16") return DType::kF16;
  if (name == "f32") return DType::kF32;
  if (name == "bf16") return DType::kBF16;
  if (name == "fp8") return DType::kF8E4M3;
  return absl::InvalidArgumentError(
      StrCat("kv_dtype = \"", name, "\" is not one of f32, f16, bf16, fp8"));
}

std::string_view KvDtypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kF8E4M3:
      return "fp8";
    default:
      return "f16";
  }
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
