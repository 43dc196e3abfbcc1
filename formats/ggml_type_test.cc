#include "formats/ggml_type.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(GgmlTypeTest, DecodableTypesAgreeWithDType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                  DType::kQ4_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    std::optional<uint32_t> id = GgmlTypeIdOf(t);
    ASSERT_TRUE(id.has_value()) << DTypeName(t);
    const GgmlTypeInfo* info = FindGgmlType(*id);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, t);
    EXPECT_EQ(info->name, DTypeName(t));
    EXPECT_EQ(info->block_elems, BlockElems(t));
    EXPECT_EQ(info->block_bytes, BlockBytes(t));
  }
  EXPECT_EQ(GgmlTypeIdOf(DType::kQ4_1), 3u);
  EXPECT_EQ(GgmlTypeIdOf(DType::kBF16), 30u);
  EXPECT_EQ(GgmlTypeIdOf(DType::kQ4_K), 12u);
  EXPECT_EQ(GgmlTypeIdOf(DType::kQ5_K), 13u);
  EXPECT_EQ(GgmlTypeIdOf(DType::kQ6_K), 14u);
  EXPECT_EQ(GgmlTypeIdOf(DType::kF8E4M3), std::nullopt);
}

TEST(GgmlTypeTest, KnowsUndecodableGeometryAndRejectsRetiredIds) {
  const GgmlTypeInfo* q3k = FindGgmlType(11);
  ASSERT_NE(q3k, nullptr);
  EXPECT_EQ(q3k->name, "Q3_K");
  EXPECT_EQ(q3k->block_elems, 256);
  EXPECT_EQ(q3k->block_bytes, 110);
  EXPECT_FALSE(q3k->dtype.has_value());
  EXPECT_EQ(FindGgmlType(4), nullptr);   // Q4_2, removed from ggml
  EXPECT_EQ(FindGgmlType(31), nullptr);  // Q4_0_4_4, removed
  EXPECT_EQ(FindGgmlType(1000), nullptr);
}

TEST(GgmlTypeTest, DecodedNamesListEveryTypeWithADType) {
  EXPECT_EQ(DecodedGgmlTypeNames(), "F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16");
}

}  // namespace
}  // namespace tpserve
