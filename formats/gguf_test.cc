#include "formats/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "formats/gguf_test_builder.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(std::string bytes) {
  return GgufFile::FromSource(std::make_unique<MemoryByteSource>("mem.gguf", std::move(bytes)));
}

std::string F32Bytes(const std::vector<float>& values) {
  std::string out;
  for (float v : values) AppendLe(out, v);
  return out;
}

// One key of every scalar type plus arrays, so each getter meets each type.
GgufTestBuilder AllTypesBuilder() {
  GgufTestBuilder b;
  b.AddU8("u8", 200)
      .AddI8("i8", -5)
      .AddU16("u16", 60000)
      .AddI16("i16", -30000)
      .AddU32("u32", 4000000000u)
      .AddI32("i32", -2000000000)
      .AddU64("u64", std::numeric_limits<uint64_t>::max())
      .AddI64("i64", -(int64_t{1} << 40))
      .AddF32("f32", 0.25f)
      .AddF64("f64", 1e-5)
      .AddBool("flag", true)
      .AddString("name", "SmolLM2")
      .AddStringArray("tokens", {"<s>", "", "hello"})
      .AddI32Array("ids", {1, -2, 3})
      .AddF32Array("scores", {0.5f, -1.5f});
  return b;
}

TEST(GgufMetadataTest, ReadsEveryScalarType) {
  auto file = ParseBytes(AllTypesBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(*f.GetU32("u8"), 200u);
  EXPECT_EQ(*f.GetI64("i8"), -5);
  EXPECT_EQ(*f.GetU32("u16"), 60000u);
  EXPECT_EQ(*f.GetI64("i16"), -30000);
  EXPECT_EQ(*f.GetU32("u32"), 4000000000u);
  EXPECT_EQ(*f.GetI64("i32"), -2000000000);
  EXPECT_EQ(*f.GetI64("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(*f.GetF32("f32"), 0.25f);
  EXPECT_EQ(*f.GetF32("f64"), 1e-5f);
  EXPECT_TRUE(*f.GetBool("flag"));
  EXPECT_EQ(*f.GetString("name"), "SmolLM2");
  EXPECT_THAT(*f.GetStringArray("tokens"), ElementsAre("<s>", "", "hello"));
  EXPECT_THAT(*f.GetI32Array("ids"), ElementsAre(1, -2, 3));
  EXPECT_THAT(*f.GetF32Array("scores"), ElementsAre(0.5f, -1.5f));
  EXPECT_EQ(*f.GetArraySize("tokens"), 3u);
  EXPECT_EQ(*f.metadata().GetType("u16"), GgufValueType::kU16);
  EXPECT_TRUE(f.HasKey("flag"));
  EXPECT_FALSE(f.HasKey("nope"));
  EXPECT_EQ(f.metadata().keys().front(), "u8");
  EXPECT_EQ(f.metadata().keys().size(), 15u);
}

TEST(GgufMetadataTest, IntegerGettersRangeCheck) {
  auto file = ParseBytes(AllTypesBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<uint32_t> negative = (*file)->GetU32("i8");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("'i8' value -5 is outside uint32"));
  absl::StatusOr<int64_t> huge = (*file)->GetI64("u64");
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(),
              HasSubstr("'u64' value 18446744073709551615 is outside int64"));
  absl::StatusOr<uint32_t> too_big = (*file)->GetU32("i64");
  EXPECT_THAT(too_big.status().message(), HasSubstr("'i64' value -1099511627776"));
}

TEST(GgufMetadataTest, WrongTypeAndMissingKeyNameTheKey) {
  auto file = ParseBytes(AllTypesBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  absl::Status s = f.GetU32("name").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'name' has type STRING, expected an integer"));
  s = f.GetString("u8").status();
  EXPECT_THAT(s.message(), HasSubstr("'u8' has type UINT8, expected STRING"));
  s = f.GetF32("i32").status();
  EXPECT_THAT(s.message(), HasSubstr("'i32' has type INT32, expected FLOAT32 or FLOAT64"));
  s = f.GetBool("u8").status();
  EXPECT_THAT(s.message(), HasSubstr("expected BOOL"));
  s = f.GetStringArray("ids").status();
  EXPECT_THAT(s.message(), HasSubstr("'ids' has type ARRAY of INT32, expected ARRAY of STRING"));
  s = f.GetI32Array("tokens").status();
  EXPECT_THAT(s.message(), HasSubstr("expected ARRAY of an integer type"));
  s = f.GetF32Array("name").status();
  EXPECT_THAT(s.message(), HasSubstr("'name' has type STRING, expected ARRAY"));
  s = f.GetU32("missing.key").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("mem.gguf: no GGUF key 'missing.key'"));
}

TEST(GgufMetadataTest, I32ArrayAcceptsOtherIntegerTypesWithRangeCheck) {
  std::string u8s;
  AppendLe(u8s, static_cast<uint32_t>(GgufValueType::kU8));
  AppendLe(u8s, uint64_t{2});
  u8s += "\x07\xff";
  std::string i64s;
  AppendLe(i64s, static_cast<uint32_t>(GgufValueType::kI64));
  AppendLe(i64s, uint64_t{2});
  AppendLe(i64s, int64_t{-1});
  AppendLe(i64s, int64_t{1} << 31);
  GgufTestBuilder b;
  b.AddRawKv("bytes", GgufValueType::kArray, u8s).AddRawKv("wide", GgufValueType::kArray, i64s);
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(*(*file)->GetI32Array("bytes"), ElementsAre(7, 255));
  absl::Status s = (*file)->GetI32Array("wide").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'wide' value 2147483648 (element 1) is outside int32"));
}

TEST(GgufMetadataTest, NestedArraysParseAndReportTheirType) {
  // [[1, 2], []] as an array of arrays of u8.
  std::string inner1, inner2, outer;
  AppendLe(inner1, static_cast<uint32_t>(GgufValueType::kU8));
  AppendLe(inner1, uint64_t{2});
  inner1 += "\x01\x02";
  AppendLe(inner2, static_cast<uint32_t>(GgufValueType::kU8));
  AppendLe(inner2, uint64_t{0});
  AppendLe(outer, static_cast<uint32_t>(GgufValueType::kArray));
  AppendLe(outer, uint64_t{2});
  outer += inner1 + inner2;
  GgufTestBuilder b;
  b.AddRawKv("nested", GgufValueType::kArray, outer).AddU32("after", 7);
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetArraySize("nested"), 2u);
  EXPECT_EQ(*(*file)->GetU32("after"), 7u);
  EXPECT_THAT((*file)->GetStringArray("nested").status().message(),
              HasSubstr("has type ARRAY of ARRAY"));
}

TEST(GgufMetadataTest, AcceptsArraysNestedToTheLimit) {
  std::string value;
  AppendLe(value, static_cast<uint32_t>(GgufValueType::kU8));
  AppendLe(value, uint64_t{0});
  for (int level = 1; level < GgufMetadata::kMaxArrayNesting; ++level) {
    std::string outer;
    AppendLe(outer, static_cast<uint32_t>(GgufValueType::kArray));
    AppendLe(outer, uint64_t{1});
    value = outer + value;
  }
  auto file = ParseBytes(GgufTestBuilder().AddRawKv("deep", GgufValueType::kArray, value).Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->GetArraySize("deep"), 1u);
}

TEST(GgufFileTest, TensorViewsReverseDimsAndPointAtTheData) {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};  // 2 rows of 3 (ggml dims {3, 2})
  const std::vector<float> bias = {-1, -2, -3};
  GgufTestBuilder b;
  b.AddString("general.architecture", "llama")
      .AddTensor("w", 0, {3, 2}, F32Bytes(w))
      .AddTensor("bias", 0, {3}, F32Bytes(bias));
  const std::string bytes = b.Build();
  auto file = ParseBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufFile& f = **file;
  EXPECT_EQ(f.format(), CheckpointFormat::kGguf);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment_bytes(), 32u);
  EXPECT_EQ(f.data_offset_bytes(), b.layout().data_section);
  EXPECT_THAT(f.TensorNames(), ElementsAre("w", "bias"));

  absl::StatusOr<TensorView> view = f.Find("w");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->dtype, DType::kF32);
  EXPECT_THAT(view->shape, ElementsAre(2, 3));
  EXPECT_EQ(view->rows(), 2);
  EXPECT_EQ(view->cols(), 3);
  EXPECT_EQ(view->nbytes, 24);
  std::vector<float> got(6);
  std::memcpy(got.data(), view->data, 24);
  EXPECT_EQ(got, w);

  view = f.Find("bias");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(view->shape, ElementsAre(3));
  // The second tensor starts at the next multiple of the alignment.
  EXPECT_EQ(f.tensor_infos()[1].offset_bytes, 32u);
  std::vector<float> got_bias(3);
  std::memcpy(got_bias.data(), view->data, 12);
  EXPECT_EQ(got_bias, bias);
}

TEST(GgufFileTest, HonoursCustomAlignmentAndVersion2) {
  GgufTestBuilder b;
  b.SetVersion(2)
      .AddU32("general.alignment", 64)
      .AddTensor("a", 0, {1}, F32Bytes({7}))
      .AddTensor("b", 0, {1}, F32Bytes({9}));
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), 2u);
  EXPECT_EQ((*file)->alignment_bytes(), 64u);
  EXPECT_EQ((*file)->data_offset_bytes() % 64, 0u);
  EXPECT_EQ((*file)->tensor_infos()[1].offset_bytes, 64u);
  float v;
  std::memcpy(&v, (*file)->Find("b")->data, 4);
  EXPECT_EQ(v, 9.0f);
}

TEST(GgufFileTest, MissingTensorIsNotFoundNamingTensorAndFile) {
  auto file = ParseBytes(GgufTestBuilder().AddTensor("a", 0, {1}, F32Bytes({1})).Build());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::Status s = (*file)->Find("blk.0.attn_q.weight").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'blk.0.attn_q.weight' not found in mem.gguf"));
}

TEST(GgufFileTest, KnownButUndecodedTypeIsListedButFindIsUnimplemented) {
  // Q3_K (ggml type 11): 256-element blocks of 110 bytes.
  auto file =
      ParseBytes(GgufTestBuilder().AddTensor("q3", 11, {256, 2}, std::string(220, '\0')).Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT((*file)->TensorNames(), ElementsAre("q3"));
  absl::Status s = (*file)->Find("q3").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'q3' has ggml type Q3_K (11), which is not decoded "
                                     "here (supported: F32, F16, Q4_0"));
}

TEST(GgufFileTest, FileWithoutTensorsNeedsNoDataSection) {
  auto file = ParseBytes(GgufTestBuilder().AddString("general.name", "x").Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->TensorNames().empty());
}

TEST(GgufFileTest, OpenReadsAFileFromDisk) {
  const std::string path = ::testing::TempDir() + "/gguf_test_open.gguf";
  const std::string bytes =
      GgufTestBuilder().AddTensor("t", 1, {2}, std::string("\x00\x3c\x00\xc0", 4)).Build();
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  auto file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Describe(), path);
  absl::StatusOr<TensorView> t = (*file)->Find("t");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->dtype, DType::kF16);
  float out[2];
  DequantizeRow(t->dtype, t->data, out, 2);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  std::remove(path.c_str());

  absl::Status missing = GgufFile::Open(path).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr(path));
}

}  // namespace
}  // namespace tpserve
