#include "formats/tensor_format.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace tpserve {
namespace {

int64_t Bytes(const char* format, int64_t rows, int64_t cols) {
  absl::StatusOr<TensorFormat> f = ParseTensorFormat(format);
  EXPECT_TRUE(f.ok()) << f.status();
  absl::StatusOr<int64_t> bytes = MatrixBytes(*f, rows, cols, "w");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.value_or(-1);
}

TEST(TensorFormatTest, NamesRoundTrip) {
  for (const char* name : {"f32", "f16", "bf16", "fp8-e4m3", "fp8", "fp8-block", "int4-g128",
                           "int4-g32", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"}) {
    absl::StatusOr<TensorFormat> f = ParseTensorFormat(name);
    ASSERT_TRUE(f.ok()) << name;
    EXPECT_EQ(TensorFormatName(*f), name);
  }
  EXPECT_EQ(ParseTensorFormat("int4")->group_size, 128);
  EXPECT_EQ(ParseTensorFormat("fp16")->kind, FormatKind::kF16);
}

TEST(TensorFormatTest, RejectsUnknownNamesAndOddGroups) {
  absl::Status unknown = ParseTensorFormat("q3_k").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("accepted: f32"), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find("q4_1, q5_0, q5_1, q4_k, q5_k, q6_k"), std::string::npos)
      << unknown;
  absl::Status odd = ParseTensorFormat("int4-g3").status();
  EXPECT_NE(odd.message().find("multiple of 32"), std::string::npos) << odd;
  // Groups are whole 32-column chunks of packed codes: 48 is even but splits a chunk.
  EXPECT_NE(ParseTensorFormat("int4-g48").status().message().find("multiple of 32"),
            std::string::npos);
  EXPECT_FALSE(ParseTensorFormat("int4-gx").ok());
}

TEST(TensorFormatTest, ActOrderInt4CountsItsPermutation) {
  const TensorFormat act = *ParseTensorFormat("int4-g128-act");
  EXPECT_TRUE(act.act_order);
  EXPECT_EQ(act.group_size, 128);
  EXPECT_EQ(TensorFormatName(act), "int4-g128-act");
  EXPECT_FALSE(act == TensorFormat::Int4(128));
  // One int32 per input column on top of the packed codes, scales and zero points.
  EXPECT_EQ(*MatrixBytes(act, 64, 256, "o"), *MatrixBytes(TensorFormat::Int4(128), 64, 256, "o") +
                                                 256 * 4);
}

TEST(TensorFormatTest, PlainFormatsAreElementsTimesWidth) {
  EXPECT_EQ(Bytes("bf16", 4096, 4096), 4096 * 4096 * 2);
  EXPECT_EQ(Bytes("f32", 3, 5), 60);
  EXPECT_EQ(Bytes("fp8-e4m3", 7, 11), 77);
}

TEST(TensorFormatTest, Fp8ScalesAreCounted) {
  // One fp32 scale per output row.
  EXPECT_EQ(Bytes("fp8", 4096, 4096), 16777216 + 4096 * 4);
  // 300 x 200 covers ceil(300/128) * ceil(200/128) = 3 * 2 tiles, one fp32 scale each.
  EXPECT_EQ(Bytes("fp8-block", 300, 200), 60000 + 6 * 4);
}

TEST(TensorFormatTest, Int4PacksTwoPerByteWithScaleAndZeroPerGroup) {
  // 4096 / 128 = 32 groups per row, fp16 scale + fp16 zero = 4 bytes each.
  EXPECT_EQ(Bytes("int4-g128", 4096, 4096), 4096 * 2048 + 4096 * 32 * 4);
  EXPECT_EQ(Bytes("int4-g64", 2, 64), 2 * 32 + 2 * 1 * 4);
}

TEST(TensorFormatTest, GgmlBlocksMatchSmolLm2FileSizes) {
  // Sizes of SmolLM2-135M-Instruct.Q4_1.gguf tensors as the gguf package reports them.
  EXPECT_EQ(Bytes("q8_0", 49152, 576), 30081024);  // token_embd
  EXPECT_EQ(Bytes("q4_1", 1536, 576), 552960);     // blk.0.ffn_gate
  EXPECT_EQ(Bytes("q4_1", 192, 576), 69120);       // blk.0.attn_k
  EXPECT_EQ(Bytes("q4_0", 10, 64), 10 * 2 * 18);
}

TEST(TensorFormatTest, KQuantSuperBlocksMatchGgufTensorSizes) {
  // Llama-2-7B shapes: [rows, cols / 256 super-blocks * block bytes].
  EXPECT_EQ(Bytes("q4_k", 4096, 4096), 9437184);     // blk.0.attn_q: 4096 * 16 * 144
  EXPECT_EQ(Bytes("q6_k", 32000, 4096), 107520000);  // output: 32000 * 16 * 210
  EXPECT_EQ(Bytes("q5_k", 11008, 4096), 11008 * 16 * 176);
  // 11008 inputs are 43 super-blocks (ffn_down).
  EXPECT_EQ(Bytes("q6_k", 4096, 11008), 4096 * 43 * 210);
  absl::Status s = MatrixBytes(*ParseTensorFormat("q4_k"), 576, 576, "blk.0.attn_q").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.0.attn_q: input dim 576 is not a multiple of the q4_k block "
                             "of 256 values"),
            std::string::npos)
      << s;
}

TEST(TensorFormatTest, MisalignedInputDimNamesTensorAndBlock) {
  absl::Status s = MatrixBytes(*ParseTensorFormat("q4_1"), 4, 100, "blk.3.ffn_down").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blk.3.ffn_down: input dim 100 is not a multiple of the q4_1 block "
                             "of 32 values"),
            std::string::npos)
      << s;
  EXPECT_FALSE(MatrixBytes(TensorFormat::Int4(128), 576, 576, "q").ok());
  EXPECT_TRUE(MatrixBytes(TensorFormat::Int4(64), 576, 576, "q").ok());
}

TEST(TensorFormatTest, OverflowAndNegativeShapesAreErrors) {
  absl::Status big =
      MatrixBytes(TensorFormat::Of(FormatKind::kF32), int64_t{1} << 40, int64_t{1} << 40, "huge")
          .status();
  EXPECT_NE(big.message().find("overflows int64"), std::string::npos) << big;
  EXPECT_FALSE(MatrixBytes(TensorFormat::Of(FormatKind::kF32), -1, 4, "neg").ok());
}

TEST(TensorFormatTest, DenseValueBytesAreThePublicRuleOfThumb) {
  const int64_t seven_billion = 7'000'000'000;
  EXPECT_EQ(DenseValueBytes(TensorFormat::Of(FormatKind::kF16), seven_billion), 14'000'000'000);
  EXPECT_EQ(DenseValueBytes(TensorFormat::Of(FormatKind::kFp8PerChannel), seven_billion),
            7'000'000'000);
  EXPECT_EQ(DenseValueBytes(TensorFormat::Int4(128), seven_billion), 3'500'000'000);
}

TEST(TensorFormatTest, BlockGeometry) {
  EXPECT_EQ(InputBlockValues(TensorFormat::Of(FormatKind::kQ4_0)), 32);
  EXPECT_EQ(InputBlockValues(TensorFormat::Int4(64)), 64);
  EXPECT_EQ(InputBlockValues(TensorFormat::Of(FormatKind::kFp8Block128)), 128);
  EXPECT_EQ(InputBlockValues(TensorFormat::Of(FormatKind::kFp8PerChannel)), 1);
  EXPECT_EQ(OutputBlockRows(TensorFormat::Of(FormatKind::kFp8Block128)), 128);
  EXPECT_EQ(OutputBlockRows(TensorFormat::Of(FormatKind::kBF16)), 1);
  EXPECT_DOUBLE_EQ(BitsPerValue(TensorFormat::Of(FormatKind::kQ4_1)), 5.0);
  EXPECT_DOUBLE_EQ(BitsPerValue(TensorFormat::Of(FormatKind::kQ8_0)), 8.5);
  EXPECT_EQ(InputBlockValues(TensorFormat::Of(FormatKind::kQ4_K)), 256);
  EXPECT_EQ(InputBlockValues(TensorFormat::Of(FormatKind::kQ6_K)), 256);
  EXPECT_DOUBLE_EQ(BitsPerValue(TensorFormat::Of(FormatKind::kQ4_K)), 4.5);
  EXPECT_DOUBLE_EQ(BitsPerValue(TensorFormat::Of(FormatKind::kQ5_K)), 5.5);
  EXPECT_DOUBLE_EQ(BitsPerValue(TensorFormat::Of(FormatKind::kQ6_K)), 6.5625);
  // Dense bytes round up to whole super-blocks: 7e9 values are 27343750 of them.
  EXPECT_EQ(DenseValueBytes(TensorFormat::Of(FormatKind::kQ4_K), 7'000'000'000),
            27'343'750 * int64_t{144});
  EXPECT_EQ(DenseValueBytes(TensorFormat::Of(FormatKind::kQ6_K), 257), 2 * 210);
}

}  // namespace
}  // namespace tpserve
