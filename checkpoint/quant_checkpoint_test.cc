// Every quantized linear of every fixture in tests/golden/quant (written from the public
// AWQ, GPTQ, fbgemm and compressed-tensors layouts by tools/checkpoints/, not by this code),
// read through StoredMatrix and dequantized, equals the fixture's expect.safetensors bit for
// bit: whole, and cut into tensor-parallel halves by output rows and by input columns.
#include <bit>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/quant_scheme.h"
#include "checkpoint/stored_formats.h"
#include "checkpoint/stored_matrix.h"
#include "checkpoint/testing/in_memory_weight_source.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "model/config.h"

namespace tpserve {
namespace {

std::string FixtureDir(const std::string& name) { return "tests/golden/quant/" + name; }

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The matrix as f32 [rows][cols] in input order (input_perm applied back).
std::vector<float> Dequantize(const WeightMatrix& w) {
  std::vector<float> out(w.rows * w.cols), row(w.cols);
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeWeightRow(w, r, row.data());
    for (int64_t j = 0; j < w.cols; ++j) {
      out[r * w.cols + (w.input_perm ? w.input_perm[j] : j)] = row[j];
    }
  }
  return out;
}

std::vector<float> Floats(const TensorView& t) {
  std::vector<float> v(t.nbytes / 4);
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

// Index of the first element whose bits differ (signed zeros and NaNs count), or -1.
int64_t FirstBitDifference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) return i;
  }
  return -1;
}

// Reads `stored` in halves along rows (column-parallel) or columns (row-parallel), as TP 2
// ranks do, and puts the dequantized halves back together. nullopt with `error` set when a
// half is refused.
std::optional<std::vector<float>> ReadHalves(const StoredMatrix& stored, bool by_rows,
                                             absl::Status* error) {
  const int64_t rows = stored.rows(), cols = stored.cols();
  std::vector<float> full(rows * cols);
  for (int rank = 0; rank < 2; ++rank) {
    const TensorSlice s = by_rows ? TensorSlice{rank * rows / 2, rows / 2, 0, cols}
                                  : TensorSlice{0, rows, rank * cols / 2, cols / 2};
    absl::StatusOr<HostMatrix> half = stored.Read(s);
    if (!half.ok()) {
      *error = half.status();
      return std::nullopt;
    }
    const std::vector<float> part = Dequantize(half->matrix);
    for (int64_t r = 0; r < s.num_rows; ++r) {
      std::memcpy(&full[(s.row_begin + r) * cols + s.col_begin], &part[r * s.num_cols],
                  s.num_cols * sizeof(float));
    }
  }
  return full;
}

struct Fixture {
  const char* name;
  TensorFormat linear;  // the format of every quantized linear
  TensorFormat plain;   // embedding, lm_head, norms and unquantized linears
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }

const Fixture kFixtures[] = {
    {"awq_g32", TensorFormat::Int4(32), TensorFormat::Of(FormatKind::kF16)},
    {"awq_g64", TensorFormat::Int4(64), TensorFormat::Of(FormatKind::kF16)},
    {"gptq_g32_sym", TensorFormat::Int4(32), TensorFormat::Of(FormatKind::kF16)},
    {"gptq_g64_asym", TensorFormat::Int4(64), TensorFormat::Of(FormatKind::kF16)},
    {"gptq_g32_asym_descact", TensorFormat::Int4(32, /*act_order=*/true),
     TensorFormat::Of(FormatKind::kF16)},
    {"fp8_fbgemm", TensorFormat::Of(FormatKind::kFp8PerChannel),
     TensorFormat::Of(FormatKind::kBF16)},
    {"fp8_ct_channel", TensorFormat::Of(FormatKind::kFp8PerChannel),
     TensorFormat::Of(FormatKind::kBF16)},
    {"fp8_ct_block", TensorFormat::Of(FormatKind::kFp8Block128),
     TensorFormat::Of(FormatKind::kBF16)},
};

class QuantCheckpointTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    const std::string dir = FixtureDir(GetParam().name);
    const std::string config_json = ReadText(dir + "/config.json");
    absl::StatusOr<QuantScheme> scheme = ParseQuantizationConfig(config_json);
    ASSERT_TRUE(scheme.ok()) << scheme.status();
    scheme_ = *scheme;
    absl::StatusOr<ModelSpec> config = ModelSpecFromHfJson(config_json);
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    auto source = SafetensorsFile::Open(dir + "/model.safetensors");
    ASSERT_TRUE(source.ok()) << source.status();
    source_ = std::move(*source);
    auto expect = SafetensorsFile::Open(dir + "/expect.safetensors");
    ASSERT_TRUE(expect.ok()) << expect.status();
    expect_ = std::move(*expect);
    ASSERT_FALSE(expect_->TensorNames().empty());
  }

  // Opens the module of expect tensor `name` ("<module>.weight").
  StoredMatrix Open(const std::string& name) {
    const TensorView want = *expect_->Find(name);
    TensorUse used;
    absl::StatusOr<StoredMatrix> m = StoredMatrix::Open(
        *source_, scheme_, name.substr(0, name.size() - 7), want.shape[0], want.shape[1], &used);
    EXPECT_TRUE(m.ok()) << m.status();
    return *std::move(m);
  }

  // Whether halving the columns keeps every act-order group of `module` on one side, from the
  // stored g_idx directly.
  bool GroupsStayWhole(const std::string& module, int64_t cols) {
    absl::StatusOr<TensorView> g_idx = source_->Find(module + ".g_idx");
    if (!g_idx.ok()) return true;
    std::vector<int32_t> g(cols);
    std::memcpy(g.data(), g_idx->data, cols * 4);
    for (int64_t c = 0; c < cols; ++c) {
      for (int64_t d = 0; d < cols; ++d) {
        if (g[c] == g[d] && (c < cols / 2) != (d < cols / 2)) return false;
      }
    }
    return true;
  }

  QuantScheme scheme_;
  ModelSpec config_;
  std::unique_ptr<SafetensorsFile> source_;
  std::unique_ptr<SafetensorsFile> expect_;
};

TEST_P(QuantCheckpointTest, WholeMatricesDequantizeBitForBit) {
  int permuted = 0;
  for (const std::string& name : expect_->TensorNames()) {
    SCOPED_TRACE(name);
    const StoredMatrix stored = Open(name);
    EXPECT_EQ(stored.format(), GetParam().linear) << TensorFormatName(stored.format());
    absl::StatusOr<HostMatrix> whole = stored.Read({0, stored.rows(), 0, stored.cols()});
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(whole->matrix.format, GetParam().linear);
    permuted += whole->matrix.input_perm != nullptr;
    EXPECT_EQ(whole->matrix.activation_scale_ub,
              scheme_.method == QuantMethod::kFbgemmFp8 ? 1200.0f : 0.0f);
    EXPECT_EQ(FirstBitDifference(Dequantize(whole->matrix), Floats(*expect_->Find(name))), -1);
  }
  // Only the act-order fixture stores a permuted g_idx; the others read without input_perm.
  EXPECT_EQ(permuted > 0, std::string(GetParam().name) == "gptq_g32_asym_descact");
}

TEST_P(QuantCheckpointTest, TensorParallelHalvesDequantizeBitForBit) {
  for (const std::string& name : expect_->TensorNames()) {
    SCOPED_TRACE(name);
    const StoredMatrix stored = Open(name);
    const TensorFormat f = stored.format();
    const std::string module = name.substr(0, name.size() - 7);
    for (bool by_rows : {true, false}) {
      SCOPED_TRACE(by_rows ? "column-parallel (rows halved)" : "row-parallel (cols halved)");
      const int64_t half = (by_rows ? stored.rows() : stored.cols()) / 2;
      const bool aligned =
          by_rows ? half % OutputBlockRows(f) == 0
                  : half % InputBlockValues(f) == 0 && GroupsStayWhole(module, stored.cols());
      absl::Status error;
      const std::optional<std::vector<float>> full = ReadHalves(stored, by_rows, &error);
      if (!aligned) {
        // A half would cut an fp8 tile or an int4 group: refused, naming the tensor.
        EXPECT_FALSE(full.has_value());
        EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument) << error;
        EXPECT_NE(error.message().find(module), std::string::npos) << error;
        if (!by_rows && half % InputBlockValues(f) == 0) {  // split by act-order alone
          EXPECT_NE(error.message().find("of act-order group"), std::string::npos) << error;
          EXPECT_NE(error.message().find("(tp 2)"), std::string::npos) << error;
        }
        continue;
      }
      ASSERT_TRUE(full.has_value()) << error;
      EXPECT_EQ(FirstBitDifference(*full, Floats(*expect_->Find(name))), -1);
    }
  }
}

TEST_P(QuantCheckpointTest, StoredFormatsPerRole) {
  absl::StatusOr<WeightFormats> formats = StoredWeightFormats(*source_, scheme_, config_);
  ASSERT_TRUE(formats.ok()) << formats.status();
  for (TensorRole role : kAllTensorRoles) {
    if (!HasRole(config_, role)) continue;  // Llama: no biases, QK-norms or sandwich norms
    const std::string module = ModuleName(config_, CheckpointFormat::kSafetensors, role, 0);
    const bool quantized = expect_->HasTensor(module + ".weight");
    EXPECT_EQ((*formats)[role], quantized ? GetParam().linear : GetParam().plain)
        << TensorRoleName(role) << ": " << TensorFormatName((*formats)[role]);
  }
}

// The act-order fixture's groups are scattered over all input columns, so its row-parallel
// halves are refused above. Moving whole columns (codes, g_idx and the expected values
// together) so that groups 0 and 1 interleave in the first half and 2 and 3 in the second
// keeps the math and gives a permuted g_idx that TP 2 can load.
TEST(QuantActOrderTest, HalvesThatKeepGroupsWholeDequantizeBitForBit) {
  const std::string dir = FixtureDir("gptq_g32_asym_descact");
  const std::string down = "model.layers.0.mlp.down_proj";
  const int64_t rows = 64, cols = 128, group = 32;
  absl::StatusOr<QuantScheme> scheme = ParseQuantizationConfig(ReadText(dir + "/config.json"));
  ASSERT_TRUE(scheme.ok()) << scheme.status();
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  auto expect = SafetensorsFile::Open(dir + "/expect.safetensors");
  ASSERT_TRUE(file.ok() && expect.ok());
  const TensorView qweight = *(*file)->Find(down + ".qweight");  // [cols / 8, rows]
  const TensorView g_idx_view = *(*file)->Find(down + ".g_idx");
  std::vector<int32_t> g_idx(cols);
  std::memcpy(g_idx.data(), g_idx_view.data, cols * 4);
  const std::vector<float> want = Floats(*(*expect)->Find(down + ".weight"));

  std::vector<std::vector<int64_t>> members(cols / group);
  for (int64_t c = 0; c < cols; ++c) members[g_idx[c]].push_back(c);
  std::vector<int64_t> from(cols);  // new column c takes old column from[c]
  for (int64_t i = 0; i < group; ++i) {
    from[2 * i] = members[0][i];
    from[2 * i + 1] = members[1][i];
    from[cols / 2 + 2 * i] = members[2][i];
    from[cols / 2 + 2 * i + 1] = members[3][i];
  }
  std::vector<uint32_t> words(cols / 8 * rows, 0);
  std::vector<int32_t> new_g_idx(cols);
  std::vector<float> new_want(rows * cols);
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t k = from[c];
    new_g_idx[c] = g_idx[k];
    for (int64_t o = 0; o < rows; ++o) {
      uint32_t word;
      std::memcpy(&word, qweight.data + 4 * ((k / 8) * rows + o), 4);
      words[(c / 8) * rows + o] |= ((word >> (4 * (k % 8))) & 0xF) << (4 * (c % 8));
      new_want[o * cols + c] = want[o * cols + k];
    }
  }
  InMemoryWeightSource source(CheckpointFormat::kSafetensors);
  auto raw = [](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    return std::vector<uint8_t>(b, b + n);
  };
  source.AddRaw(down + ".qweight", qweight.shape, DType::kI32, raw(words.data(), words.size() * 4));
  source.AddRaw(down + ".g_idx", {cols}, DType::kI32, raw(new_g_idx.data(), cols * 4));
  for (const char* part : {".qzeros", ".scales"}) {
    const TensorView t = *(*file)->Find(down + part);
    source.AddRaw(down + part, t.shape, t.dtype, raw(t.data, t.nbytes));
  }
  TensorUse used;
  absl::StatusOr<StoredMatrix> stored =
      StoredMatrix::Open(source, *scheme, down, rows, cols, &used);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(used.CheckAllUsed(source).ok());
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<HostMatrix> half = stored->Read({0, rows, rank * cols / 2, cols / 2});
    ASSERT_TRUE(half.ok()) << half.status();
    EXPECT_NE(half->matrix.input_perm, nullptr) << "interleaved groups need a permutation";
  }
  absl::Status error;
  const std::optional<std::vector<float>> full = ReadHalves(*stored, /*by_rows=*/false, &error);
  ASSERT_TRUE(full.has_value()) << error;
  EXPECT_EQ(FirstBitDifference(*full, new_want), -1);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantCheckpointTest, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tpserve
