// A corpus of hand-made corrupt safetensors files and sharded indexes. Each must be refused
// with the expected code and a message naming what was violated; nothing may crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>

#include "formats/safetensors.h"
#include "formats/safetensors_sharded.h"
#include "formats/safetensors_test_builder.h"

namespace tpserve {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::unique_ptr<SafetensorsFile>> ParseBytes(std::string bytes) {
  return SafetensorsFile::FromSource(
      std::make_unique<MemoryByteSource>("bad.safetensors", std::move(bytes)));
}

// "w": F32 [2, 2] at [0, 16), "b": F16 [4] at [16, 24).
SafetensorsTestBuilder Base() {
  SafetensorsTestBuilder b;
  b.Add("w", "F32", {2, 2}, std::string(16, '\x01')).Add("b", "F16", {4}, std::string(8, '\x02'));
  return b;
}

std::string WithLength(std::string bytes, uint64_t length) {
  std::memcpy(bytes.data(), &length, 8);
  return bytes;
}

struct CorruptCase {
  std::string name;
  std::function<std::string()> make;
  absl::StatusCode code;
  std::string message_fragment;
};

std::vector<CorruptCase> FileCases() {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::string data(24, '\0');
  return {
      {"Empty", [] { return std::string(); }, kInvalid,
       "truncated reading header length at offset 0: needs 8 bytes, only 0 left"},
      {"HeaderLengthPastEof", [] { return WithLength(Base().Build(), 4096); }, kInvalid,
       "header length 4096 runs past the end of the file"},
      {"HeaderLengthAboveCap", [] { return WithLength(Base().Build(), uint64_t{1} << 63); },
       kInvalid, "header length 9223372036854775808 exceeds the cap of 104857600 bytes"},
      {"BadJson", [data] { return SafetensorsTestBuilder::Assemble(R"({"w": {"dtype": )", data); },
       kInvalid, "bad.safetensors: header is not valid JSON"},
      {"HeaderNotAnObject", [data] { return SafetensorsTestBuilder::Assemble("[1, 2]", data); },
       kInvalid, "header is a JSON array, expected an object"},
      {"MetadataNotAnObject",
       [data] { return SafetensorsTestBuilder::Assemble(R"({"__metadata__": [1]})", data); },
       kInvalid, "'__metadata__' is a JSON array, expected an object"},
      {"MetadataValueNotAString",
       [data] {
         return SafetensorsTestBuilder::Assemble(R"({"__metadata__": {"format": "pt", "n": 3}})",
                                                 data);
       },
       kInvalid, "'__metadata__' value 'n' is a JSON number, expected a string"},
      {"EntryNotAnObject", [data] { return SafetensorsTestBuilder::Assemble(R"({"w": 5})", data); },
       kInvalid, "tensor 'w' entry is not a JSON object"},
      {"MissingDtype",
       [] {
         return SafetensorsTestBuilder::Assemble(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})",
                                                 std::string(4, '\0'));
       },
       kInvalid, "tensor 'w' has no string 'dtype'"},
      {"NegativeDim",
       [] {
         return SafetensorsTestBuilder::Assemble(
             R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
             std::string(4, '\0'));
       },
       kInvalid, "tensor 'w' 'shape' is not an array of integers in [0, 2^63)"},
      {"ThreeOffsets",
       [] {
         return SafetensorsTestBuilder::Assemble(
             R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})",
             std::string(4, '\0'));
       },
       kInvalid, "tensor 'w' 'data_offsets' is not an array of two non-negative integers"},
      {"DataOffsetsReversed",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(1).data_offsets = {{24, 16}};
         return b.Build();
       },
       kInvalid, "tensor 'b' data_offsets [24, 16] are reversed"},
      {"DataOffsetsPastEnd",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(1).data_offsets = {{16, 1u << 20}};
         return b.Build();
       },
       kInvalid, "tensor 'b' data_offsets [16, 1048576] run past the data section (24 bytes)"},
      {"ShapeBytesMismatch",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(0).shape = {2, 3};
         return b.Build();
       },
       kInvalid, "tensor 'w' data_offsets [0, 16] hold 16 bytes but shape [2, 3] of F32 needs 24"},
      {"ShapeBytesOverflow",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(0).shape = {int64_t{1} << 62, 4};
         return b.Build();
       },
       kInvalid, "tensor 'w' shape [4611686018427387904, 4] of F32 overflows int64 bytes"},
      {"OverlappingTensors",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(0).shape = {3};
         b.tensor(0).data_offsets = {{0, 12}};
         b.tensor(1).data_offsets = {{8, 16}};
         return b.Build();
       },
       kInvalid, "tensors 'w' [0, 12) and 'b' [8, 16) overlap in the data section"},
      {"HoleInDataSection",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(0).shape = {2};
         b.tensor(0).data_offsets = {{0, 8}};
         return b.Build();
       },
       kInvalid, "data section bytes [8, 16) belong to no tensor"},
      {"TrailingBytes", [] { return Base().AppendData("junk").Build(); }, kInvalid,
       "data section bytes [24, 28) belong to no tensor"},
      {"DuplicateTensorName",
       [] { return Base().Add("w", "F32", {1}, std::string(4, '\0')).Build(); }, kInvalid,
       "header has duplicate key 'w'"},
      {"UnknownDtype",
       [] {
         SafetensorsTestBuilder b = Base();
         b.tensor(1).dtype = "F4";
         return b.Build();
       },
       absl::StatusCode::kUnimplemented,
       "tensor 'b' has dtype 'F4', which this reader does not know"},
  };
}

class SafetensorsCorruptTest : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(SafetensorsCorruptTest, IsRefusedWithCodeAndMessage) {
  const CorruptCase& c = GetParam();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = ParseBytes(c.make());
  ASSERT_FALSE(file.ok()) << c.name << " was accepted";
  EXPECT_EQ(file.status().code(), c.code) << file.status();
  EXPECT_THAT(file.status().message(), HasSubstr(c.message_fragment));
  EXPECT_THAT(file.status().message(), HasSubstr("bad.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(Corpus, SafetensorsCorruptTest, ::testing::ValuesIn(FileCases()),
                         [](const ::testing::TestParamInfo<CorruptCase>& info) {
                           return info.param.name;
                         });

TEST(SafetensorsCorruptTest, BaseFileIsValid) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = ParseBytes(Base().Build());
  ASSERT_TRUE(file.ok()) << file.status();
}

TEST(SafetensorsCorruptTest, EveryTruncationIsRefused) {
  const std::string full = Base().Build();
  for (size_t n = 0; n < full.size(); ++n) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = ParseBytes(full.substr(0, n));
    ASSERT_FALSE(file.ok()) << "prefix of " << n << " of " << full.size() << " bytes accepted";
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  }
}

TEST(SafetensorsCorruptTest, SingleByteCorruptionsNeverCrash) {
  const std::string full = Base().Build();
  int refused = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (char value : {'\0', '9', '"', '\xff'}) {
      std::string bytes = full;
      bytes[i] = value;
      auto source = std::make_unique<MemoryByteSource>("bad.safetensors", bytes);
      const uint8_t* begin = source->bytes().data();
      const uint8_t* end = begin + source->bytes().size();
      auto file = SafetensorsFile::FromSource(std::move(source));
      if (!file.ok()) {
        ++refused;
        continue;
      }
      for (const std::string& name : (*file)->TensorNames()) {
        absl::StatusOr<TensorView> view = (*file)->Find(name);
        if (!view.ok()) continue;
        EXPECT_GE(view->data, begin);
        EXPECT_LE(view->data + view->nbytes, end) << "byte " << i;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

// --- Sharded checkpoints -------------------------------------------------------------------

const char kShardA[] = "model-00001-of-00002.safetensors";
const char kShardB[] = "model-00002-of-00002.safetensors";

std::string OneTensorShard(const std::string& name) {
  SafetensorsTestBuilder b;
  b.Add(name, "F32", {1}, std::string(4, '\0'));
  return b.Build();
}

absl::Status OpenSharded(const std::string& index,
                         const std::map<std::string, std::string>& files) {
  auto opener = [&files](const std::string& name) -> absl::StatusOr<std::unique_ptr<ByteSource>> {
    auto it = files.find(name);
    if (it == files.end()) return absl::NotFoundError(name + ": No such file or directory");
    return std::unique_ptr<ByteSource>(std::make_unique<MemoryByteSource>(name, it->second));
  };
  return ShardedSafetensors::FromIndex(index, "index.json", opener).status();
}

std::string Index(const std::string& weight_map_body) {
  return R"({"metadata": {"total_size": 8}, "weight_map": {)" + weight_map_body + "}}";
}

struct ShardCase {
  std::string name;
  std::string index;
  std::map<std::string, std::string> files;
  absl::StatusCode code;
  std::string message_fragment;
};

std::vector<ShardCase> ShardCases() {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const std::string ab = std::string(R"("x": ")") + kShardA + R"(", "y": ")" + kShardB + R"(")";
  return {
      {"MissingShardFile",
       Index(ab),
       {{kShardA, OneTensorShard("x")}},
       absl::StatusCode::kNotFound,
       "index.json: cannot open shard 'model-00002-of-00002.safetensors' (for tensor 'y')"},
      {"TensorAbsentFromShard",
       Index(ab),
       {{kShardA, OneTensorShard("x")}, {kShardB, OneTensorShard("z")}},
       kInvalid,
       "tensor 'y' is listed for shard 'model-00002-of-00002.safetensors' but is absent from it"},
      {"TensorInTwoShards",
       Index(ab),
       {{kShardA, OneTensorShard("x")},
        {kShardB, SafetensorsTestBuilder()
                      .Add("y", "F32", {1}, std::string(4, '\0'))
                      .Add("x", "F32", {1}, std::string(4, '\0'))
                      .Build()}},
       kInvalid,
       "tensor 'x' appears in both shard 'model-00001-of-00002.safetensors' and shard "
       "'model-00002-of-00002.safetensors'"},
      {"TensorNotInIndex",
       Index(std::string(R"("x": ")") + kShardA + R"(")"),
       {{kShardA, SafetensorsTestBuilder()
                      .Add("x", "F32", {1}, std::string(4, '\0'))
                      .Add("extra", "F32", {1}, std::string(4, '\0'))
                      .Build()}},
       kInvalid,
       "tensor 'extra' in shard 'model-00001-of-00002.safetensors' is not listed"},
      {"DuplicateInWeightMap",
       Index(std::string(R"("x": ")") + kShardA + R"(", "x": ")" + kShardB + R"(")"),
       {{kShardA, OneTensorShard("x")}},
       kInvalid,
       "index.json has duplicate key 'x'"},
      {"BadIndexJson", "{\"weight_map\": ", {}, kInvalid, "index.json is not valid JSON"},
      {"NoWeightMap",
       R"({"metadata": {}})",
       {},
       kInvalid,
       "index.json: 'weight_map' is missing or not an object"},
      {"EmptyWeightMap", Index(""), {}, kInvalid, "index.json: 'weight_map' is empty"},
      {"ShardNotAString",
       Index(R"("x": 3)"),
       {},
       kInvalid,
       "weight_map entry for tensor 'x' is not a string"},
      {"ShardEscapesDirectory",
       Index(R"("x": "../../etc/passwd")"),
       {},
       kInvalid,
       "shard path '../../etc/passwd' for tensor 'x' must be relative"},
      {"AbsoluteShardPath",
       Index(R"("x": "/tmp/a.safetensors")"),
       {},
       kInvalid,
       "shard path '/tmp/a.safetensors' for tensor 'x' must be relative"},
      {"CorruptShard",
       Index(ab),
       {{kShardA, OneTensorShard("x")}, {kShardB, WithLength(OneTensorShard("y"), 999)}},
       kInvalid,
       "model-00002-of-00002.safetensors: header length 999 runs past the end"},
  };
}

class ShardedCorruptTest : public ::testing::TestWithParam<ShardCase> {};

TEST_P(ShardedCorruptTest, IsRefusedWithCodeAndMessage) {
  const ShardCase& c = GetParam();
  absl::Status s = OpenSharded(c.index, c.files);
  ASSERT_FALSE(s.ok()) << c.name << " was accepted";
  EXPECT_EQ(s.code(), c.code) << s;
  EXPECT_THAT(s.message(), HasSubstr(c.message_fragment));
}

INSTANTIATE_TEST_SUITE_P(Corpus, ShardedCorruptTest, ::testing::ValuesIn(ShardCases()),
                         [](const ::testing::TestParamInfo<ShardCase>& info) {
                           return info.param.name;
                         });

TEST(ShardedCorruptTest, ConsistentShardsAreAccepted) {
  const std::string ab = std::string(R"("x": ")") + kShardA + R"(", "y": ")" + kShardB + R"(")";
  EXPECT_TRUE(
      OpenSharded(Index(ab), {{kShardA, OneTensorShard("x")}, {kShardB, OneTensorShard("y")}})
          .ok());
}

}  // namespace
}  // namespace tpserve
