// Dequantization of every decoded GGUF type must be bit-identical to the gguf Python package
// (tests/golden/formats/make_gguf_golden.py and make_kquant_golden.py wrote the files and the
// reference values).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "formats/gguf.h"
#include "formats/test_files.h"

namespace tpserve {
namespace {

using ::testing::ElementsAreArray;

// Decodes a whole tensor row by row, as the loader will.
std::vector<float> DequantizeAll(const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.num_elements()));
  const int64_t row_bytes = *RowBytes(view.dtype, view.cols());
  for (int64_t r = 0; r < view.rows(); ++r) {
    DequantizeRow(view.dtype, view.data + r * row_bytes, out.data() + r * view.cols(), view.cols());
  }
  return out;
}

// Bit patterns, so NaN payloads and signed zeros count.
std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

struct Expected {
  const char* name;
  DType dtype;
  std::vector<int64_t> shape;
};

TEST(GgufGoldenTest, EveryTypeDequantizesBitIdenticalToTheGgufPackage) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(GoldenPath("quant_types.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<Expected> tensors = {
      {"f32", DType::kF32, {3, 64}},   {"f16", DType::kF16, {5, 96}},
      {"bf16", DType::kBF16, {4, 32}}, {"q8_0", DType::kQ8_0, {5, 96}},
      {"q4_0", DType::kQ4_0, {3, 64}}, {"q4_1", DType::kQ4_1, {5, 96}},
  };
  ASSERT_EQ((*file)->TensorNames().size(), tensors.size());
  for (const Expected& e : tensors) {
    SCOPED_TRACE(e.name);
    absl::StatusOr<TensorView> view = (*file)->Find(e.name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->dtype, e.dtype);
    EXPECT_EQ(view->shape, e.shape);
    absl::StatusOr<std::vector<float>> want =
        ReadF32File(GoldenPath(std::string("quant_types.") + e.name + ".f32"));
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(static_cast<int64_t>(want->size()), view->num_elements());
    EXPECT_THAT(Bits(DequantizeAll(*view)), ElementsAreArray(Bits(*want)));
  }
}

// Random but valid super-blocks (the gguf package has no K-quant encoder), including fp16
// scales of zero, -0, a subnormal, 65504 and negative values.
TEST(GgufGoldenTest, KQuantsDequantizeBitIdenticalToTheGgufPackage) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file =
      GgufFile::Open(GoldenPath("kquant_types.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<Expected> tensors = {
      {"q4_k", DType::kQ4_K, {3, 512}},
      {"q5_k", DType::kQ5_K, {2, 768}},
      {"q6_k", DType::kQ6_K, {3, 512}},
      {"q5_0", DType::kQ5_0, {3, 160}},
      {"q5_1", DType::kQ5_1, {2, 224}},
  };
  ASSERT_EQ((*file)->TensorNames().size(), tensors.size());
  for (const Expected& e : tensors) {
    SCOPED_TRACE(e.name);
    absl::StatusOr<TensorView> view = (*file)->Find(e.name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->dtype, e.dtype);
    EXPECT_EQ(view->shape, e.shape);
    EXPECT_EQ(view->nbytes, e.shape[0] * *RowBytes(e.dtype, e.shape[1]));
    absl::StatusOr<std::vector<float>> want =
        ReadF32File(GoldenPath(std::string("kquant_types.") + e.name + ".f32"));
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(static_cast<int64_t>(want->size()), view->num_elements());
    EXPECT_THAT(Bits(DequantizeAll(*view)), ElementsAreArray(Bits(*want)));
  }
}

TEST(GgufGoldenTest, WriterMetadataReadsBack) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(GoldenPath("quant_types.gguf"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetString("general.architecture"), "llama");
  EXPECT_EQ(*(*file)->GetString("general.name"), "tpserve quantization golden data");
  EXPECT_EQ((*file)->version(), 3u);
  EXPECT_EQ((*file)->alignment_bytes(), 32u);
}

}  // namespace
}  // namespace tpserve
