// Corrupt quantized checkpoints: a valid fixture of tests/golden/quant copied into memory with
// one defect each (a scale count that does not match, a packed size that does not divide, a
// wrong dtype, a bad g_idx, a missing tensor, a slice that cuts a group). Each is refused
// with its code and a message naming the tensor, the value and the bound; none crashes.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/quant_scheme.h"
#include "checkpoint/stored_matrix.h"
#include "checkpoint/testing/in_memory_weight_source.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"

namespace tpserve {
namespace {

const std::string kQ = "model.layers.0.self_attn.q_proj";
const std::string kGate = "model.layers.0.mlp.gate_proj";
const std::string kDown = "model.layers.0.mlp.down_proj";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fixture's checkpoint, tensor for tensor in memory, and its scheme.
struct Checkpoint {
  std::unique_ptr<InMemoryWeightSource> source;
  QuantScheme scheme;

  std::vector<uint8_t> Bytes(const std::string& name) const {
    const TensorView t = *source->Find(name);
    return std::vector<uint8_t>(t.data, t.data + t.nbytes);
  }
  // Re-adds `name` with another shape and/or dtype, its bytes unchanged.
  void Retype(const std::string& name, std::vector<int64_t> shape, DType dtype) {
    source->AddRaw(name, std::move(shape), dtype, Bytes(name));
  }
};

Checkpoint Load(const std::string& fixture) {
  const std::string dir = "tests/golden/quant/" + fixture;
  Checkpoint c;
  c.source = std::make_unique<InMemoryWeightSource>(CheckpointFormat::kSafetensors);
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  for (const std::string& name : (*file)->TensorNames()) {
    const TensorView t = *(*file)->Find(name);
    c.source->AddRaw(name, t.shape, t.dtype, std::vector<uint8_t>(t.data, t.data + t.nbytes));
  }
  c.scheme = *ParseQuantizationConfig(ReadText(dir + "/config.json"));
  return c;
}

void SetWord(Checkpoint& c, const std::string& name, int64_t index, int32_t value) {
  std::vector<uint8_t> bytes = c.Bytes(name);
  std::memcpy(bytes.data() + 4 * index, &value, 4);
  c.source->AddRaw(name, c.source->Find(name)->shape, DType::kI32, std::move(bytes));
}

struct CorruptCase {
  const char* name;
  const char* fixture;
  std::function<void(Checkpoint&)> corrupt;
  std::string module;
  int64_t rows, cols;  // what the model config promises
  absl::StatusCode code;
  std::vector<std::string> fragments;  // the message must contain each
};

std::vector<CorruptCase> Cases() {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kUnimpl = absl::StatusCode::kUnimplemented;
  const auto kNotFound = absl::StatusCode::kNotFound;
  auto none = [](Checkpoint&) {};
  return {
      {"AwqScaleCountDoesNotMatchGroups",
       "awq_g32",
       [](Checkpoint& c) {
         c.Retype(kQ + ".scales", {4, 32}, DType::kF16);
       },
       kQ,
       64,
       64,
       kInvalid,
       {kQ + ".scales", "shape [4, 32], expected [2, 64]"}},
      {"AwqQzerosCountDoesNotMatchGroups",
       "awq_g64",
       [](Checkpoint& c) {
         c.Retype(kDown + ".qzeros", {1, 16}, DType::kI32);
       },
       kDown,
       64,
       128,
       kInvalid,
       {kDown + ".qzeros", "shape [1, 16], expected [2, 8]"}},
      {"AwqQweightAsFloats",
       "awq_g32",
       [](Checkpoint& c) {
         c.Retype(kQ + ".qweight", {64, 8}, DType::kF32);
       },
       kQ,
       64,
       64,
       kInvalid,
       {kQ + ".qweight", "dtype F32, expected I32"}},
      {"AwqOutputRowsDoNotPackIntoWords",
       "awq_g32",
       none,
       kQ,
       60,
       64,
       kInvalid,
       {kQ + ".qweight", "output rows 60 is not a multiple of 8"}},
      {"GptqInputColumnsNotWholeGroups",
       "gptq_g64_asym",
       none,
       kQ,
       64,
       96,
       kInvalid,
       {kQ + ".scales", "input columns 96 is not a multiple of 64"}},
      {"GptqBf16ScalesAreNotSilentlyRounded",
       "gptq_g32_sym",
       [](Checkpoint& c) {
         c.Retype(kQ + ".scales", {2, 64}, DType::kBF16);
       },
       kQ,
       64,
       64,
       kUnimpl,
       {kQ + ".scales", "dtype BF16 int4 scales are not implemented"}},
      {"GptqMissingGIdx",
       "gptq_g32_sym",
       [](Checkpoint& c) { c.source->Remove(kGate + ".g_idx"); },
       kGate,
       128,
       64,
       kNotFound,
       {kGate + ".g_idx"}},
      {"GptqGIdxGroupTooLarge",
       "gptq_g32_asym_descact",
       [](Checkpoint& c) {
         const TensorView g = *c.source->Find(kQ + ".g_idx");
         int32_t first;
         std::memcpy(&first, g.data, 4);
         // Move one column from the other group into column 0's group: 33 and 31 members.
         for (int64_t i = 1; i < 64; ++i) {
           int32_t v;
           std::memcpy(&v, g.data + 4 * i, 4);
           if (v != first) {
             SetWord(c, kQ + ".g_idx", i, first);
             break;
           }
         }
       },
       kQ,
       64,
       64,
       kInvalid,
       {kQ + ".g_idx", "has 33 columns; every group must have group_size 32"}},
      {"GptqGIdxNegative",
       "gptq_g32_sym",
       [](Checkpoint& c) { SetWord(c, kDown + ".g_idx", 7, -1); },
       kDown,
       64,
       128,
       kInvalid,
       {kDown + ".g_idx", "g_idx[7] = -1 is outside [0, 4)"}},
      {"Fp8WeightNotFp8",
       "fp8_ct_channel",
       [](Checkpoint& c) {
         c.Retype(kGate + ".weight", {128, 32}, DType::kBF16);
       },
       kGate,
       128,
       64,
       kInvalid,
       {kGate + ".weight", "dtype BF16, expected F8_E4M3"}},
      {"Fp8ScaleAsIntegers",
       "fp8_ct_channel",
       [](Checkpoint& c) {
         c.Retype(kGate + ".weight_scale", {128, 1}, DType::kI32);
       },
       kGate,
       128,
       64,
       kInvalid,
       {kGate + ".weight_scale", "dtype I32, expected F32 or BF16 or F16"}},
      {"Fp8BlockScaleGridWrong",
       "fp8_ct_block",
       [](Checkpoint& c) {
         c.Retype(kDown + ".weight_scale", {2, 1}, DType::kBF16);
       },
       kDown,
       128,
       256,
       kInvalid,
       {kDown + ".weight_scale", "shape [2, 1], expected [1, 2]"}},
      {"Fp8MissingScale",
       "fp8_fbgemm",
       [](Checkpoint& c) { c.source->Remove(kDown + ".weight_scale"); },
       kDown,
       64,
       128,
       kNotFound,
       {kDown + ".weight_scale"}},
      {"FbgemmScaleBoundNotPositive",
       "fp8_fbgemm",
       [](Checkpoint& c) {
         c.source->AddFloat(kGate + ".input_scale_ub", {1}, {0.0f}, DType::kF32);
       },
       kGate,
       128,
       64,
       kInvalid,
       {kGate + ".input_scale_ub", "value 0 must be positive"}},
      {"FbgemmScaleBoundShape",
       "fp8_fbgemm",
       [](Checkpoint& c) {
         c.source->AddFloat(kGate + ".input_scale_ub", {2}, {1.0f, 2.0f}, DType::kF32);
       },
       kGate,
       128,
       64,
       kInvalid,
       {kGate + ".input_scale_ub", "shape [2], expected F32 [1]"}},
      {"QuantizedModuleStoredPlain",
       "awq_g32",
       [](Checkpoint& c) {
         for (const char* part : {".qweight", ".qzeros", ".scales"}) c.source->Remove(kQ + part);
         c.source->AddFloat(kQ + ".weight", {64, 64}, std::vector<float>(64 * 64), DType::kF16);
       },
       kQ,
       64,
       64,
       kNotFound,
       {kQ + ".qweight"}},
      {"PlainWeightOfIntegers",
       "awq_g32",
       [](Checkpoint& c) {
         c.source->AddRaw("lm_head.weight", {67, 64}, DType::kI32, std::vector<uint8_t>(67 * 256));
       },
       "lm_head",
       67,
       64,
       kInvalid,
       {"lm_head.weight", "dtype I32 holds integers, not weights"}},
  };
}

void PrintTo(const CorruptCase& c, std::ostream* os) { *os << c.name; }

class QuantCorruptTest : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(QuantCorruptTest, IsRefusedNamingTensorValueAndBound) {
  const CorruptCase& c = GetParam();
  Checkpoint ckpt = Load(c.fixture);
  c.corrupt(ckpt);
  TensorUse used;
  absl::Status s =
      StoredMatrix::Open(*ckpt.source, ckpt.scheme, c.module, c.rows, c.cols, &used).status();
  ASSERT_FALSE(s.ok()) << c.name << " was accepted";
  EXPECT_EQ(s.code(), c.code) << s;
  for (const std::string& f : c.fragments) {
    EXPECT_NE(s.message().find(f), std::string::npos) << "want: " << f << "\ngot:  " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantCorruptTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(QuantCorruptSliceTest, SlicesThatCutAGroupOrTileAreRefused) {
  Checkpoint awq = Load("awq_g64");
  TensorUse used;
  absl::StatusOr<StoredMatrix> down =
      StoredMatrix::Open(*awq.source, awq.scheme, kDown, 64, 128, &used);
  ASSERT_TRUE(down.ok()) << down.status();
  absl::Status s = down->Read({0, 64, 32, 64}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            kDown +
                ".qweight: column slice [32, 96) is not aligned to its groups of 64 input "
                "columns");
  Checkpoint block = Load("fp8_ct_block");
  absl::StatusOr<StoredMatrix> gate =
      StoredMatrix::Open(*block.source, block.scheme, kGate, 256, 128, &used);
  ASSERT_TRUE(gate.ok()) << gate.status();
  s = gate->Read({64, 128, 0, 128}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(kGate + ".weight: slice rows [64, 192) cols [0, 128) of [256, 128] "
                                     "cuts its 128x128 scale tiles"),
            std::string::npos)
      << s;
  EXPECT_TRUE(gate->Read({128, 128, 0, 128}).ok());
}

// Dequantized rows of `m` (stored column order), for comparing two reads.
std::vector<float> Values(const WeightMatrix& m) {
  std::vector<float> out(m.rows * m.cols);
  for (int64_t r = 0; r < m.rows; ++r) DequantizeWeightRow(m, r, out.data() + r * m.cols);
  return out;
}

// Overwrites bytes [begin, end) of every `stride`-byte record of `name` with 0xA5.
void Poison(Checkpoint& c, const std::string& name, int64_t stride, int64_t begin, int64_t end) {
  std::vector<uint8_t> bytes = c.Bytes(name);
  for (int64_t at = 0; at < static_cast<int64_t>(bytes.size()); at += stride) {
    std::fill(bytes.begin() + at + begin, bytes.begin() + at + end, 0xA5);
  }
  const TensorView t = *c.source->Find(name);
  c.source->AddRaw(name, t.shape, t.dtype, std::move(bytes));
}

// Read(slice) uses only the slice's words: poisoning every other byte of the values, scales
// and zeros changes nothing (g_idx is checked whole at Open, so it stays).
TEST(QuantCorruptSliceTest, ReadsOnlyTheSlicesBytes) {
  struct SliceCase {
    const char* fixture;
    std::string module;
    int64_t rows, cols;
    TensorSlice slice;
    std::function<void(Checkpoint&)> poison_the_rest;
  };
  const std::vector<SliceCase> cases = {
      // AWQ, column-parallel rank 1 of 2: output rows [64, 128) are words [8, 16) of each
      // qweight / qzeros row and scales columns [64, 128).
      {"awq_g32",
       kGate,
       128,
       64,
       {64, 64, 0, 64},
       [](Checkpoint& c) {
         Poison(c, kGate + ".qweight", 64, 0, 32);
         Poison(c, kGate + ".qzeros", 64, 0, 32);
         Poison(c, kGate + ".scales", 256, 0, 128);
       }},
      // GPTQ, row-parallel rank 1 of 2: input columns [64, 128) are qweight rows [8, 16) and
      // groups [2, 4).
      {"gptq_g32_sym",
       kDown,
       64,
       128,
       {0, 64, 64, 64},
       [](Checkpoint& c) {
         Poison(c, kDown + ".qweight", 16 * 64 * 4, 0, 8 * 64 * 4);
         Poison(c, kDown + ".qzeros", 4 * 8 * 4, 0, 4 * 8 * 4 / 2);
         Poison(c, kDown + ".scales", 4 * 64 * 2, 0, 4 * 64 * 2 / 2);
       }},
      // FP8 per channel, column-parallel rank 1 of 2, and a row-parallel column range.
      {"fp8_ct_channel",
       kGate,
       128,
       64,
       {64, 64, 0, 64},
       [](Checkpoint& c) {
         Poison(c, kGate + ".weight", 128 * 64, 0, 64 * 64);
         Poison(c, kGate + ".weight_scale", 128 * 4, 0, 64 * 4);
       }},
      {"fp8_ct_channel",
       kDown,
       64,
       128,
       {0, 64, 64, 64},
       [](Checkpoint& c) { Poison(c, kDown + ".weight", 128, 0, 64); }},
  };
  for (const SliceCase& sc : cases) {
    SCOPED_TRACE(sc.module);
    Checkpoint clean = Load(sc.fixture), poisoned = Load(sc.fixture);
    sc.poison_the_rest(poisoned);
    TensorUse used;
    absl::StatusOr<StoredMatrix> a =
        StoredMatrix::Open(*clean.source, clean.scheme, sc.module, sc.rows, sc.cols, &used);
    absl::StatusOr<StoredMatrix> b =
        StoredMatrix::Open(*poisoned.source, poisoned.scheme, sc.module, sc.rows, sc.cols, &used);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    absl::StatusOr<HostMatrix> want = a->Read(sc.slice), got = b->Read(sc.slice);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    const std::vector<float> w = Values(want->matrix), g = Values(got->matrix);
    EXPECT_EQ(std::memcmp(w.data(), g.data(), w.size() * 4), 0);
    // and the poison is real: the whole matrix reads differently
    const std::vector<float> whole = Values(b->Read({0, sc.rows, 0, sc.cols})->matrix);
    const std::vector<float> clean_whole = Values(a->Read({0, sc.rows, 0, sc.cols})->matrix);
    EXPECT_NE(std::memcmp(whole.data(), clean_whole.data(), whole.size() * 4), 0);
  }
}

// GPTQ v1 stores zero - 1 in a nibble; a stored 15 is read as 16, as the layout's definition
// (and the fixture README) say. AutoGPTQ's torch path masks it to 0 instead; the exllama and
// vLLM kernels agree with 16.
TEST(QuantCorruptSliceTest, GptqStoredZeroFifteenIsSixteen) {
  Checkpoint c = Load("gptq_g32_sym");
  SetWord(c, kQ + ".qzeros", 0, -1);  // group 0, output rows 0..7: every nibble 15
  TensorUse used;
  absl::StatusOr<StoredMatrix> q = StoredMatrix::Open(*c.source, c.scheme, kQ, 64, 64, &used);
  ASSERT_TRUE(q.ok()) << q.status();
  absl::StatusOr<HostMatrix> m = q->Read({0, 16, 0, 64});
  ASSERT_TRUE(m.ok()) << m.status();
  const auto* zeros = static_cast<const uint16_t*>(m->matrix.zeros);
  for (int64_t r = 0; r < 16; ++r) {
    EXPECT_EQ(F16ToF32(zeros[r * 2 + 0]), r < 8 ? 16.0f : 8.0f) << r;  // symmetric: 7 + 1
    EXPECT_EQ(F16ToF32(zeros[r * 2 + 1]), 8.0f) << r;
  }
}

TEST(QuantCorruptSliceTest, FbgemmScaleBoundFromTheCheckpointWins) {
  Checkpoint c = Load("fp8_fbgemm");
  c.source->AddFloat(kGate + ".input_scale_ub", {1}, {900.0f}, DType::kF32);
  TensorUse used;
  absl::StatusOr<StoredMatrix> gate =
      StoredMatrix::Open(*c.source, c.scheme, kGate, 128, 64, &used);
  ASSERT_TRUE(gate.ok()) << gate.status();
  EXPECT_TRUE(used.Contains(kGate + ".input_scale_ub"));
  EXPECT_EQ(gate->Read({0, 128, 0, 64})->matrix.activation_scale_ub, 900.0f);
}

}  // namespace
}  // namespace tpserve
