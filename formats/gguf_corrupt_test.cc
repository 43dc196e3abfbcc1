// A corpus of hand-made corrupt GGUF files: each case patches one field of a valid file (or
// builds a file that breaks one rule) and must be refused with the expected code and a message
// naming what was violated. Nothing here may crash, even under ASan/UBSan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "formats/gguf.h"
#include "formats/gguf_test_builder.h"

namespace tpserve {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kTwoTo63 = uint64_t{1} << 63;

absl::StatusOr<std::unique_ptr<GgufFile>> ParseBytes(std::string bytes) {
  return GgufFile::FromSource(std::make_unique<MemoryByteSource>("bad.gguf", std::move(bytes)));
}

// kv 0: a string, kv 1: an array of strings, kv 2: a bool;
// tensor 0: "tok" F32 ggml dims {4, 4} (64 bytes), tensor 1: "norm" F32 {4} (16 bytes).
GgufTestBuilder BaseBuilder() {
  GgufTestBuilder b;
  b.AddString("general.architecture", "llama")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "bc"})
      .AddBool("flag", true)
      .AddTensor("tok", 0, {4, 4}, std::string(64, '\x01'))
      .AddTensor("norm", 0, {4}, std::string(16, '\x02'));
  return b;
}

// Builds the base file and lets `patch` change it using the recorded layout.
std::string PatchedBase(
    const std::function<void(std::string&, const GgufTestBuilder::Layout&)>& patch) {
  GgufTestBuilder b = BaseBuilder();
  std::string bytes = b.Build();
  patch(bytes, b.layout());
  return bytes;
}

// A maker that writes `value` over one field of the base file.
template <typename T>
std::function<std::string()> Patch(size_t (*field)(const GgufTestBuilder::Layout&), T value) {
  return [field, value] {
    return PatchedBase([&](std::string& bytes, const GgufTestBuilder::Layout& l) {
      PatchLe(bytes, field(l), value);
    });
  };
}

struct CorruptCase {
  std::string name;
  std::function<std::string()> make;
  absl::StatusCode code;
  std::string message_fragment;
};

using L = GgufTestBuilder::Layout;

std::string NestedArrays(int depth) {
  // depth levels of single-element arrays around an empty u8 array.
  std::string value;
  AppendLe(value, static_cast<uint32_t>(GgufValueType::kU8));
  AppendLe(value, uint64_t{0});
  for (int i = 1; i < depth; ++i) {
    std::string outer;
    AppendLe(outer, static_cast<uint32_t>(GgufValueType::kArray));
    AppendLe(outer, uint64_t{1});
    value = outer + value;
  }
  return GgufTestBuilder().AddRawKv("deep", GgufValueType::kArray, value).Build();
}

// One K-quant tensor "kq" of ggml `type` (12 Q4_K, 13 Q5_K, 14 Q6_K) with `data_bytes` of data.
std::function<std::string()> KQuantFile(uint32_t type, std::vector<uint64_t> dims,
                                        size_t data_bytes) {
  return [=] {
    return GgufTestBuilder().AddTensor("kq", type, dims, std::string(data_bytes, '\x11')).Build();
  };
}

std::vector<CorruptCase> Cases() {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kUnimpl = absl::StatusCode::kUnimplemented;
  return {
      {"EmptyFile", [] { return std::string(); }, kInvalid,
       "bad.gguf: truncated reading magic at offset 0: needs 4 bytes, only 0 left"},
      {"BadMagic", [] { return PatchedBase([](std::string& b, const L&) { b[0] = 'X'; }); },
       kInvalid, "bad magic 0x46554758, expected 0x46554747 (\"GGUF\")"},
      {"Version1", Patch<uint32_t>([](const L& l) { return l.version_field; }, 1), kUnimpl,
       "unsupported GGUF version 1;"},
      {"BigEndianVersion", Patch<uint32_t>([](const L& l) { return l.version_field; }, 0x03000000),
       kUnimpl, "(a big-endian file?)"},
      {"TensorCountOverflows", Patch([](const L& l) { return l.tensor_count_field; }, kTwoTo63),
       kInvalid, "tensor_count 9223372036854775808 cannot fit in the remaining"},
      {"KvCountOverflows", Patch([](const L& l) { return l.kv_count_field; }, kTwoTo63), kInvalid,
       "kv_count 9223372036854775808 at offset 24 cannot fit"},
      {"KeyLengthOverflows", Patch([](const L& l) { return l.kvs[0].key_length_field; }, kTwoTo63),
       kInvalid, "truncated reading key of kv #0 at offset 32: needs 9223372036854775808 bytes"},
      {"StringLengthOverflows", Patch([](const L& l) { return l.kvs[0].value_field; }, kTwoTo63),
       kInvalid, "truncated reading key 'general.architecture' at offset"},
      {"ArrayLengthOverflows", Patch([](const L& l) { return l.kvs[1].value_field + 4; }, kTwoTo63),
       kInvalid, "array length of key 'tokenizer.ggml.tokens' 9223372036854775808"},
      {"ArrayElementStringOverflows",
       Patch([](const L& l) { return l.kvs[1].value_field + 12; }, kTwoTo63), kInvalid,
       "truncated reading element 0 of key 'tokenizer.ggml.tokens'"},
      {"UnknownValueType", Patch<uint32_t>([](const L& l) { return l.kvs[2].type_field; }, 13),
       kInvalid, "unknown GGUF value type 13 for key 'flag'"},
      {"UnknownArrayElementType",
       Patch<uint32_t>([](const L& l) { return l.kvs[1].value_field; }, 99), kInvalid,
       "unknown GGUF value type 99 for element type of key 'tokenizer.ggml.tokens'"},
      {"BoolNotZeroOrOne",
       [] { return PatchedBase([](std::string& b, const L& l) { b[l.kvs[2].value_field] = 2; }); },
       kInvalid, "bool value 2 in key 'flag' is not 0 or 1"},
      {"ArraysNestedTooDeep", [] { return NestedArrays(GgufMetadata::kMaxArrayNesting + 1); },
       kInvalid, "nests arrays deeper than 8"},
      {"DuplicateKey", [] { return BaseBuilder().AddU32("flag", 1).Build(); }, kInvalid,
       "duplicate key 'flag' (kv #3)"},
      {"AlignmentZero", [] { return BaseBuilder().AddU32("general.alignment", 0).Build(); },
       kInvalid, "general.alignment 0 is not a power of two"},
      {"AlignmentNotPowerOfTwo",
       [] { return BaseBuilder().AddU32("general.alignment", 48).Build(); }, kInvalid,
       "general.alignment 48 is not a power of two"},
      {"AlignmentWrongType",
       [] { return BaseBuilder().AddString("general.alignment", "32").Build(); }, kInvalid,
       "'general.alignment' has type STRING, expected an integer"},
      {"TensorNameLengthOverflows",
       Patch([](const L& l) { return l.tensors[0].name_length_field; }, kTwoTo63), kInvalid,
       "truncated reading name of tensor #0"},
      {"NDimsAboveFour", Patch<uint32_t>([](const L& l) { return l.tensors[0].n_dims_field; }, 5),
       kInvalid, "tensor 'tok' n_dims 5 is outside [1, 4]"},
      {"NDimsZero", Patch<uint32_t>([](const L& l) { return l.tensors[1].n_dims_field; }, 0),
       kInvalid, "tensor 'norm' n_dims 0 is outside [1, 4]"},
      {"DimZero", Patch<uint64_t>([](const L& l) { return l.tensors[0].dims_field + 8; }, 0),
       kInvalid, "tensor 'tok' dim 1 = 0 is outside [1, 9223372036854775807]"},
      {"DimAboveInt64", Patch([](const L& l) { return l.tensors[0].dims_field; }, kTwoTo63),
       kInvalid, "tensor 'tok' dim 0 = 9223372036854775808 is outside"},
      {"DimsProductOverflows",
       [] {
         return PatchedBase([](std::string& b, const L& l) {
           PatchLe(b, l.tensors[0].dims_field, uint64_t{1} << 32);
           PatchLe(b, l.tensors[0].dims_field + 8, uint64_t{1} << 32);
         });
       },
       kInvalid, "tensor 'tok' element count of dims [4294967296, 4294967296]... overflows int64"},
      {"ByteSizeOverflows",
       Patch([](const L& l) { return l.tensors[1].dims_field; }, uint64_t{1} << 62), kInvalid,
       "tensor 'norm' byte size of dims [4611686018427387904] in F32 overflows int64"},
      {"UnknownGgmlType", Patch<uint32_t>([](const L& l) { return l.tensors[0].type_field; }, 99),
       kUnimpl, "tensor 'tok' has unknown ggml type 99"},
      {"RetiredGgmlType", Patch<uint32_t>([](const L& l) { return l.tensors[1].type_field; }, 4),
       kUnimpl, "tensor 'norm' has unknown ggml type 4"},
      {"RowNotWholeBlocks", Patch<uint32_t>([](const L& l) { return l.tensors[0].type_field; }, 8),
       kInvalid, "tensor 'tok' row length 4 is not a multiple of the Q8_0 block of 32 elements"},
      // K-quants: rows are whole 256-element super-blocks, and the data holds every byte of
      // them. 576 is a whole number of 32-element blocks but not of super-blocks.
      {"Q4_KRowNotWholeSuperBlocks", KQuantFile(12, {576, 2}, 2 * 144 * 3), kInvalid,
       "tensor 'kq' row length 576 is not a multiple of the Q4_K block of 256 elements"},
      {"Q5_KRowNotWholeSuperBlocks", KQuantFile(13, {128, 4}, 176 * 2), kInvalid,
       "tensor 'kq' row length 128 is not a multiple of the Q5_K block of 256 elements"},
      {"Q6_KRowNotWholeSuperBlocks", KQuantFile(14, {32}, 210), kInvalid,
       "tensor 'kq' row length 32 is not a multiple of the Q6_K block of 256 elements"},
      {"Q4_KDataOneByteShort", KQuantFile(12, {512, 3}, 6 * 144 - 1), kInvalid,
       "tensor 'kq' at data offset 0 with 864 bytes ends past the data section (863 bytes)"},
      {"Q5_KDataOneByteShort", KQuantFile(13, {256, 1}, 175), kInvalid,
       "tensor 'kq' at data offset 0 with 176 bytes ends past the data section (175 bytes)"},
      {"Q6_KDataOneByteShort", KQuantFile(14, {768, 2}, 6 * 210 - 1), kInvalid,
       "tensor 'kq' at data offset 0 with 1260 bytes ends past the data section (1259 bytes)"},
      {"MisalignedOffset",
       Patch<uint64_t>([](const L& l) { return l.tensors[1].offset_field; }, 68), kInvalid,
       "tensor 'norm' offset 68 is not a multiple of the alignment 32"},
      {"OffsetPastEnd",
       Patch<uint64_t>([](const L& l) { return l.tensors[1].offset_field; }, 1 << 20), kInvalid,
       "tensor 'norm' at data offset 1048576 with 16 bytes ends past the data section (80 bytes)"},
      {"OffsetNearUint64Max",
       [] {
         return PatchedBase([](std::string& b, const L& l) {
           PatchLe<uint64_t>(b, l.tensors[1].offset_field,
                             std::numeric_limits<uint64_t>::max() - 31);
         });
       },
       kInvalid, "tensor 'norm' at data offset 18446744073709551584 with 16 bytes ends past"},
      {"OverlappingTensors",
       Patch<uint64_t>([](const L& l) { return l.tensors[1].offset_field; }, 32), kInvalid,
       "tensors 'tok' [0, 64) and 'norm' [32, 48) overlap in the data section"},
      {"DuplicateTensorName",
       [] { return BaseBuilder().AddTensor("tok", 0, {4}, std::string(16, '\0')).Build(); },
       kInvalid, "duplicate tensor name 'tok' (tensor #2)"},
      {"DataSectionPastEnd",
       [] {
         GgufTestBuilder b = BaseBuilder();
         std::string bytes = b.Build();
         bytes.resize(b.layout().tensors[1].offset_field + 8);  // ends right after the infos
         return bytes;
       },
       kInvalid, "data section would start at offset 256, past the end of the file (229 bytes)"},
  };
}

class GgufCorruptTest : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(GgufCorruptTest, IsRefusedWithCodeAndMessage) {
  const CorruptCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<GgufFile>> file = ParseBytes(c.make());
  ASSERT_FALSE(file.ok()) << c.name << " was accepted";
  EXPECT_EQ(file.status().code(), c.code) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(c.message_fragment));
  EXPECT_THAT(file.status().message(), HasSubstr("bad.gguf"));
}

INSTANTIATE_TEST_SUITE_P(Corpus, GgufCorruptTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) {
                           return info.param.name;
                         });

TEST(GgufCorruptTest, BaseFileIsValid) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = ParseBytes(BaseBuilder().Build());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->TensorNames().size(), 2u);
}

TEST(GgufCorruptTest, EveryTruncationIsRefused) {
  const std::string full = BaseBuilder().Build();
  for (size_t n = 0; n < full.size(); ++n) {
    absl::StatusOr<std::unique_ptr<GgufFile>> file = ParseBytes(full.substr(0, n));
    ASSERT_FALSE(file.ok()) << "prefix of " << n << " of " << full.size() << " bytes accepted";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  }
}

TEST(GgufCorruptTest, SingleByteCorruptionsNeverCrash) {
  // Not every changed byte is an error (a changed name is still a valid file); the promise is
  // a clean accept or refuse, and that accepted views stay inside the bytes. ASan/UBSan builds
  // check the reads themselves.
  const std::string full = BaseBuilder().Build();
  int refused = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t value : {0x00, 0x7F, 0xFF}) {
      std::string bytes = full;
      bytes[i] = static_cast<char>(value);
      auto source = std::make_unique<MemoryByteSource>("bad.gguf", bytes);
      const uint8_t* begin = source->bytes().data();
      const uint8_t* end = begin + source->bytes().size();
      absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromSource(std::move(source));
      if (!file.ok()) {
        ++refused;
        continue;
      }
      for (const std::string& name : (*file)->TensorNames()) {
        absl::StatusOr<TensorView> view = (*file)->Find(name);
        if (!view.ok()) continue;
        EXPECT_GE(view->data, begin);
        EXPECT_LE(view->data + view->nbytes, end) << "byte " << i << " = " << int{value};
        std::vector<float> row(view->cols());
        for (int64_t r = 0; r < view->rows(); ++r) {
          DequantizeRow(view->dtype, view->data + r * *RowBytes(view->dtype, view->cols()),
                        row.data(), view->cols());
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace tpserve
