// The ggml tensor type ids a GGUF file may name, with their block geometry, and which of them
// this project can decode (those that map to a DType).
//
//   const GgmlTypeInfo* info = FindGgmlType(type_id);   // nullptr: not a ggml type at all
//   if (info && info->dtype) DequantizeRow(*info->dtype, ...);
//
// Knowing the geometry of types we cannot decode still lets a reader validate their extents
// and list them. Thread-safe: a constant table.
#ifndef TPSERVE_FORMATS_GGML_TYPE_H_
#define TPSERVE_FORMATS_GGML_TYPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "formats/dtype.h"

namespace tpserve {

struct GgmlTypeInfo {
  uint32_t id;
  std::string_view name;
  int64_t block_elems;
  int64_t block_bytes;
  std::optional<DType> dtype;  // set when DequantizeRow handles it
};

// nullptr for ids ggml never assigned (or has since removed).
const GgmlTypeInfo* FindGgmlType(uint32_t id);

// "F32, F16, Q4_0, ...": the ggml types that map to a DType, in id order, for error messages.
std::string DecodedGgmlTypeNames();

// The ggml id a DType is stored under in GGUF; nullopt for F8E4M3 (not a ggml type).
std::optional<uint32_t> GgmlTypeIdOf(DType t);

}  // namespace tpserve

#endif  // TPSERVE_FORMATS_GGML_TYPE_H_
