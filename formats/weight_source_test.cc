#include "formats/weight_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "formats/gguf_test_builder.h"
#include "formats/safetensors_test_builder.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
}

// A fresh, empty directory per test.
fs::path TestDir(const std::string& leaf) {
  fs::path dir = fs::path(::testing::TempDir()) / leaf;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string SmallGguf() {
  return GgufTestBuilder().AddTensor("token_embd.weight", 0, {2, 3}, std::string(24, '\0')).Build();
}

std::string SmallSafetensors(const std::string& name) {
  SafetensorsTestBuilder b;
  b.Add(name, "BF16", {2, 2}, std::string(8, '\0'));
  return b.Build();
}

TEST(TensorViewTest, RowsColsAndElements) {
  TensorView v;
  v.shape = {4, 3, 5};
  EXPECT_EQ(v.rows(), 12);
  EXPECT_EQ(v.cols(), 5);
  EXPECT_EQ(v.num_elements(), 60);
  v.shape = {7};
  EXPECT_EQ(v.rows(), 1);
  EXPECT_EQ(v.cols(), 7);
  v.shape = {};
  EXPECT_EQ(v.rows(), 1);
  EXPECT_EQ(v.cols(), 1);
  EXPECT_EQ(v.num_elements(), 1);
}

TEST(OpenWeightSourceTest, PicksGgufByMagicWhateverTheName) {
  const fs::path dir = TestDir("ows_gguf");
  WriteFile(dir / "weights.bin", SmallGguf());
  auto src = OpenWeightSource((dir / "weights.bin").string());
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_EQ((*src)->format(), CheckpointFormat::kGguf);
  EXPECT_THAT((*src)->Find("token_embd.weight")->shape, ElementsAre(3, 2));
}

TEST(OpenWeightSourceTest, PicksSafetensorsByNameOrHeader) {
  const fs::path dir = TestDir("ows_st");
  WriteFile(dir / "a.safetensors", SmallSafetensors("a"));
  WriteFile(dir / "b.weights", SmallSafetensors("b"));
  auto a = OpenWeightSource((dir / "a.safetensors").string());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->format(), CheckpointFormat::kSafetensors);
  auto b = OpenWeightSource((dir / "b.weights").string());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT((*b)->TensorNames(), ElementsAre("b"));
}

TEST(OpenWeightSourceTest, DirectoryPrefersIndexThenSingleFileThenGguf) {
  const fs::path dir = TestDir("ows_dir");
  WriteFile(dir / "only.gguf", SmallGguf());
  auto gguf = OpenWeightSource(dir.string());
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ((*gguf)->format(), CheckpointFormat::kGguf);

  WriteFile(dir / "model.safetensors", SmallSafetensors("single"));
  auto single = OpenWeightSource(dir.string());
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_THAT((*single)->TensorNames(), ElementsAre("single"));

  WriteFile(dir / "s1.safetensors", SmallSafetensors("sharded"));
  WriteFile(dir / "model.safetensors.index.json",
            R"({"weight_map": {"sharded": "s1.safetensors"}})");
  auto sharded = OpenWeightSource(dir.string());
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_THAT((*sharded)->TensorNames(), ElementsAre("sharded"));
  EXPECT_THAT((*sharded)->Describe(), HasSubstr("(1 shards)"));
  auto by_index = OpenWeightSource((dir / "model.safetensors.index.json").string());
  ASSERT_TRUE(by_index.ok()) << by_index.status();
}

TEST(OpenWeightSourceTest, AmbiguousOrEmptyDirectoriesAreRefused) {
  const fs::path dir = TestDir("ows_bad_dir");
  absl::Status s = OpenWeightSource(dir.string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("no model.safetensors.index.json, model.safetensors or .gguf"));
  WriteFile(dir / "a.gguf", SmallGguf());
  WriteFile(dir / "b.gguf", SmallGguf());
  s = OpenWeightSource(dir.string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("2 .gguf files in"));
}

TEST(OpenWeightSourceTest, UnknownContentAndMissingPathsAreRefused) {
  const fs::path dir = TestDir("ows_unknown");
  WriteFile(dir / "notes.txt", "hello, this is not a checkpoint");
  absl::Status s = OpenWeightSource((dir / "notes.txt").string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("cannot tell the checkpoint format of"));
  s = OpenWeightSource((dir / "missing.gguf").string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tpserve
