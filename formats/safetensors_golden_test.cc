// F32/F16/BF16/F8_E4M3 safetensors written by Hugging Face's `safetensors` package must decode
// bit-identically to ml_dtypes/numpy casts (tests/golden/formats/make_safetensors_golden.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "formats/safetensors.h"
#include "formats/test_files.h"
#include "formats/weight_source.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

std::vector<uint32_t> DecodeBits(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.num_elements()));
  DequantizeRow(view.dtype, view.data, out.data(), view.num_elements());
  std::vector<uint32_t> bits(out.size());
  std::memcpy(bits.data(), out.data(), out.size() * sizeof(float));
  return bits;
}

std::vector<uint32_t> ReferenceBits(const std::string& leaf) {
  absl::StatusOr<std::vector<float>> values = ReadF32File(GoldenPath(leaf));
  EXPECT_TRUE(values.ok()) << values.status();
  std::vector<uint32_t> bits(values.ok() ? values->size() : 0);
  if (values.ok()) std::memcpy(bits.data(), values->data(), values->size() * sizeof(float));
  return bits;
}

TEST(SafetensorsGoldenTest, DtypesDecodeBitIdenticalToMlDtypes) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(GoldenPath("dtypes.safetensors"));
  ASSERT_TRUE(file.ok()) << file.status();
  struct Expected {
    const char* name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  for (const Expected& e : std::vector<Expected>{{"f8_all", DType::kF8E4M3, {16, 16}},
                                                 {"bf16", DType::kBF16, {3, 40}},
                                                 {"f16", DType::kF16, {5, 24}},
                                                 {"f32", DType::kF32, {2, 8}}}) {
    SCOPED_TRACE(e.name);
    absl::StatusOr<TensorView> view = (*file)->Find(e.name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->dtype, e.dtype);
    EXPECT_EQ(view->shape, e.shape);
    EXPECT_THAT(DecodeBits(*view),
                ElementsAreArray(ReferenceBits(std::string("dtypes.") + e.name + ".f32")));
  }
}

TEST(SafetensorsGoldenTest, ShardedCheckpointOpensThroughOpenWeightSource) {
  absl::StatusOr<std::unique_ptr<WeightSource>> source = OpenWeightSource(GoldenPath("sharded"));
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->format(), CheckpointFormat::kSafetensors);
  EXPECT_THAT((*source)->TensorNames(),
              ElementsAre("lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"));
  for (const std::string& name : (*source)->TensorNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<TensorView> view = (*source)->Find(name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_THAT(DecodeBits(*view), ElementsAreArray(ReferenceBits("sharded." + name + ".f32")));
  }
}

}  // namespace
}  // namespace tpserve
