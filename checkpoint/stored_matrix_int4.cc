// StoredMatrix for INT4 checkpoints: AutoAWQ GEMM and GPTQ v1, act-order included
// (layouts: stored_matrix.h). Codes are repacked into the engine's int4 layout
// (kernels/weight_matrix.h: [out][in] rows, GGML Q4_0 nibble order per 32 columns), scales
// and zero points transposed to [out][groups] f16, reading only the slice's words.
#include <array>
#include <cstring>
#include <numeric>

#include "base/status_macros.h"
#include "checkpoint/act_order.h"
#include "checkpoint/stored_matrix.h"
#include "checkpoint/stored_tensors.h"
#include "base/str_cat.h"
#include "kernels/quantize_weights.h"

namespace tpserve {
namespace {

using stored_internal::CheckMultiple;
using stored_internal::FindTensor;
using stored_internal::LoadU16;
using stored_internal::LoadU32;

constexpr int64_t kPerWord = 8;  // 4-bit codes per int32
constexpr int64_t kChunk = 32;   // engine int4 packing unit (Q4_0 order)

// The nibble of a word that holds output row o % 8: AWQ interleaves (nibble i holds row
// 0 2 4 6 1 3 5 7 [i]); GPTQ's qzeros keep rows in order.
constexpr std::array<int, 8> kAwqNibbleOfRow = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr std::array<int, 8> kInOrder = {0, 1, 2, 3, 4, 5, 6, 7};

// Where the 4-bit code of (output row o, input column k) sits in a qweight tensor:
// word LoadU32(row_of(k), o / words_per_o) at bit shift_of(k) + 4 * nibble_of_o[o % 8].
struct PackedCodes {
  const uint8_t* data;
  int64_t words_per_row;  // int32 words in one stored row of qweight
  bool along_out;         // AWQ: 8 output rows per word; GPTQ: 8 input columns per word
  const std::array<int, 8>* nibble_of_o;

  const uint8_t* RowOf(int64_t k) const {
    return data + 4 * words_per_row * (along_out ? k : k / kPerWord);
  }
  int ShiftOf(int64_t k) const { return along_out ? 0 : 4 * static_cast<int>(k % kPerWord); }
  uint32_t Code(const uint8_t* row, int shift, int64_t o) const {
    const int64_t word = along_out ? o / kPerWord : o;
    const int nibble_shift = along_out ? 4 * (*nibble_of_o)[o % kPerWord] : 0;
    return (LoadU32(row, word) >> (shift + nibble_shift)) & 0xF;
  }
};

// Codes of stored columns [0, source_cols.size()) (input column source_cols[j]) for rows
// [row_begin, row_begin + out.rows), in Q4_0 order: byte b of a 32-column chunk holds column
// b in its low nibble and b + 16 in its high one.
void RepackCodes(const PackedCodes& packed, const std::vector<int64_t>& source_cols,
                 int64_t row_begin, WeightMatrix& out, uint8_t* values) {
  const int64_t m = static_cast<int64_t>(source_cols.size());
  for (int64_t j0 = 0; j0 < m; j0 += kChunk) {
    std::array<const uint8_t*, kChunk> rows;
    std::array<int, kChunk> shifts;
    for (int64_t j = 0; j < kChunk; ++j) {
      rows[j] = packed.RowOf(source_cols[j0 + j]);
      shifts[j] = packed.ShiftOf(source_cols[j0 + j]);
    }
    for (int64_t r = 0; r < out.rows; ++r) {
      const int64_t o = row_begin + r;
      uint8_t* dst = values + r * out.row_bytes + j0 / 2;
      for (int64_t b = 0; b < kChunk / 2; ++b) {
        const uint32_t lo = packed.Code(rows[b], shifts[b], o);
        const uint32_t hi = packed.Code(rows[b + kChunk / 2], shifts[b + kChunk / 2], o);
        dst[b] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

}  // namespace

absl::Status StoredMatrix::OpenInt4(const WeightSource& source, TensorUse* used) {
  const bool awq = scheme_.method == QuantMethod::kAwq;
  const char* method = awq ? "AWQ" : "GPTQ";
  const int64_t group = scheme_.group_size;
  layout_ = awq ? Layout::kAwq : Layout::kGptq;
  format_ = TensorFormat::Int4(group);
  // Packed sizes must divide before the shapes below mean anything. group is a multiple of
  // 32 (ParseQuantizationConfig), so whole groups also make GPTQ's 8 inputs per word divide.
  TP_RETURN_IF_ERROR(CheckMultiple(module_ + (awq ? ".qweight" : ".qzeros"), "output rows", rows_,
                                   kPerWord, "8 output rows are packed per int32"));
  TP_RETURN_IF_ERROR(CheckMultiple(module_ + ".scales", "input columns", cols_, group,
                                   "one scale per group_size inputs"));
  const int64_t groups = cols_ / group;
  TP_ASSIGN_OR_RETURN(
      values_, FindTensor(source, module_ + ".qweight", {DType::kI32},
                          awq ? std::vector<int64_t>{cols_, rows_ / kPerWord}
                              : std::vector<int64_t>{cols_ / kPerWord, rows_},
                          awq ? "AWQ qweight [in, out/8]" : "GPTQ qweight [in/8, out]", used));
  TP_ASSIGN_OR_RETURN(
      zeros_, FindTensor(source, module_ + ".qzeros", {DType::kI32}, {groups, rows_ / kPerWord},
                         StrCat(method, " qzeros [in/group_size, out/8]"), used));
  const std::string scales_name = module_ + ".scales";
  if (absl::StatusOr<TensorView> t = source.Find(scales_name);
      t.ok() && (t->dtype == DType::kBF16 || t->dtype == DType::kF32)) {
    return absl::UnimplementedError(StrCat(
        "tensor ", scales_name, " in ", source.Describe(), ": dtype ", DTypeName(t->dtype),
        " int4 scales are not implemented (the engine holds them as F16; converting would round)"));
  }
  TP_ASSIGN_OR_RETURN(scales_, FindTensor(source, scales_name, {DType::kF16}, {groups, rows_},
                                          StrCat(method, " scales [in/group_size, out]"), used));
  if (awq) return absl::OkStatus();
  const std::string g_idx_name = module_ + ".g_idx";
  TP_ASSIGN_OR_RETURN(TensorView g_idx, FindTensor(source, g_idx_name, {DType::kI32}, {cols_},
                                                   "GPTQ g_idx [in]", used));
  group_index_.resize(cols_);
  std::memcpy(group_index_.data(), g_idx.data, cols_ * sizeof(int32_t));
  TP_RETURN_IF_ERROR(ValidateGroupIndex(g_idx_name, group_index_, group));
  if (IsSequentialGroupIndex(group_index_, group)) group_index_.clear();
  // A permuted index makes the format act-order: every slice then carries its permutation
  // (even one that happens to be the identity), so what a rank holds is what the plan counts.
  format_.act_order = !group_index_.empty();
  return absl::OkStatus();
}

absl::StatusOr<HostMatrix> StoredMatrix::ReadInt4(const TensorSlice& s) const {
  const bool awq = layout_ == Layout::kAwq;
  const int64_t group = scheme_.group_size;
  TP_ASSIGN_OR_RETURN(GroupedColumns grouped,
                      GroupColumns(module_ + (group_index_.empty() ? ".qweight" : ".g_idx"),
                                   group_index_, group, s.col_begin, s.num_cols, cols_));
  std::vector<int64_t> source_cols(s.num_cols);
  for (int64_t j = 0; j < s.num_cols; ++j) {
    source_cols[j] = s.col_begin + (grouped.perm.empty() ? j : grouped.perm[j]);
  }
  HostMatrix out = AllocateHostMatrix(format_, s.num_rows, s.num_cols);
  WeightMatrix& m = out.matrix;
  const PackedCodes packed{values_.data, awq ? rows_ / kPerWord : rows_, awq, &kAwqNibbleOfRow};
  RepackCodes(packed, source_cols, s.row_begin, m, out.values.data());

  // Zero points: AWQ stores z, GPTQ v1 z - 1 (so a stored 15 is 16, as the spec reads it).
  std::array<uint16_t, 17> zero_f16;
  for (int z = 0; z <= 16; ++z) zero_f16[z] = F32ToF16(static_cast<float>(z));
  const std::array<int, 8>& zero_nibble = awq ? kAwqNibbleOfRow : kInOrder;
  const int zero_offset = awq ? 0 : 1;
  const int64_t zero_words = rows_ / kPerWord;
  auto* scales = reinterpret_cast<uint16_t*>(out.scales.data());
  auto* zeros = reinterpret_cast<uint16_t*>(out.zeros.data());
  for (int64_t t = 0; t < m.scale_stride; ++t) {
    const int64_t g = grouped.groups[t];
    for (int64_t r = 0; r < s.num_rows; ++r) {
      const int64_t o = s.row_begin + r;
      scales[r * m.scale_stride + t] = LoadU16(scales_.data, g * rows_ + o);
      const uint32_t word = LoadU32(zeros_.data, g * zero_words + o / kPerWord);
      const int z = static_cast<int>((word >> (4 * zero_nibble[o % kPerWord])) & 0xF);
      zeros[r * m.scale_stride + t] = zero_f16[z + zero_offset];
    }
  }
  if (format_.act_order) {
    out.perm = std::move(grouped.perm);
    if (out.perm.empty()) {  // this slice's groups already run in column order
      out.perm.resize(s.num_cols);
      std::iota(out.perm.begin(), out.perm.end(), 0);
    }
    m.input_perm = out.perm.data();
  }
  return out;
}

}  // namespace tpserve
