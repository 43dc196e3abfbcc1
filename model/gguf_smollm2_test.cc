// The real SmolLM2-135M checkpoint, checked against what the gguf Python package reads from it
// (tests/golden/formats/make_smollm2_golden.py). Needs the model: scripts/setup.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "formats/ggml_type.h"
#include "formats/gguf.h"
#include "formats/test_files.h"
#include "model/bundled_model.h"

namespace tpserve {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

class SmolLM2GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> path = BundledModelPath();
    ASSERT_TRUE(path.ok()) << path.status();
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(*path);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
    absl::StatusOr<std::string> text = ReadFileBytes(GoldenPath("smollm2_expect.json"));
    ASSERT_TRUE(text.ok()) << text.status();
    expect_ = nlohmann::json::parse(*text);
  }

  std::unique_ptr<GgufFile> file_;
  nlohmann::json expect_;
};

TEST_F(SmolLM2GgufTest, HeadlineTensors) {
  EXPECT_EQ(file_->TensorNames().size(), 272u);
  absl::StatusOr<TensorView> embd = file_->Find("token_embd.weight");
  ASSERT_TRUE(embd.ok()) << embd.status();
  EXPECT_EQ(embd->dtype, DType::kQ8_0);
  EXPECT_THAT(embd->shape, ElementsAre(49152, 576));
  EXPECT_EQ(embd->nbytes, 49152 * 612);
  absl::StatusOr<TensorView> q = file_->Find("blk.0.attn_q.weight");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->dtype, DType::kQ4_1);
  EXPECT_THAT(q->shape, ElementsAre(576, 576));
  EXPECT_EQ(file_->Find("output.weight").status().code(), absl::StatusCode::kNotFound);  // tied
}

TEST_F(SmolLM2GgufTest, EveryTensorMatchesTheGgufPackage) {
  ASSERT_EQ(expect_["tensor_count"].get<size_t>(), file_->tensor_infos().size());
  const auto& infos = file_->tensor_infos();
  for (size_t i = 0; i < infos.size(); ++i) {
    const nlohmann::json& want = expect_["tensors"][i];
    SCOPED_TRACE(want["name"].get<std::string>());
    EXPECT_EQ(infos[i].name, want["name"].get<std::string>());
    EXPECT_EQ(FindGgmlType(infos[i].ggml_type)->name, want["type"].get<std::string>());
    absl::StatusOr<TensorView> view = file_->Find(infos[i].name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_EQ(view->shape, want["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(file_->data_offset_bytes() + infos[i].offset_bytes, want["offset"].get<uint64_t>());
  }
}

TEST_F(SmolLM2GgufTest, MetadataMatchesTheGgufPackage) {
  for (const auto& [key, value] : expect_["metadata"].items()) {
    SCOPED_TRACE(key);
    if (value.is_string()) {
      EXPECT_EQ(*file_->GetString(key), value.get<std::string>());
    } else if (value.is_boolean()) {
      EXPECT_EQ(*file_->GetBool(key), value.get<bool>());
    } else if (value.is_number_integer()) {
      EXPECT_EQ(*file_->GetI64(key), value.get<int64_t>());
    } else {
      EXPECT_EQ(*file_->GetF32(key), value.get<float>());
    }
  }
  const nlohmann::json& tokens = expect_["arrays"]["tokenizer.ggml.tokens"];
  absl::StatusOr<std::vector<std::string>> got_tokens =
      file_->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(got_tokens.ok()) << got_tokens.status();
  ASSERT_EQ(got_tokens->size(), tokens["length"].get<size_t>());
  EXPECT_THAT(std::vector<std::string>(got_tokens->begin(), got_tokens->begin() + 3),
              ElementsAreArray(tokens["first"].get<std::vector<std::string>>()));
  const nlohmann::json& types = expect_["arrays"]["tokenizer.ggml.token_type"];
  absl::StatusOr<std::vector<int32_t>> got_types = file_->GetI32Array("tokenizer.ggml.token_type");
  ASSERT_TRUE(got_types.ok()) << got_types.status();
  ASSERT_EQ(got_types->size(), types["length"].get<size_t>());
  EXPECT_THAT(std::vector<int32_t>(got_types->begin(), got_types->begin() + 3),
              ElementsAreArray(types["first"].get<std::vector<int32_t>>()));
  EXPECT_EQ(*file_->GetArraySize("tokenizer.ggml.merges"),
            expect_["arrays"]["tokenizer.ggml.merges"]["length"].get<uint64_t>());
}

TEST_F(SmolLM2GgufTest, RowsDequantizeBitIdenticalToTheGgufPackage) {
  absl::StatusOr<std::vector<float>> want = ReadF32File(GoldenPath("smollm2_rows.f32"));
  ASSERT_TRUE(want.ok()) << want.status();
  size_t cursor = 0;
  for (const nlohmann::json& entry : expect_["rows"]) {
    const std::string name = entry["tensor"].get<std::string>();
    SCOPED_TRACE(name);
    absl::StatusOr<TensorView> view = file_->Find(name);
    ASSERT_TRUE(view.ok()) << view.status();
    const int64_t cols = view->cols();
    const int64_t row_bytes = *RowBytes(view->dtype, cols);
    for (int64_t row : entry["rows"].get<std::vector<int64_t>>()) {
      ASSERT_LE(cursor + cols, want->size());
      std::vector<float> got(cols);
      DequantizeRow(view->dtype, view->data + row * row_bytes, got.data(), cols);
      EXPECT_EQ(std::memcmp(got.data(), want->data() + cursor, cols * sizeof(float)), 0)
          << "row " << row;
      cursor += cols;
    }
  }
  EXPECT_EQ(cursor, want->size());
}

}  // namespace
}  // namespace tpserve
