// Internal to the stored-matrix readers (stored_matrix*.cc): finding a checkpoint tensor with
// the dtype and exact shape a layout requires, and loading the little-endian values inside.
// Not an interface; other packages use checkpoint/stored_matrix.h.
// Thread-safe: pure functions (FindTensor writes only to `used`).
#ifndef TPSERVE_CHECKPOINT_STORED_TENSORS_H_
#define TPSERVE_CHECKPOINT_STORED_TENSORS_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/stored_matrix.h"
#include "formats/weight_source.h"

namespace tpserve::stored_internal {

std::string ShapeString(const std::vector<int64_t>& shape);

// Tensor `name` of `source`, which must have one of `dtypes` and exactly `shape`; `layout`
// says where the expectation comes from ("AWQ qweight [in, out/8]"). Marks it in `used`.
// NOT_FOUND naming it when absent; INVALID_ARGUMENT naming it, the dtype or shape found and
// the one expected; a reader's UNIMPLEMENTED (a dtype it does not decode) with the expected
// dtypes added.
absl::StatusOr<TensorView> FindTensor(const WeightSource& source, const std::string& name,
                                      std::initializer_list<DType> dtypes,
                                      const std::vector<int64_t>& shape, std::string_view layout,
                                      TensorUse* used);

// INVALID_ARGUMENT "<module>: <what> <value> is not a multiple of <quantum> (<why>)".
absl::Status CheckMultiple(const std::string& module, std::string_view what, int64_t value,
                           int64_t quantum, std::string_view why);

// Element i of little-endian `base` (checkpoint bytes need not be aligned).
inline uint32_t LoadU32(const uint8_t* base, int64_t i) {
  uint32_t v;
  std::memcpy(&v, base + 4 * i, 4);
  return v;
}
inline uint16_t LoadU16(const uint8_t* base, int64_t i) {
  uint16_t v;
  std::memcpy(&v, base + 2 * i, 2);
  return v;
}
// Element i of a scale tensor of dtype F32, BF16 or F16, as f32 (exact for all three).
float LoadScale(DType dtype, const uint8_t* base, int64_t i);

}  // namespace tpserve::stored_internal

#endif  // TPSERVE_CHECKPOINT_STORED_TENSORS_H_
