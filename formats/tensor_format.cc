#include "formats/tensor_format.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "formats/dtype.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

constexpr int64_t kFp8TileSize = 128;  // DeepSeek-V3 "weight_block_size": [128, 128]
constexpr int64_t kFp32ScaleBytes = 4;
constexpr int64_t kInt4ScaleZeroBytes = 2 + 2;  // fp16 scale + fp16 zero point per group
constexpr int64_t kDefaultInt4Group = 128;

constexpr std::string_view kAcceptedNames =
    "f32, f16, bf16, fp8-e4m3, fp8, fp8-block, int4, int4-g<N>[-act], q8_0, q4_0, q4_1, q5_0, "
    "q5_1, q4_k, q5_k, q6_k";

// The reader's element type of a GGML kind: block values and bytes come from its layout table
// (formats/dtype.h), so the plan and the loader can never disagree on a GGML type's size.
std::optional<DType> GgmlDType(FormatKind kind) {
  switch (kind) {
    case FormatKind::kQ8_0:
      return DType::kQ8_0;
    case FormatKind::kQ4_0:
      return DType::kQ4_0;
    case FormatKind::kQ4_1:
      return DType::kQ4_1;
    case FormatKind::kQ4_K:
      return DType::kQ4_K;
    case FormatKind::kQ5_K:
      return DType::kQ5_K;
    case FormatKind::kQ6_K:
      return DType::kQ6_K;
    case FormatKind::kQ5_0:
      return DType::kQ5_0;
    case FormatKind::kQ5_1:
      return DType::kQ5_1;
    default:
      return std::nullopt;
  }
}

bool IsGgml(FormatKind kind) { return GgmlDType(kind).has_value(); }
// REQUIRES: IsGgml(kind).
int64_t GgmlBlockBytes(FormatKind kind) { return BlockBytes(*GgmlDType(kind)); }
int64_t GgmlBlockValues(FormatKind kind) { return BlockElems(*GgmlDType(kind)); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// *out = a * b + c; false on int64 overflow (all operands are non-negative here).
bool MulAdd(int64_t a, int64_t b, int64_t c, int64_t* out) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return false;
  return !__builtin_add_overflow(product, c, out);
}

}  // namespace

absl::StatusOr<TensorFormat> ParseTensorFormat(std::string_view name) {
  if (name == "f32" || name == "fp32") return TensorFormat::Of(FormatKind::kF32);
  if (name == "f16" || name == "fp16") return TensorFormat::Of(FormatKind::kF16);
  if (name == "bf16") return TensorFormat::Of(FormatKind::kBF16);
  if (name == "fp8-e4m3") return TensorFormat::Of(FormatKind::kF8E4M3);
  if (name == "fp8") return TensorFormat::Of(FormatKind::kFp8PerChannel);
  if (name == "fp8-block") return TensorFormat::Of(FormatKind::kFp8Block128);
  if (name == "q8_0") return TensorFormat::Of(FormatKind::kQ8_0);
  if (name == "q4_0") return TensorFormat::Of(FormatKind::kQ4_0);
  if (name == "q4_1") return TensorFormat::Of(FormatKind::kQ4_1);
  if (name == "q4_k") return TensorFormat::Of(FormatKind::kQ4_K);
  if (name == "q5_k") return TensorFormat::Of(FormatKind::kQ5_K);
  if (name == "q6_k") return TensorFormat::Of(FormatKind::kQ6_K);
  if (name == "q5_0") return TensorFormat::Of(FormatKind::kQ5_0);
  if (name == "q5_1") return TensorFormat::Of(FormatKind::kQ5_1);
  if (name == "int4") return TensorFormat::Int4(kDefaultInt4Group);
  if (name.starts_with("int4-g")) {
    const bool act_order = name.ends_with("-act");
    const std::string_view digits =
        name.substr(6, name.size() - 6 - (act_order ? std::string_view("-act").size() : 0));
    int64_t group = 0;
    // Codes are packed in 32-column chunks (GGML nibble order), so groups are whole chunks.
    if (!absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &group) ||
        group < 32 || group % 32 != 0) {
      return absl::InvalidArgumentError(StrCat(
          "weight format \"", name, "\": int4 group size must be a positive multiple of 32"));
    }
    return TensorFormat::Int4(group, act_order);
  }
  return absl::InvalidArgumentError(
      StrCat("unknown tensor format \"", name, "\"; accepted: ", kAcceptedNames));
}

std::string TensorFormatName(const TensorFormat& format) {
  switch (format.kind) {
    case FormatKind::kF32:
      return "f32";
    case FormatKind::kF16:
      return "f16";
    case FormatKind::kBF16:
      return "bf16";
    case FormatKind::kF8E4M3:
      return "fp8-e4m3";
    case FormatKind::kFp8PerChannel:
      return "fp8";
    case FormatKind::kFp8Block128:
      return "fp8-block";
    case FormatKind::kInt4Group:
      return StrCat("int4-g", format.group_size, format.act_order ? "-act" : "");
    case FormatKind::kQ8_0:
      return "q8_0";
    case FormatKind::kQ4_0:
      return "q4_0";
    case FormatKind::kQ4_1:
      return "q4_1";
    case FormatKind::kQ4_K:
      return "q4_k";
    case FormatKind::kQ5_K:
      return "q5_k";
    case FormatKind::kQ6_K:
      return "q6_k";
    case FormatKind::kQ5_0:
      return "q5_0";
    case FormatKind::kQ5_1:
      return "q5_1";
  }
  return "?";
}

int64_t PlainElementBytes(FormatKind kind) {
  switch (kind) {
    case FormatKind::kF32:
      return 4;
    case FormatKind::kF16:
    case FormatKind::kBF16:
      return 2;
    case FormatKind::kF8E4M3:
      return 1;
    default:
      return 0;
  }
}

bool IsPlainFormat(FormatKind kind) { return PlainElementBytes(kind) != 0; }

double BitsPerValue(const TensorFormat& format) {
  if (IsPlainFormat(format.kind)) return 8.0 * PlainElementBytes(format.kind);
  if (IsGgml(format.kind)) {
    return 8.0 * GgmlBlockBytes(format.kind) / GgmlBlockValues(format.kind);
  }
  if (format.kind == FormatKind::kInt4Group) return 4.0;
  return 8.0;  // fp8 with separate scales
}

int64_t InputBlockValues(const TensorFormat& format) {
  if (IsGgml(format.kind)) return GgmlBlockValues(format.kind);
  if (format.kind == FormatKind::kInt4Group) return format.group_size;
  if (format.kind == FormatKind::kFp8Block128) return kFp8TileSize;
  return 1;
}

int64_t OutputBlockRows(const TensorFormat& format) {
  return format.kind == FormatKind::kFp8Block128 ? kFp8TileSize : 1;
}

absl::StatusOr<int64_t> MatrixBytes(const TensorFormat& format, int64_t rows, int64_t cols,
                                    std::string_view what) {
  if (rows < 0 || cols < 0) {
    return absl::InvalidArgumentError(StrCat(what, ": negative shape [", rows, ", ", cols, "]"));
  }
  const std::string name = TensorFormatName(format);
  if (format.kind == FormatKind::kInt4Group && format.group_size <= 0) {
    return absl::InvalidArgumentError(StrCat(what, ": int4 group size must be > 0"));
  }
  const int64_t block = InputBlockValues(format);
  if ((IsGgml(format.kind) || format.kind == FormatKind::kInt4Group) && cols % block != 0) {
    return absl::InvalidArgumentError(StrCat(what, ": input dim ", cols,
                                             " is not a multiple of the ", name, " block of ",
                                             block, " values"));
  }
  int64_t bytes = 0;
  bool ok = true;
  if (IsPlainFormat(format.kind)) {
    ok = MulAdd(rows, cols, 0, &bytes) && MulAdd(bytes, PlainElementBytes(format.kind), 0, &bytes);
  } else if (IsGgml(format.kind)) {
    ok = MulAdd(rows, cols / block, 0, &bytes) &&
         MulAdd(bytes, GgmlBlockBytes(format.kind), 0, &bytes);
  } else if (format.kind == FormatKind::kFp8PerChannel) {
    ok = MulAdd(rows, cols, rows * kFp32ScaleBytes, &bytes);
  } else if (format.kind == FormatKind::kFp8Block128) {
    const int64_t tiles = CeilDiv(rows, kFp8TileSize) * CeilDiv(cols, kFp8TileSize);
    ok = MulAdd(rows, cols, tiles * kFp32ScaleBytes, &bytes);
  } else {  // int4 group: two values per byte, so the packed row needs an even length
    int64_t groups_bytes = 0;
    ok = MulAdd(rows, (cols / block) * kInt4ScaleZeroBytes, format.act_order ? cols * 4 : 0,
                &groups_bytes) &&
         MulAdd(rows, cols / 2, groups_bytes, &bytes);
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        StrCat(what, ": [", rows, ", ", cols, "] in ", name, " overflows int64 bytes"));
  }
  return bytes;
}

std::optional<DType> ElementDType(const TensorFormat& format) {
  switch (format.kind) {
    case FormatKind::kF32:
      return DType::kF32;
    case FormatKind::kF16:
      return DType::kF16;
    case FormatKind::kBF16:
      return DType::kBF16;
    case FormatKind::kF8E4M3:
    case FormatKind::kFp8PerChannel:
    case FormatKind::kFp8Block128:
      return DType::kF8E4M3;
    case FormatKind::kInt4Group:
      return std::nullopt;
    default:
      return GgmlDType(format.kind);
  }
}

TensorFormat FormatOfDType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return TensorFormat::Of(FormatKind::kF32);
    case DType::kF16:
      return TensorFormat::Of(FormatKind::kF16);
    case DType::kBF16:
      return TensorFormat::Of(FormatKind::kBF16);
    case DType::kF8E4M3:
      return TensorFormat::Of(FormatKind::kF8E4M3);
    case DType::kQ8_0:
      return TensorFormat::Of(FormatKind::kQ8_0);
    case DType::kQ4_0:
      return TensorFormat::Of(FormatKind::kQ4_0);
    case DType::kQ4_1:
      return TensorFormat::Of(FormatKind::kQ4_1);
    case DType::kQ4_K:
      return TensorFormat::Of(FormatKind::kQ4_K);
    case DType::kQ5_K:
      return TensorFormat::Of(FormatKind::kQ5_K);
    case DType::kQ6_K:
      return TensorFormat::Of(FormatKind::kQ6_K);
    case DType::kQ5_0:
      return TensorFormat::Of(FormatKind::kQ5_0);
    case DType::kQ5_1:
      return TensorFormat::Of(FormatKind::kQ5_1);
    case DType::kI32:
      break;  // no format holds integers: excluded by the REQUIRES
  }
  return TensorFormat::Of(FormatKind::kF32);
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

int64_t DenseValueBytes(const TensorFormat& format, int64_t num_values) {
  if (IsGgml(format.kind)) {
    return CeilDiv(num_values, GgmlBlockValues(format.kind)) * GgmlBlockBytes(format.kind);
  }
  if (format.kind == FormatKind::kInt4Group) return CeilDiv(num_values, 2);
  if (IsPlainFormat(format.kind)) return num_values * PlainElementBytes(format.kind);
  return num_values;  // fp8
}

}  // namespace tpserve
