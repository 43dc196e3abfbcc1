#include "checkpoint/stored_matrix.h"

#include <cstring>
#include <random>

#include "checkpoint/testing/in_memory_weight_source.h"
#include "gtest/gtest.h"
#include "kernels/cpu/parity_test_util.h"
#include "kernels/quantize.h"

namespace tpserve {
namespace {

using parity_test::Random;

std::vector<float> Rows(const WeightMatrix& w) {
  std::vector<float> out(w.rows * w.cols);
  for (int64_t r = 0; r < w.rows; ++r) DequantizeWeightRow(w, r, out.data() + r * w.cols);
  return out;
}

class StoredMatrixTest : public ::testing::Test {
 protected:
  StoredMatrixTest() : src_(CheckpointFormat::kGguf), w_(Random(4 * 128, 3, 0.1f)) {
    src_.AddFloat("blk.0.ffn_down.weight", {4, 128}, w_, DType::kQ4_1);
    src_.AddFloat("blk.0.ffn_up.weight", {4, 128}, w_, DType::kF32);
  }
  StoredMatrix Open(const std::string& module) {
    absl::StatusOr<StoredMatrix> m =
        StoredMatrix::Open(src_, QuantScheme{}, module, 4, 128, &used_);
    EXPECT_TRUE(m.ok()) << m.status();
    return *m;
  }
  InMemoryWeightSource src_;
  std::vector<float> w_;
  TensorUse used_;
};

TEST_F(StoredMatrixTest, WholeRowsAreAViewAndColumnSlicesCopyWholeBlocks) {
  const StoredMatrix m = Open("blk.0.ffn_down");
  EXPECT_EQ(m.format(), TensorFormat::Of(FormatKind::kQ4_1));
  const TensorView t = *src_.Find("blk.0.ffn_down.weight");
  absl::StatusOr<HostMatrix> rows = m.Read({1, 2, 0, 128});
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(rows->is_view());
  EXPECT_EQ(rows->matrix.data, t.data + 80);  // row 1 of 80-byte rows, not a copy
  absl::StatusOr<HostMatrix> cols = m.Read({0, 4, 64, 64});
  ASSERT_TRUE(cols.ok()) << cols.status();
  EXPECT_FALSE(cols->is_view());
  EXPECT_EQ(cols->matrix.row_bytes, 40);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(std::memcmp(cols->values.data() + 40 * r, t.data + 80 * r + 40, 40), 0) << r;
  }
  absl::StatusOr<HostMatrix> bad = m.Read({0, 4, 48, 48});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find(
                "blk.0.ffn_down.weight: column slice [48, 96) is not aligned to q4_1 blocks of 32"),
            std::string::npos)
      << bad.status();
  EXPECT_EQ(m.Read({3, 2, 0, 128}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(used_.Contains("blk.0.ffn_down.weight"));
  EXPECT_FALSE(used_.Contains("blk.0.ffn_up.weight"));
}

TEST_F(StoredMatrixTest, LeftoverTensorsAreRefusedByName) {
  Open("blk.0.ffn_down");
  absl::Status s = used_.CheckAllUsed(src_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor blk.0.ffn_up.weight in in-memory checkpoint is not used"),
            std::string::npos)
      << s;
  Open("blk.0.ffn_up");
  EXPECT_TRUE(used_.CheckAllUsed(src_).ok());
}

// A multimodal checkpoint's other towers are excused by prefix, and only they: a tensor of the
// text model that nothing read is still refused.
TEST_F(StoredMatrixTest, UnservedPrefixesExcuseOnlyTheirTensors) {
  src_.AddFloat("vision_model.patch_embedding.linear.weight", {4, 128}, w_, DType::kF32);
  src_.AddFloat("vision_modelx.weight", {4, 128}, w_, DType::kF32);
  Open("blk.0.ffn_down");
  Open("blk.0.ffn_up");
  used_.ExcusePrefix("vision_model.");
  absl::Status s = used_.CheckAllUsed(src_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor vision_modelx.weight in in-memory checkpoint is not used"),
            std::string::npos)
      << s;
  src_.Remove("vision_modelx.weight");
  EXPECT_TRUE(used_.CheckAllUsed(src_).ok());
}

TEST_F(StoredMatrixTest, ShapeMismatchNamesTensorAndBothShapes) {
  absl::StatusOr<StoredMatrix> m =
      StoredMatrix::Open(src_, QuantScheme{}, "blk.0.ffn_up", 4, 64, &used_);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("tensor blk.0.ffn_up.weight in in-memory checkpoint: shape "
                                      "[4, 128], expected [4, 64]"),
            std::string::npos)
      << m.status();
}

TEST_F(StoredMatrixTest, ConvertRequantizesTheSliceAndKeepsEqualFormats) {
  const StoredMatrix m = Open("blk.0.ffn_up");
  HostMatrix slice = *m.Read({0, 4, 0, 128});
  const void* data = slice.matrix.data;
  absl::StatusOr<HostMatrix> same =
      ConvertMatrix(std::move(slice), TensorFormat::Of(FormatKind::kF32), "up");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->matrix.data, data);  // untouched view
  for (const TensorFormat& f : {TensorFormat::Of(FormatKind::kFp8PerChannel), TensorFormat::Int4(64),
                                TensorFormat::Of(FormatKind::kBF16)}) {
    absl::StatusOr<HostMatrix> q = ConvertMatrix(*m.Read({0, 4, 0, 128}), f, "up");
    ASSERT_TRUE(q.ok()) << q.status();
    EXPECT_EQ(q->matrix.format, f);
    const std::vector<float> got = Rows(q->matrix);
    double err = 0, amax = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err = std::max(err, std::fabs(double{got[i]} - w_[i]));
      amax = std::max(amax, std::fabs(double{w_[i]}));
    }
    EXPECT_LT(err, amax / 14) << TensorFormatName(f);  // within half a step of the coarsest grid
  }
  absl::StatusOr<HostMatrix> bad = ConvertMatrix(*m.Read({0, 4, 0, 128}), TensorFormat::Int4(256),
                                                 "blk.0.ffn_up");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("blk.0.ffn_up: input dim 128 is not a multiple of the "
                                        "int4-g256 block of 256 values"),
            std::string::npos)
      << bad.status();
}

// A GGUF stacks a layer's experts in one tensor [experts, rows, cols]: expert e is its rows
// e * rows .. (e + 1) * rows, read in place; the stacked shape is checked before any offset.
TEST(StoredMatrixExpertTest, StackedExpertsAreViewsOfTheirRows) {
  ModelSpec spec;
  spec.hidden_size = 64;
  spec.moe.routing = {.num_experts = 4, .top_k = 2};
  spec.moe.expert_intermediate_size = 8;
  InMemoryWeightSource src(CheckpointFormat::kGguf);
  const std::vector<float> all = Random(4 * 8 * 64, 5, 1.0f);
  src.AddFloat("blk.1.ffn_up_exps.weight", {4, 8, 64}, all, DType::kF32);
  TensorUse used;
  absl::StatusOr<StoredMatrix> m =
      StoredMatrix::OpenRole(src, QuantScheme{}, spec, TensorRole::kExpertUp, 1, 3, &used);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->module(), "blk.1.ffn_up_exps (expert 3)");
  absl::StatusOr<HostMatrix> h = m->Read({0, 8, 0, 64});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->is_view());
  EXPECT_EQ(Rows(h->matrix), std::vector<float>(all.begin() + 3 * 8 * 64, all.end()));
  EXPECT_TRUE(used.Contains("blk.1.ffn_up_exps.weight"));

  spec.moe.routing.num_experts = 5;  // the file holds 4
  absl::StatusOr<StoredMatrix> wrong =
      StoredMatrix::OpenRole(src, QuantScheme{}, spec, TensorRole::kExpertUp, 1, 0, &used);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("tensor blk.1.ffn_up_exps.weight in "),
            std::string::npos);
  EXPECT_NE(wrong.status().message().find(
                ": shape [4, 8, 64], expected [5, 8, 64] (experts, rows, cols) from the model "
                "config"),
            std::string::npos)
      << wrong.status();
  absl::StatusOr<StoredMatrix> outside =
      StoredMatrix::OpenRole(src, QuantScheme{}, spec, TensorRole::kExpertUp, 1, 7, &used);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().message(), "expert 7 of blk.1.ffn_up_exps is outside [0, 5)");
}

// Llama 4's checkpoints hold a layer's experts in two tensors stored [in, out]: gate_up_proj
// [experts, hidden, 2 * ff] (gate's columns, then up's) and down_proj [experts, ff, hidden].
// Expert e's gate, up and down come out [out, in], whole or a rank's rows or columns. The values
// are small integers, exact in BF16, so the copy is checked for both dtypes bit for bit.
TEST(StoredMatrixExpertTest, FusedTransposedExpertsAreReadPerExpertAndSlice) {
  constexpr int64_t kE = 3, kH = 8, kF = 4;
  ModelSpec spec;
  spec.hidden_size = kH;
  spec.moe.routing = {.num_experts = kE, .top_k = 1};
  spec.moe.expert_intermediate_size = kF;
  spec.moe.hf_names = MoeSpec::HfNames::kFusedFeedForward;
  std::vector<float> gate_up(kE * kH * 2 * kF), down(kE * kF * kH);
  for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = static_cast<float>(i % 251);
  for (size_t i = 0; i < down.size(); ++i) down[i] = static_cast<float>((7 * i) % 251);
  const std::string fused = "model.layers.1.feed_forward.experts.";
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    InMemoryWeightSource src(CheckpointFormat::kSafetensors);
    src.AddFloat(fused + "gate_up_proj", {kE, kH, 2 * kF}, gate_up, dtype);
    src.AddFloat(fused + "down_proj", {kE, kF, kH}, down, dtype);
    TensorUse used;
    const auto read = [&](TensorRole role, int64_t expert, const TensorSlice& slice) {
      absl::StatusOr<StoredMatrix> m =
          StoredMatrix::OpenRole(src, QuantScheme{}, spec, role, 1, expert, &used);
      EXPECT_TRUE(m.ok()) << m.status();
      if (!m.ok()) return std::vector<float>();
      absl::StatusOr<HostMatrix> h = m->Read(slice);
      EXPECT_TRUE(h.ok()) << h.status();
      return h.ok() ? Rows(h->matrix) : std::vector<float>();
    };
    // Gate of expert 2, rows [2, 4) (rank 1 of 2): row r, column c is gate_up[2][c][r].
    std::vector<float> want;
    for (int64_t r = 2; r < 4; ++r) {
      for (int64_t c = 0; c < kH; ++c) want.push_back(gate_up[(2 * kH + c) * 2 * kF + r]);
    }
    EXPECT_EQ(read(TensorRole::kExpertGate, 2, {2, 2, 0, kH}), want);
    want.clear();  // up of expert 0, whole: gate_up[0][c][kF + r]
    for (int64_t r = 0; r < kF; ++r) {
      for (int64_t c = 0; c < kH; ++c) want.push_back(gate_up[c * 2 * kF + kF + r]);
    }
    EXPECT_EQ(read(TensorRole::kExpertUp, 0, {0, kF, 0, kH}), want);
    want.clear();  // down of expert 1, columns [0, 2): row h, column j is down[1][j][h]
    for (int64_t h = 0; h < kH; ++h) {
      for (int64_t j = 0; j < 2; ++j) want.push_back(down[(kF + j) * kH + h]);
    }
    EXPECT_EQ(read(TensorRole::kExpertDown, 1, {0, kH, 0, 2}), want);
    EXPECT_TRUE(used.Contains(fused + "gate_up_proj"));
    EXPECT_TRUE(used.Contains(fused + "down_proj"));
  }
  InMemoryWeightSource src(CheckpointFormat::kSafetensors);
  src.AddFloat(fused + "gate_up_proj", {kE, kH, kF}, std::vector<float>(kE * kH * kF), DType::kF32);
  TensorUse used;
  absl::StatusOr<StoredMatrix> wrong =
      StoredMatrix::OpenRole(src, QuantScheme{}, spec, TensorRole::kExpertUp, 1, 0, &used);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find(
                ": shape [3, 8, 4], expected [3, 8, 8] (fused experts [experts, hidden, 2 * ff])"),
            std::string::npos)
      << wrong.status();
}

}  // namespace
}  // namespace tpserve
