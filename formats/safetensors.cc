#include "formats/safetensors.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "formats/byte_reader.h"
#include "formats/json_strict.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kMetadataKey = "__metadata__";
constexpr uint64_t kInt64Max = std::numeric_limits<int64_t>::max();

struct DTypeSpec {
  std::string_view name;
  uint64_t element_bytes;
  std::optional<DType> dtype;
};

// Element types the safetensors format defines with whole-byte elements.
constexpr DTypeSpec kDTypes[] = {
    {"F32", 4, DType::kF32},        {"F16", 2, DType::kF16},   {"BF16", 2, DType::kBF16},
    {"F8_E4M3", 1, DType::kF8E4M3}, {"F64", 8, std::nullopt},  {"F8_E5M2", 1, std::nullopt},
    {"F8_E8M0", 1, std::nullopt},   {"C64", 8, std::nullopt},  {"I64", 8, std::nullopt},
    {"I32", 4, DType::kI32},         {"I16", 2, std::nullopt},  {"I8", 1, std::nullopt},
    {"U64", 8, std::nullopt},       {"U32", 4, std::nullopt},  {"U16", 2, std::nullopt},
    {"U8", 1, std::nullopt},        {"BOOL", 1, std::nullopt},
};

const DTypeSpec* FindDType(std::string_view name) {
  for (const DTypeSpec& spec : kDTypes) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Reads a JSON array of non-negative integers that fit `max`; nullopt otherwise.
std::optional<std::vector<uint64_t>> UnsignedArray(const Json& j, uint64_t max) {
  if (!j.is_array()) return std::nullopt;
  std::vector<uint64_t> out;
  for (const Json& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max) return std::nullopt;
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

// Parses one tensor entry, checking its fields and that its byte range matches its shape.
absl::StatusOr<SafetensorsTensorInfo> ParseEntry(std::string_view source, const std::string& name,
                                                 const Json& entry, uint64_t data_bytes) {
  const std::string what = StrCat(source, ": tensor '", name, "'");
  auto invalid = [&](const std::string& message) {
    return absl::InvalidArgumentError(StrCat(what, " ", message));
  };
  if (!entry.is_object()) return invalid("entry is not a JSON object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) return invalid("has no string 'dtype'");
  std::optional<std::vector<uint64_t>> shape;
  if (shape_it != entry.end()) shape = UnsignedArray(*shape_it, kInt64Max);
  if (!shape) return invalid("'shape' is not an array of integers in [0, 2^63)");
  std::optional<std::vector<uint64_t>> offsets;
  if (offsets_it != entry.end()) offsets = UnsignedArray(*offsets_it, ~uint64_t{0});
  if (!offsets || offsets->size() != 2) {
    return invalid("'data_offsets' is not an array of two non-negative integers");
  }

  SafetensorsTensorInfo info;
  info.name = name;
  info.dtype_name = dtype_it->get<std::string>();
  info.shape.assign(shape->begin(), shape->end());
  info.begin_bytes = (*offsets)[0];
  info.end_bytes = (*offsets)[1];
  const DTypeSpec* spec = FindDType(info.dtype_name);
  if (spec == nullptr) {
    return absl::UnimplementedError(
        StrCat(what, " has dtype '", info.dtype_name, "', which this reader does not know"));
  }
  info.dtype = spec->dtype;
  const std::string range = StrCat("data_offsets [", info.begin_bytes, ", ", info.end_bytes, "]");
  if (info.begin_bytes > info.end_bytes) return invalid(StrCat(range, " are reversed"));
  if (info.end_bytes > data_bytes) {
    return invalid(StrCat(range, " run past the data section (", data_bytes, " bytes)"));
  }
  uint64_t expected_bytes = spec->element_bytes;
  for (int64_t dim : info.shape) {
    const auto d = static_cast<uint64_t>(dim);
    if (d != 0 && expected_bytes > kInt64Max / d) {
      return invalid(StrCat("shape ", ShapeText(info.shape), " of ", info.dtype_name,
                            " overflows int64 bytes"));
    }
    expected_bytes *= d;
  }
  const uint64_t nbytes = info.end_bytes - info.begin_bytes;
  if (nbytes != expected_bytes) {
    return invalid(StrCat(range, " hold ", nbytes, " bytes but shape ", ShapeText(info.shape),
                          " of ", info.dtype_name, " needs ", expected_bytes));
  }
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  TP_ASSIGN_OR_RETURN(std::unique_ptr<MmapByteSource> source, MmapByteSource::Open(path));
  return FromSource(std::move(source));
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::FromSource(
    std::unique_ptr<ByteSource> source) {
  const std::string name = source->name();
  ByteReader r(source->bytes(), name);
  TP_ASSIGN_OR_RETURN(uint64_t header_bytes, r.Read<uint64_t>("header length"));
  if (header_bytes > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(StrCat(name, ": header length ", header_bytes,
                                             " exceeds the cap of ", kMaxHeaderBytes, " bytes"));
  }
  if (header_bytes > r.remaining()) {
    return absl::InvalidArgumentError(StrCat(name, ": header length ", header_bytes,
                                             " runs past the end of the file (", r.remaining(),
                                             " bytes follow the length)"));
  }
  TP_ASSIGN_OR_RETURN(std::string_view header_text, r.ReadBytes(header_bytes, "header"));

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(std::move(source)));
  file->data_offset_bytes_ = r.position();
  file->data_bytes_ = r.remaining();
  TP_RETURN_IF_ERROR(file->ParseHeader(header_text));
  TP_RETURN_IF_ERROR(file->CheckLayout());
  return file;
}

absl::Status SafetensorsFile::ParseHeader(std::string_view header_text) {
  const std::string& source = source_->name();
  TP_ASSIGN_OR_RETURN(Json header, ParseJsonStrict(header_text, StrCat(source, ": header")));
  if (!header.is_object()) {
    return absl::InvalidArgumentError(
        StrCat(source, ": header is a JSON ", header.type_name(), ", expected an object"));
  }
  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      // The format defines it as a map of strings to strings.
      if (!entry.is_object()) {
        return absl::InvalidArgumentError(StrCat(source, ": '__metadata__' is a JSON ",
                                                 entry.type_name(), ", expected an object"));
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          return absl::InvalidArgumentError(
              StrCat(source, ": '__metadata__' value '", key, "' is a JSON ", value.type_name(),
                     ", expected a string"));
        }
      }
      continue;
    }
    TP_ASSIGN_OR_RETURN(SafetensorsTensorInfo info, ParseEntry(source, name, entry, data_bytes_));
    tensors_.push_back(std::move(info));
  }
  // JSON objects have no order; the data section does.
  std::sort(tensors_.begin(), tensors_.end(),
            [](const SafetensorsTensorInfo& a, const SafetensorsTensorInfo& b) {
              return std::tie(a.begin_bytes, a.end_bytes) < std::tie(b.begin_bytes, b.end_bytes);
            });
  for (size_t i = 0; i < tensors_.size(); ++i) index_by_name_.emplace(tensors_[i].name, i);
  return absl::OkStatus();
}

absl::Status SafetensorsFile::CheckLayout() const {
  const std::string& source = source_->name();
  uint64_t covered_to = 0;  // tensors are sorted by begin, so gaps and overlaps show in order
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& t : tensors_) {
    if (t.begin_bytes == t.end_bytes) continue;  // empty tensors occupy nothing
    if (t.begin_bytes < covered_to) {
      return absl::InvalidArgumentError(StrCat(source, ": tensors '", previous->name, "' [",
                                               previous->begin_bytes, ", ", previous->end_bytes,
                                               ") and '", t.name, "' [", t.begin_bytes, ", ",
                                               t.end_bytes, ") overlap in the data section"));
    }
    if (t.begin_bytes > covered_to) {
      return absl::InvalidArgumentError(StrCat(source, ": data section bytes [", covered_to, ", ",
                                               t.begin_bytes, ") belong to no tensor"));
    }
    covered_to = t.end_bytes;
    previous = &t;
  }
  if (covered_to != data_bytes_) {
    return absl::InvalidArgumentError(StrCat(source, ": data section bytes [", covered_to, ", ",
                                             data_bytes_, ") belong to no tensor"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorView> SafetensorsFile::Find(std::string_view name) const {
  auto it = index_by_name_.find(name);
  if (it == index_by_name_.end()) {
    return absl::NotFoundError(StrCat("tensor '", name, "' not found in ", source_->name()));
  }
  const SafetensorsTensorInfo& info = tensors_[it->second];
  if (!info.dtype.has_value()) {
    return absl::UnimplementedError(
        StrCat(source_->name(), ": tensor '", name, "' has dtype ", info.dtype_name,
               ", which is not decoded here (supported: F32, F16, BF16, F8_E4M3, I32)"));
  }
  TensorView view;
  view.name = info.name;
  view.dtype = *info.dtype;
  view.shape = info.shape;
  view.data = source_->bytes().data() + data_offset_bytes_ + info.begin_bytes;
  view.nbytes = static_cast<int64_t>(info.end_bytes - info.begin_bytes);
  return view;
}

std::vector<std::string> SafetensorsFile::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const SafetensorsTensorInfo& t : tensors_) names.push_back(t.name);
  return names;
}

}  // namespace tpserve
