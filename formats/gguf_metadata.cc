#include "formats/gguf_metadata.h"

#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

constexpr uint32_t kMaxValueType = static_cast<uint32_t>(GgufValueType::kF64);
// Smallest encodings, used to bound counts by the bytes left before anything is allocated.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;  // empty key, type, 1-byte value
constexpr uint64_t kMinStringBytes = 8;      // length of an empty string
constexpr uint64_t kMinArrayBytes = 4 + 8;   // element type and count of an empty array

std::optional<uint64_t> ScalarBytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    default:
      return std::nullopt;
  }
}

uint64_t MinEncodedBytes(GgufValueType t) {
  if (t == GgufValueType::kString) return kMinStringBytes;
  if (t == GgufValueType::kArray) return kMinArrayBytes;
  return *ScalarBytes(t);
}

bool IsInteger(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kU16:
    case GgufValueType::kI16:
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kU64:
    case GgufValueType::kI64:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<GgufValueType> ReadValueType(ByteReader& r, std::string_view what) {
  TP_ASSIGN_OR_RETURN(uint32_t raw, r.Read<uint32_t>(what));
  if (raw > kMaxValueType) {
    return absl::InvalidArgumentError(StrCat(r.source_name(), ": unknown GGUF value type ", raw,
                                             " for ", what, " (known: 0..", kMaxValueType, ")"));
  }
  return static_cast<GgufValueType>(raw);
}

// Checks that `count` elements of at least `min_bytes` each fit in what is left.
absl::Status CheckCountFits(const ByteReader& r, uint64_t count, uint64_t min_bytes,
                            std::string_view what) {
  if (count <= r.remaining() / min_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(StrCat(r.source_name(), ": ", what, " ", count, " at offset ",
                                           r.position(), " cannot fit in the remaining ",
                                           r.remaining(), " bytes (", min_bytes, "+ bytes each)"));
}

absl::Status CheckBools(const ByteReader& r, std::string_view bytes, std::string_view what) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto v = static_cast<uint8_t>(bytes[i]);
    if (v > 1) {
      return absl::InvalidArgumentError(
          StrCat(r.source_name(), ": bool value ", v, " in ", what, " is not 0 or 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status SkipValue(ByteReader& r, GgufValueType type, std::string_view what, int depth);

absl::Status SkipArrayElements(ByteReader& r, GgufValueType element_type, uint64_t count,
                               std::string_view what, int depth) {
  TP_RETURN_IF_ERROR(
      CheckCountFits(r, count, MinEncodedBytes(element_type), StrCat("array length of ", what)));
  if (std::optional<uint64_t> size = ScalarBytes(element_type)) {
    TP_ASSIGN_OR_RETURN(std::string_view bytes, r.ReadBytes(count * *size, what));
    if (element_type == GgufValueType::kBool) TP_RETURN_IF_ERROR(CheckBools(r, bytes, what));
    return absl::OkStatus();
  }
  for (uint64_t i = 0; i < count; ++i) {
    TP_RETURN_IF_ERROR(SkipValue(r, element_type, StrCat("element ", i, " of ", what), depth));
  }
  return absl::OkStatus();
}

absl::Status SkipValue(ByteReader& r, GgufValueType type, std::string_view what, int depth) {
  if (type == GgufValueType::kString) return ReadGgufString(r, what).status();
  if (type != GgufValueType::kArray) {
    TP_ASSIGN_OR_RETURN(std::string_view bytes, r.ReadBytes(*ScalarBytes(type), what));
    if (type == GgufValueType::kBool) return CheckBools(r, bytes, what);
    return absl::OkStatus();
  }
  if (depth >= GgufMetadata::kMaxArrayNesting) {
    return absl::InvalidArgumentError(StrCat(
        r.source_name(), ": ", what, " nests arrays deeper than ", GgufMetadata::kMaxArrayNesting));
  }
  TP_ASSIGN_OR_RETURN(GgufValueType element_type,
                      ReadValueType(r, StrCat("element type of ", what)));
  TP_ASSIGN_OR_RETURN(uint64_t count, r.Read<uint64_t>(StrCat("array length of ", what)));
  return SkipArrayElements(r, element_type, count, what, depth + 1);
}

// An integer value of any GGUF integer type, held without loss.
struct Integer {
  bool is_signed;
  int64_t s;
  uint64_t u;

  template <typename T>
  std::optional<T> As() const {
    if (is_signed) {
      if (!std::in_range<T>(s)) return std::nullopt;
      return static_cast<T>(s);
    }
    if (!std::in_range<T>(u)) return std::nullopt;
    return static_cast<T>(u);
  }
  std::string ToString() const { return is_signed ? StrCat(s) : StrCat(u); }
};

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// REQUIRES: IsInteger(type) and `p` holds a validated value of that type.
Integer DecodeInteger(GgufValueType type, const char* p) {
  switch (type) {
    case GgufValueType::kU8:
      return {false, 0, Load<uint8_t>(p)};
    case GgufValueType::kI8:
      return {true, Load<int8_t>(p), 0};
    case GgufValueType::kU16:
      return {false, 0, Load<uint16_t>(p)};
    case GgufValueType::kI16:
      return {true, Load<int16_t>(p), 0};
    case GgufValueType::kU32:
      return {false, 0, Load<uint32_t>(p)};
    case GgufValueType::kI32:
      return {true, Load<int32_t>(p), 0};
    case GgufValueType::kU64:
      return {false, 0, Load<uint64_t>(p)};
    default:
      return {true, Load<int64_t>(p), 0};
  }
}

template <typename T>
std::string RangeText() {
  return StrCat("[", std::numeric_limits<T>::min(), ", ", std::numeric_limits<T>::max(), "]");
}

}  // namespace

absl::StatusOr<std::string_view> ReadGgufString(ByteReader& r, std::string_view what) {
  TP_ASSIGN_OR_RETURN(uint64_t length, r.Read<uint64_t>(StrCat("length of ", what)));
  return r.ReadBytes(length, what);
}

std::string_view GgufValueTypeName(GgufValueType t) {
  switch (t) {
    case GgufValueType::kU8:
      return "UINT8";
    case GgufValueType::kI8:
      return "INT8";
    case GgufValueType::kU16:
      return "UINT16";
    case GgufValueType::kI16:
      return "INT16";
    case GgufValueType::kU32:
      return "UINT32";
    case GgufValueType::kI32:
      return "INT32";
    case GgufValueType::kF32:
      return "FLOAT32";
    case GgufValueType::kBool:
      return "BOOL";
    case GgufValueType::kString:
      return "STRING";
    case GgufValueType::kArray:
      return "ARRAY";
    case GgufValueType::kU64:
      return "UINT64";
    case GgufValueType::kI64:
      return "INT64";
    case GgufValueType::kF64:
      return "FLOAT64";
  }
  return "UNKNOWN";
}

absl::StatusOr<GgufMetadata> GgufMetadata::Parse(ByteReader& r, uint64_t kv_count) {
  GgufMetadata md{std::string(r.source_name())};
  TP_RETURN_IF_ERROR(CheckCountFits(r, kv_count, kMinKvBytes, "kv_count"));
  for (uint64_t i = 0; i < kv_count; ++i) {
    TP_ASSIGN_OR_RETURN(std::string_view key, ReadGgufString(r, StrCat("key of kv #", i)));
    const std::string what = StrCat("key '", key, "'");
    TP_ASSIGN_OR_RETURN(GgufValueType type, ReadValueType(r, what));
    Entry entry{type, GgufValueType::kU8, 0, {}};
    if (type == GgufValueType::kArray) {
      TP_ASSIGN_OR_RETURN(entry.element_type, ReadValueType(r, StrCat("element type of ", what)));
      TP_ASSIGN_OR_RETURN(entry.array_size, r.Read<uint64_t>(StrCat("array length of ", what)));
    }
    const size_t start = r.position();
    if (type == GgufValueType::kArray) {
      TP_RETURN_IF_ERROR(SkipArrayElements(r, entry.element_type, entry.array_size, what, 1));
    } else {
      TP_RETURN_IF_ERROR(SkipValue(r, type, what, 0));
    }
    entry.value = r.Slice(start, r.position());
    if (!md.entries_.emplace(std::string(key), entry).second) {
      return absl::InvalidArgumentError(
          StrCat(r.source_name(), ": duplicate key '", key, "' (kv #", i, ")"));
    }
    md.keys_.emplace_back(key);
  }
  return md;
}

bool GgufMetadata::HasKey(std::string_view key) const { return entries_.contains(key); }

absl::StatusOr<const GgufMetadata::Entry*> GgufMetadata::Lookup(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::NotFoundError(StrCat(source_name_, ": no GGUF key '", key, "'"));
  }
  return &it->second;
}

absl::Status GgufMetadata::WrongType(std::string_view key, const Entry& entry,
                                     std::string_view expected) const {
  std::string stored(GgufValueTypeName(entry.type));
  if (entry.type == GgufValueType::kArray) {
    stored = StrCat(stored, " of ", GgufValueTypeName(entry.element_type));
  }
  return absl::InvalidArgumentError(
      StrCat(source_name_, ": GGUF key '", key, "' has type ", stored, ", expected ", expected));
}

absl::Status GgufMetadata::OutOfRange(std::string_view key, std::string_view value,
                                      std::string_view bound) const {
  return absl::InvalidArgumentError(
      StrCat(source_name_, ": GGUF key '", key, "' value ", value, " is outside ", bound));
}

absl::StatusOr<GgufValueType> GgufMetadata::GetType(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  return e->type;
}

absl::StatusOr<uint32_t> GgufMetadata::GetU32(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (!IsInteger(e->type)) return WrongType(key, *e, "an integer");
  const Integer v = DecodeInteger(e->type, e->value.data());
  std::optional<uint32_t> out = v.As<uint32_t>();
  if (!out) return OutOfRange(key, v.ToString(), StrCat("uint32 ", RangeText<uint32_t>()));
  return *out;
}

absl::StatusOr<int64_t> GgufMetadata::GetI64(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (!IsInteger(e->type)) return WrongType(key, *e, "an integer");
  const Integer v = DecodeInteger(e->type, e->value.data());
  std::optional<int64_t> out = v.As<int64_t>();
  if (!out) return OutOfRange(key, v.ToString(), StrCat("int64 ", RangeText<int64_t>()));
  return *out;
}

absl::StatusOr<float> GgufMetadata::GetF32(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (e->type == GgufValueType::kF32) return Load<float>(e->value.data());
  if (e->type == GgufValueType::kF64) return static_cast<float>(Load<double>(e->value.data()));
  return WrongType(key, *e, "FLOAT32 or FLOAT64");
}

absl::StatusOr<bool> GgufMetadata::GetBool(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (e->type != GgufValueType::kBool) return WrongType(key, *e, "BOOL");
  return e->value[0] != 0;
}

absl::StatusOr<std::string> GgufMetadata::GetString(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (e->type != GgufValueType::kString) return WrongType(key, *e, "STRING");
  return std::string(e->value.substr(kMinStringBytes));
}

absl::StatusOr<const GgufMetadata::Entry*> GgufMetadata::LookupArray(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, Lookup(key));
  if (e->type != GgufValueType::kArray) return WrongType(key, *e, "ARRAY");
  return e;
}

absl::StatusOr<uint64_t> GgufMetadata::GetArraySize(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, LookupArray(key));
  return e->array_size;
}

absl::StatusOr<std::vector<std::string>> GgufMetadata::GetStringArray(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, LookupArray(key));
  if (e->element_type != GgufValueType::kString) return WrongType(key, *e, "ARRAY of STRING");
  // Already validated by Parse, so these reads cannot fail; they stay checked regardless.
  ByteReader r(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(e->value.data()), e->value.size()),
      source_name_);
  std::vector<std::string> out;
  out.reserve(e->array_size);  // bounded: Parse checked array_size * 8 <= bytes present
  for (uint64_t i = 0; i < e->array_size; ++i) {
    TP_ASSIGN_OR_RETURN(std::string_view s, ReadGgufString(r, StrCat("element ", i, " of ", key)));
    out.emplace_back(s);
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> GgufMetadata::GetI32Array(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, LookupArray(key));
  if (!IsInteger(e->element_type)) return WrongType(key, *e, "ARRAY of an integer type");
  const uint64_t element_bytes = *ScalarBytes(e->element_type);
  std::vector<int32_t> out;
  out.reserve(e->array_size);
  for (uint64_t i = 0; i < e->array_size; ++i) {
    const Integer v = DecodeInteger(e->element_type, e->value.data() + i * element_bytes);
    std::optional<int32_t> narrowed = v.As<int32_t>();
    if (!narrowed) {
      return OutOfRange(key, StrCat(v.ToString(), " (element ", i, ")"),
                        StrCat("int32 ", RangeText<int32_t>()));
    }
    out.push_back(*narrowed);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufMetadata::GetF32Array(std::string_view key) const {
  TP_ASSIGN_OR_RETURN(const Entry* e, LookupArray(key));
  std::vector<float> out;
  out.reserve(e->array_size);
  if (e->element_type == GgufValueType::kF32) {
    for (uint64_t i = 0; i < e->array_size; ++i)
      out.push_back(Load<float>(e->value.data() + 4 * i));
  } else if (e->element_type == GgufValueType::kF64) {
    for (uint64_t i = 0; i < e->array_size; ++i) {
      out.push_back(static_cast<float>(Load<double>(e->value.data() + 8 * i)));
    }
  } else {
    return WrongType(key, *e, "ARRAY of FLOAT32 or FLOAT64");
  }
  return out;
}

}  // namespace tpserve
