#include "formats/ggml_type.h"

#include <gtest/gtest.h>

namespace tpserve {
namespace {

TEST(GgmlTypeTest, DecodableTypesAgreeWithDType) {
  for (DType t :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_1}) {
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
  EXPECT_EQ(GgmlTypeIdOf(DType::kF8E4M3), std::nullopt);
}

TEST(GgmlTypeTest, KnowsUndecodableGeometryAndRejectsRetiredIds) {
  const GgmlTypeInfo* q6k = FindGgmlType(14);
  ASSERT_NE(q6k, nullptr);
  EXPECT_EQ(q6k->name, "Q6_K");
  EXPECT_EQ(q6k->block_elems, 256);
  EXPECT_EQ(q6k->block_bytes, 210);
  EXPECT_FALSE(q6k->dtype.has_value());
  EXPECT_EQ(FindGgmlType(4), nullptr);   // Q4_2, removed from ggml
  EXPECT_EQ(FindGgmlType(31), nullptr);  // Q4_0_4_4, removed
  EXPECT_EQ(FindGgmlType(1000), nullptr);
}

}  // namespace
}  // namespace tpserve
