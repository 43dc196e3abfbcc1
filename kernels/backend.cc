#include "kernels/backend.h"

#include "base/str_cat.h"
#include "base/status_macros.h"
#include "kernels/check.h"

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

std::string Backend::AttentionExtrasString(const AttentionParams& params) {
  std::string s;
  if (params.attention_chunk > 0) {
    s = StrCat("chunked attention (chunks of ", params.attention_chunk, " tokens)");
  }
  if (params.temperature_floor > 0) {
    s += StrCat(s.empty() ? "" : ", ", "attention temperature tuning (floor ",
                params.temperature_floor, ", scale ", params.temperature_scale, ")");
  }
  return s;
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

absl::StatusOr<PlacedWeight> PlaceStoredWeight(Backend& backend, const HostMatrix& host,
                                               std::string_view what) {
  PlacedWeight out;
  out.matrix = host.matrix;
  WeightMatrix& m = out.matrix;
  const WeightMatrixParts parts = WeightMatrixPartBytes(m);
  auto place = [&](const void* src, bool owned, int64_t bytes,
                   const char* part) -> absl::StatusOr<const void*> {
    if (src == nullptr || bytes == 0) return src;
    if (backend.host_memory() && !owned) {
      out.bytes_viewed += bytes;
      return src;
    }
    TP_ASSIGN_OR_RETURN(DeviceBuffer buffer, Upload(backend, src, bytes, StrCat(what, " ", part)));
    const void* data = buffer.data();
    out.bytes_copied += bytes;
    out.buffers.push_back(std::move(buffer));
    return data;
  };
  TP_ASSIGN_OR_RETURN(m.data, place(m.data, !host.values.empty(), parts.values, "values"));
  TP_ASSIGN_OR_RETURN(m.scales, place(m.scales, !host.scales.empty(), parts.scales, "scales"));
  TP_ASSIGN_OR_RETURN(m.zeros, place(m.zeros, !host.zeros.empty(), parts.zeros, "zeros"));
  TP_ASSIGN_OR_RETURN(const void* perm,
                      place(m.input_perm, !host.perm.empty(), parts.perm, "permutation"));
  m.input_perm = static_cast<const int32_t*>(perm);
  return out;
}

absl::StatusOr<PlacedWeight> Backend::PlaceWeight(const HostMatrix& host, WeightUse use,
                                                  std::string_view what) {
  (void)use;  // the stored form serves every use
  return PlaceStoredWeight(*this, host, what);
}

void Backend::RopePart(void*, int64_t, int64_t, int64_t, int64_t, const float*, RopeLayout) {
  TP_CHECK(false, "RopePart: this backend has no multi-head latent attention");
}

void Backend::PrefillAttention(const void*, const void*, const void*, int64_t, int64_t, int64_t,
                               float, void*) {
  TP_CHECK(false, "PrefillAttention: this backend has no multi-head latent attention");
}

}  // namespace tpserve
