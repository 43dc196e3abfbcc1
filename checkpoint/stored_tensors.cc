#include "checkpoint/stored_tensors.h"

#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tpserve::stored_internal {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<TensorView> FindTensor(const WeightSource& source, const std::string& name,
                                      std::initializer_list<DType> dtypes,
                                      const std::vector<int64_t>& shape, std::string_view layout,
                                      TensorUse* used) {
  std::vector<std::string> names;
  for (DType d : dtypes) names.emplace_back(DTypeName(d));
  const std::string expected = absl::StrJoin(names, " or ");
  absl::StatusOr<TensorView> t = source.Find(name);
  if (!t.ok()) {
    if (t.status().code() == absl::StatusCode::kNotFound) return t.status();
    return absl::Status(t.status().code(),
                        StrCat(t.status().message(), "; ", layout, " must be ", expected));
  }
  bool dtype_ok = false;
  for (DType d : dtypes) dtype_ok = dtype_ok || t->dtype == d;
  if (!dtype_ok) {
    return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", source.Describe(), ": dtype ",
                                             DTypeName(t->dtype), ", expected ", expected, " (",
                                             layout, ")"));
  }
  if (t->shape != shape) {
    return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", source.Describe(), ": shape ",
                                             ShapeString(t->shape), ", expected ",
                                             ShapeString(shape), " (", layout, ")"));
  }
  used->Mark(name);
  return t;
}

absl::Status CheckMultiple(const std::string& module, std::string_view what, int64_t value,
                           int64_t quantum, std::string_view why) {
  if (value % quantum == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(module, ": ", what, " ", value, " is not a multiple of ", quantum, " (", why, ")"));
}

float LoadScale(DType dtype, const uint8_t* base, int64_t i) {
  switch (dtype) {
    case DType::kBF16:
      return BF16ToF32(LoadU16(base, i));
    case DType::kF16:
      return F16ToF32(LoadU16(base, i));
    default: {
      float v;
      std::memcpy(&v, base + 4 * i, 4);
      return v;
    }
  }
}

}  // namespace tpserve::stored_internal
