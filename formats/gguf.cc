#include "formats/gguf.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "formats/ggml_type.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

// Smallest tensor info: empty name (8), n_dims (4), one dim (8), type (4), offset (8).
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

absl::Status Invalid(std::string_view source, std::string_view message) {
  return absl::InvalidArgumentError(StrCat(source, ": ", message));
}

absl::Status CheckVersion(std::string_view source, uint32_t version) {
  if (version == 2 || version == 3) return absl::OkStatus();
  // A big-endian file shows its small version number in the top byte.
  const bool byte_swapped = (version & 0x00FFFFFFu) == 0 && (version >> 24) <= 3;
  return absl::UnimplementedError(StrCat(source, ": unsupported GGUF version ", version,
                                         byte_swapped ? " (a big-endian file?)" : "",
                                         "; this reader reads versions 2 and 3"));
}

absl::StatusOr<uint32_t> ReadAlignment(const GgufMetadata& md, std::string_view source) {
  constexpr std::string_view kKey = "general.alignment";
  if (!md.HasKey(kKey)) return GgufFile::kDefaultAlignmentBytes;
  TP_ASSIGN_OR_RETURN(uint32_t alignment, md.GetU32(kKey));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return Invalid(source, StrCat(kKey, " ", alignment, " is not a power of two"));
  }
  return alignment;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  return StrCat("[", absl::StrJoin(dims, ", "), "]");
}

// Reads n_dims and the dims of tensor `what`, checking 1 <= n_dims <= 4, every dim >= 1 and
// that the element count fits int64.
absl::Status ReadDims(ByteReader& r, std::string_view what, std::vector<int64_t>& dims) {
  TP_ASSIGN_OR_RETURN(uint32_t n_dims, r.Read<uint32_t>(StrCat("n_dims of ", what)));
  if (n_dims < 1 || n_dims > GgufFile::kMaxDims) {
    return Invalid(r.source_name(),
                   StrCat(what, " n_dims ", n_dims, " is outside [1, ", GgufFile::kMaxDims, "]"));
  }
  int64_t num_elements = 1;
  for (uint32_t j = 0; j < n_dims; ++j) {
    TP_ASSIGN_OR_RETURN(uint64_t dim, r.Read<uint64_t>(StrCat("dims of ", what)));
    if (dim == 0 || dim > static_cast<uint64_t>(kInt64Max)) {
      return Invalid(r.source_name(),
                     StrCat(what, " dim ", j, " = ", dim, " is outside [1, ", kInt64Max, "]"));
    }
    dims.push_back(static_cast<int64_t>(dim));
    if (num_elements > kInt64Max / dims.back()) {
      return Invalid(r.source_name(), StrCat(what, " element count of dims ", DimsText(dims),
                                             "... overflows int64"));
    }
    num_elements *= dims.back();
  }
  return absl::OkStatus();
}

// Bytes of a tensor with ggml `type` and innermost-first `dims`, checking the row splits into
// whole blocks and the total fits int64.
absl::StatusOr<int64_t> TensorBytes(std::string_view source, std::string_view what,
                                    const GgmlTypeInfo& type, const std::vector<int64_t>& dims) {
  if (dims[0] % type.block_elems != 0) {
    return Invalid(source, StrCat(what, " row length ", dims[0], " is not a multiple of the ",
                                  type.name, " block of ", type.block_elems, " elements"));
  }
  const int64_t row_blocks = dims[0] / type.block_elems;
  const int64_t rows = std::accumulate(dims.begin() + 1, dims.end(), int64_t{1},
                                       [](int64_t a, int64_t b) { return a * b; });
  if (row_blocks > kInt64Max / type.block_bytes ||
      row_blocks * type.block_bytes > kInt64Max / rows) {
    return Invalid(source, StrCat(what, " byte size of dims ", DimsText(dims), " in ", type.name,
                                  " overflows int64"));
  }
  return row_blocks * type.block_bytes * rows;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<MmapByteSource> source, MmapByteSource::Open(path));
  return FromSource(std::move(source));
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromSource(std::unique_ptr<ByteSource> source) {
  const std::string name = source->name();
  ByteReader r(source->bytes(), name);
  TP_ASSIGN_OR_RETURN(uint32_t magic, r.Read<uint32_t>("magic"));
  if (magic != kMagic) {
    return Invalid(name,
                   absl::StrFormat("bad magic 0x%08x, expected 0x%08x (\"GGUF\")", magic, kMagic));
  }
  TP_ASSIGN_OR_RETURN(uint32_t version, r.Read<uint32_t>("version"));
  TP_RETURN_IF_ERROR(CheckVersion(name, version));
  TP_ASSIGN_OR_RETURN(uint64_t tensor_count, r.Read<uint64_t>("tensor_count"));
  TP_ASSIGN_OR_RETURN(uint64_t kv_count, r.Read<uint64_t>("kv_count"));
  TP_ASSIGN_OR_RETURN(GgufMetadata metadata, GgufMetadata::Parse(r, kv_count));

  std::unique_ptr<GgufFile> file(new GgufFile(std::move(source), std::move(metadata)));
  file->version_ = version;
  TP_ASSIGN_OR_RETURN(file->alignment_bytes_, ReadAlignment(file->metadata_, name));
  TP_RETURN_IF_ERROR(file->ParseTensorInfos(r, tensor_count));
  // position <= size and alignment <= 2^31, so this cannot overflow.
  const uint64_t a = file->alignment_bytes_;
  file->data_offset_bytes_ = (r.position() + a - 1) / a * a;
  TP_RETURN_IF_ERROR(file->ValidateDataSection());
  return file;
}

absl::Status GgufFile::ParseTensorInfos(ByteReader& r, uint64_t tensor_count) {
  if (tensor_count > r.remaining() / kMinTensorInfoBytes) {
    return Invalid(r.source_name(),
                   StrCat("tensor_count ", tensor_count, " cannot fit in the remaining ",
                          r.remaining(), " bytes (", kMinTensorInfoBytes, "+ bytes each)"));
  }
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info;
    TP_ASSIGN_OR_RETURN(std::string_view name, ReadGgufString(r, StrCat("name of tensor #", i)));
    info.name = std::string(name);
    const std::string what = StrCat("tensor '", name, "'");
    TP_RETURN_IF_ERROR(ReadDims(r, what, info.ggml_dims));
    TP_ASSIGN_OR_RETURN(info.ggml_type, r.Read<uint32_t>(StrCat("type of ", what)));
    const GgmlTypeInfo* type = FindGgmlType(info.ggml_type);
    if (type == nullptr) {
      return absl::UnimplementedError(
          StrCat(r.source_name(), ": ", what, " has unknown ggml type ", info.ggml_type));
    }
    TP_ASSIGN_OR_RETURN(info.nbytes, TensorBytes(r.source_name(), what, *type, info.ggml_dims));
    TP_ASSIGN_OR_RETURN(info.offset_bytes, r.Read<uint64_t>(StrCat("offset of ", what)));
    if (info.offset_bytes % alignment_bytes_ != 0) {
      return Invalid(r.source_name(),
                     StrCat(what, " offset ", info.offset_bytes,
                            " is not a multiple of the alignment ", alignment_bytes_));
    }
    if (!index_by_name_.emplace(info.name, tensors_.size()).second) {
      return Invalid(r.source_name(),
                     StrCat("duplicate tensor name '", name, "' (tensor #", i, ")"));
    }
    tensors_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ValidateDataSection() {
  const std::string& source = source_->name();
  const uint64_t file_bytes = source_->bytes().size();
  if (tensors_.empty()) return absl::OkStatus();
  if (data_offset_bytes_ > file_bytes) {
    return Invalid(source, StrCat("data section would start at offset ", data_offset_bytes_,
                                  ", past the end of the file (", file_bytes, " bytes)"));
  }
  const uint64_t data_bytes = file_bytes - data_offset_bytes_;
  for (const GgufTensorInfo& t : tensors_) {
    const auto nbytes = static_cast<uint64_t>(t.nbytes);
    if (t.offset_bytes > data_bytes || nbytes > data_bytes - t.offset_bytes) {
      return Invalid(
          source, StrCat("tensor '", t.name, "' at data offset ", t.offset_bytes, " with ", nbytes,
                         " bytes ends past the data section (", data_bytes, " bytes)"));
    }
  }
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
              return a->offset_bytes < b->offset_bytes;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo& prev = *by_offset[i - 1];
    const GgufTensorInfo& cur = *by_offset[i];
    const uint64_t prev_end = prev.offset_bytes + static_cast<uint64_t>(prev.nbytes);
    if (prev_end > cur.offset_bytes) {
      return Invalid(source,
                     StrCat("tensors '", prev.name, "' [", prev.offset_bytes, ", ", prev_end,
                            ") and '", cur.name, "' [", cur.offset_bytes, ", ",
                            cur.offset_bytes + cur.nbytes, ") overlap in the data section"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> GgufFile::Find(std::string_view name) const {
  auto it = index_by_name_.find(name);
  if (it == index_by_name_.end()) {
    return absl::NotFoundError(StrCat("tensor '", name, "' not found in ", source_->name()));
  }
  const GgufTensorInfo& info = tensors_[it->second];
  const GgmlTypeInfo* type = FindGgmlType(info.ggml_type);  // non-null: checked at Open
  if (!type->dtype.has_value()) {
    return absl::UnimplementedError(
        StrCat(source_->name(), ": tensor '", name, "' has ggml type ", type->name, " (", type->id,
               "), which is not decoded here (supported: ", DecodedGgmlTypeNames(), ")"));
  }
  TensorView view;
  view.name = info.name;
  view.dtype = *type->dtype;
  view.shape.assign(info.ggml_dims.rbegin(), info.ggml_dims.rend());
  view.data = source_->bytes().data() + data_offset_bytes_ + info.offset_bytes;
  view.nbytes = info.nbytes;
  return view;
}

std::vector<std::string> GgufFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

}  // namespace tpserve
