#include "formats/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "formats/safetensors_sharded.h"
#include "formats/safetensors_test_builder.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<SafetensorsFile>> ParseBytes(std::string bytes) {
  return SafetensorsFile::FromSource(
      std::make_unique<MemoryByteSource>("mem.safetensors", std::move(bytes)));
}

std::string U16Bytes(const std::vector<uint16_t>& values) {
  std::string out(values.size() * 2, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

TEST(SafetensorsFileTest, ReadsEveryDecodedDtype) {
  SafetensorsTestBuilder b;
  b.Add("bf16", "BF16", {2, 2}, U16Bytes({0x3F80, 0x4000, 0xBF80, 0x0000}))
      .Add("f16", "F16", {3}, U16Bytes({0x3C00, 0xC000, 0x7BFF}))
      .Add("f8", "F8_E4M3", {1, 2}, std::string("\x38\x7E", 2))
      .Add("f32", "F32", {1}, std::string("\x00\x00\x80\x3F", 4));
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  const SafetensorsFile& f = **file;
  EXPECT_EQ(f.format(), CheckpointFormat::kSafetensors);
  EXPECT_THAT(f.TensorNames(), ElementsAre("bf16", "f16", "f8", "f32"));  // data order

  absl::StatusOr<TensorView> v = f.Find("bf16");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->dtype, DType::kBF16);
  EXPECT_THAT(v->shape, ElementsAre(2, 2));
  EXPECT_EQ(v->nbytes, 8);
  float out[4];
  DequantizeRow(v->dtype, v->data, out, 4);
  EXPECT_THAT(out, ElementsAre(1.0f, 2.0f, -1.0f, 0.0f));

  v = f.Find("f16");
  ASSERT_TRUE(v.ok());
  DequantizeRow(v->dtype, v->data, out, 3);
  EXPECT_THAT(std::vector<float>(out, out + 3), ElementsAre(1.0f, -2.0f, 65504.0f));

  v = f.Find("f8");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->dtype, DType::kF8E4M3);
  DequantizeRow(v->dtype, v->data, out, 2);
  EXPECT_THAT(std::vector<float>(out, out + 2), ElementsAre(1.0f, 448.0f));

  v = f.Find("f32");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->data, f.Find("f8")->data + 2);  // tensors tile the data section
  EXPECT_EQ(v->data - f.Find("bf16")->data, 16);
}

TEST(SafetensorsFileTest, ScalarsAndEmptyTensorsAreAllowed) {
  SafetensorsTestBuilder b;
  b.Add("empty", "F32", {0, 4}, "").Add("scalar", "F16", {}, U16Bytes({0x3C00}));
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<TensorView> scalar = (*file)->Find("scalar");
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements(), 1);
  absl::StatusOr<TensorView> empty = (*file)->Find("empty");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_elements(), 0);
  EXPECT_EQ(empty->rows(), 0);
  EXPECT_EQ(empty->cols(), 4);
  EXPECT_EQ(empty->nbytes, 0);
}

// AWQ/GPTQ store packed 4-bit codes and g_idx as I32: found as raw little-endian words.
TEST(SafetensorsFileTest, I32TensorsAreFoundAsRawWords) {
  SafetensorsTestBuilder b;
  const int32_t words[3] = {0x75316420, -1, 7};
  b.Add("qweight", "I32", {1, 3}, std::string(reinterpret_cast<const char*>(words), 12));
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<TensorView> v = (*file)->Find("qweight");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->dtype, DType::kI32);
  EXPECT_EQ(v->shape, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(v->nbytes, 12);
  EXPECT_EQ(std::memcmp(v->data, words, 12), 0);
  EXPECT_TRUE(IsIntegerDType(v->dtype));
}

TEST(SafetensorsFileTest, UndecodedDtypeIsListedButFindIsUnimplemented) {
  SafetensorsTestBuilder b;
  b.Add("ids", "I64", {2}, std::string(16, '\0'));
  auto file = ParseBytes(b.Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->HasTensor("ids"));
  absl::Status s = (*file)->Find("ids").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'ids' has dtype I64, which is not decoded here"));
  s = (*file)->Find("nope").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'nope' not found in mem.safetensors"));
}

TEST(SafetensorsFileTest, UnpaddedHeaderAndOpenFromDisk) {
  SafetensorsTestBuilder b;
  b.Add("w", "F16", {1}, U16Bytes({0x4000}));
  const std::string bytes = SafetensorsTestBuilder::Assemble(b.HeaderJson(), U16Bytes({0x4000}));
  const std::string path = ::testing::TempDir() + "/st_open.safetensors";
  WriteFile(path, bytes);
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->Describe(), path);
  EXPECT_EQ((*file)->data_offset_bytes(), 8 + b.HeaderJson().size());
  float out;
  DequantizeRow(DType::kF16, (*file)->Find("w")->data, &out, 1);
  EXPECT_EQ(out, 2.0f);
}

// Two shards in memory; `files` maps shard names to their bytes.
ShardedSafetensors::ShardOpener MemoryOpener(const std::map<std::string, std::string>& files) {
  return [files](const std::string& name) -> absl::StatusOr<std::unique_ptr<ByteSource>> {
    auto it = files.find(name);
    if (it == files.end()) return absl::NotFoundError("no such file");
    return std::unique_ptr<ByteSource>(std::make_unique<MemoryByteSource>(name, it->second));
  };
}

TEST(ShardedSafetensorsTest, RoutesEachTensorToItsShard) {
  SafetensorsTestBuilder a, b;
  a.Add("embed", "F16", {2}, U16Bytes({0x3C00, 0x4000}));
  b.Add("lm_head", "BF16", {1}, U16Bytes({0x4040})).Add("norm", "F32", {1}, std::string(4, '\0'));
  const std::string index = R"({"metadata": {"total_size": 12}, "weight_map": {
      "embed": "model-00001-of-00002.safetensors",
      "lm_head": "model-00002-of-00002.safetensors",
      "norm": "model-00002-of-00002.safetensors"}})";
  int opens = 0;
  auto counting = [&, inner = MemoryOpener({{"model-00001-of-00002.safetensors", a.Build()},
                                            {"model-00002-of-00002.safetensors", b.Build()}})](
                      const std::string& name) {
    ++opens;
    return inner(name);
  };
  auto sharded = ShardedSafetensors::FromIndex(index, "idx.json", counting);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(opens, 2);  // each shard once
  EXPECT_THAT((*sharded)->TensorNames(), ElementsAre("embed", "lm_head", "norm"));
  EXPECT_THAT((*sharded)->shard_files(),
              ElementsAre("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"));
  EXPECT_EQ((*sharded)->Describe(), "idx.json (2 shards)");
  absl::StatusOr<TensorView> head = (*sharded)->Find("lm_head");
  ASSERT_TRUE(head.ok()) << head.status();
  float out;
  DequantizeRow(head->dtype, head->data, &out, 1);
  EXPECT_EQ(out, 3.0f);
  EXPECT_EQ((*sharded)->Find("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ShardedSafetensorsTest, OpensShardsBesideTheIndexOnDisk) {
  const std::string dir = ::testing::TempDir() + "/sharded_ckpt";
  std::filesystem::create_directories(dir);
  SafetensorsTestBuilder a, b;
  a.Add("x", "F32", {1}, std::string("\x00\x00\x40\x40", 4));
  b.Add("y", "F32", {1}, std::string("\x00\x00\x80\x40", 4));
  WriteFile(dir + "/a.safetensors", a.Build());
  WriteFile(dir + "/b.safetensors", b.Build());
  WriteFile(dir + "/model.safetensors.index.json",
            R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})");
  auto sharded = ShardedSafetensors::Open(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  float y;
  std::memcpy(&y, (*sharded)->Find("y")->data, 4);
  EXPECT_EQ(y, 4.0f);
}

}  // namespace
}  // namespace tpserve
