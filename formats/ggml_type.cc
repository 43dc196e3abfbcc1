#include "formats/ggml_type.h"

#include <iterator>

namespace tpserve {
namespace {

// Geometry as listed by GGML_QUANT_SIZES in the gguf Python package (gguf/constants.py);
// ids 4, 5 and 31..33, 36..38 were retired by ggml and are absent on purpose.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4, DType::kF32},          {1, "F16", 1, 2, DType::kF16},
    {2, "Q4_0", 32, 18, DType::kQ4_0},      {3, "Q4_1", 32, 20, DType::kQ4_1},
    {6, "Q5_0", 32, 22, DType::kQ5_0},      {7, "Q5_1", 32, 24, DType::kQ5_1},
    {8, "Q8_0", 32, 34, DType::kQ8_0},      {9, "Q8_1", 32, 40, std::nullopt},
    {10, "Q2_K", 256, 84, std::nullopt},    {11, "Q3_K", 256, 110, std::nullopt},
    {12, "Q4_K", 256, 144, DType::kQ4_K},   {13, "Q5_K", 256, 176, DType::kQ5_K},
    {14, "Q6_K", 256, 210, DType::kQ6_K},   {15, "Q8_K", 256, 292, std::nullopt},
    {16, "IQ2_XXS", 256, 66, std::nullopt}, {17, "IQ2_XS", 256, 74, std::nullopt},
    {18, "IQ3_XXS", 256, 98, std::nullopt}, {19, "IQ1_S", 256, 50, std::nullopt},
    {20, "IQ4_NL", 32, 18, std::nullopt},   {21, "IQ3_S", 256, 110, std::nullopt},
    {22, "IQ2_S", 256, 82, std::nullopt},   {23, "IQ4_XS", 256, 136, std::nullopt},
    {24, "I8", 1, 1, std::nullopt},         {25, "I16", 1, 2, std::nullopt},
    {26, "I32", 1, 4, std::nullopt},        {27, "I64", 1, 8, std::nullopt},
    {28, "F64", 1, 8, std::nullopt},        {29, "IQ1_M", 256, 56, std::nullopt},
    {30, "BF16", 1, 2, DType::kBF16},       {34, "TQ1_0", 256, 54, std::nullopt},
    {35, "TQ2_0", 256, 66, std::nullopt},   {39, "MXFP4", 32, 17, std::nullopt},
};

}  // namespace

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.id == id) return &info;
  }
  return nullptr;
}

std::string DecodedGgmlTypeNames() {
  std::string names;
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (!info.dtype.has_value()) continue;
    if (!names.empty()) names += ", ";
    names += info.name;
  }
  return names;
}

std::optional<uint32_t> GgmlTypeIdOf(DType t) {
  for (const GgmlTypeInfo& info : kGgmlTypes) {
    if (info.dtype == t) return info.id;
  }
  return std::nullopt;
}

}  // namespace tpserve
