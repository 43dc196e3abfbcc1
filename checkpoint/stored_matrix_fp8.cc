// StoredMatrix for FP8 checkpoints: fbgemm_fp8 and compressed-tensors "float-quantized",
// per output channel or per 128x128 block (layouts: stored_matrix.h).
#include <cmath>
#include <cstring>

#include "base/status_macros.h"
#include "checkpoint/stored_matrix.h"
#include "checkpoint/stored_tensors.h"
#include "base/str_cat.h"

namespace tpserve {
namespace {

using stored_internal::FindTensor;
using stored_internal::LoadScale;

constexpr int64_t kTile = 128;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A slice [begin, begin + count) of a dimension of `size` keeps whole 128-tiles when it starts
// on a tile and ends on one or at the end (the last tile of a dimension may be partial).
bool KeepsTiles(int64_t begin, int64_t count, int64_t size) {
  return begin % kTile == 0 && (count % kTile == 0 || begin + count == size);
}

// fbgemm's clamp for dynamic activation scales, stored per linear as input_scale_ub F32 [1]
// when a checkpoint keeps it (transformers fills it from activation_scale_ub otherwise).
absl::StatusOr<float> ActivationScaleBound(const WeightSource& source, const std::string& module,
                                           float from_config, TensorUse* used) {
  const std::string name = module + ".input_scale_ub";
  absl::StatusOr<TensorView> t = source.Find(name);
  if (absl::IsNotFound(t.status())) return from_config;
  TP_RETURN_IF_ERROR(t.status());
  if (t->dtype != DType::kF32 || t->num_elements() != 1 || t->shape.size() > 1) {
    return absl::InvalidArgumentError(
        StrCat("tensor ", name, " in ", source.Describe(), ": dtype ", DTypeName(t->dtype),
               " shape ", stored_internal::ShapeString(t->shape), ", expected F32 [1]"));
  }
  const float ub = LoadScale(DType::kF32, t->data, 0);
  if (!std::isfinite(ub) || ub <= 0) {
    return absl::InvalidArgumentError(StrCat("tensor ", name, " in ", source.Describe(), ": value ",
                                             ub, " must be positive and finite"));
  }
  used->Mark(name);
  return ub;
}

}  // namespace

absl::Status StoredMatrix::OpenFp8(const WeightSource& source, TensorUse* used) {
  const bool block = (scheme_.method == QuantMethod::kCompressedFp8 && scheme_.fp8_block) ||
                     scheme_.method == QuantMethod::kFp8Block;
  const std::string scale_name =
      module_ + (scheme_.method == QuantMethod::kFp8Block ? ".weight_scale_inv" : ".weight_scale");
  layout_ = block ? Layout::kFp8Block : Layout::kFp8Channel;
  format_ = TensorFormat::Of(block ? FormatKind::kFp8Block128 : FormatKind::kFp8PerChannel);
  TP_ASSIGN_OR_RETURN(values_, FindTensor(source, module_ + ".weight", {DType::kF8E4M3},
                                          {rows_, cols_}, "FP8 weight [out, in]", used));
  const std::vector<int64_t> scale_shape =
      block ? std::vector<int64_t>{CeilDiv(rows_, kTile), CeilDiv(cols_, kTile)}
            : std::vector<int64_t>{rows_, 1};
  TP_ASSIGN_OR_RETURN(scales_,
                      FindTensor(source, scale_name,
                                 {DType::kF32, DType::kBF16, DType::kF16}, scale_shape,
                                 block ? "FP8 block scales [ceil(out/128), ceil(in/128)]"
                                       : "FP8 per-channel weight_scale [out, 1]",
                                 used));
  if (scheme_.method == QuantMethod::kFbgemmFp8) {
    TP_ASSIGN_OR_RETURN(activation_scale_ub_,
                        ActivationScaleBound(source, module_, scheme_.activation_scale_ub, used));
  }
  return absl::OkStatus();
}

absl::StatusOr<HostMatrix> StoredMatrix::ReadFp8(const TensorSlice& s) const {
  const bool block = layout_ == Layout::kFp8Block;
  if (block && (!KeepsTiles(s.row_begin, s.num_rows, rows_) ||
                !KeepsTiles(s.col_begin, s.num_cols, cols_))) {
    return absl::InvalidArgumentError(StrCat("tensor ", values_.name, ": slice rows [", s.row_begin,
                                             ", ", s.row_begin + s.num_rows, ") cols [",
                                             s.col_begin, ", ", s.col_begin + s.num_cols, ") of [",
                                             rows_, ", ", cols_, "] cuts its 128x128 scale tiles"));
  }
  HostMatrix out;
  WeightMatrix& m = out.matrix;
  m.format = format_;
  m.rows = s.num_rows;
  m.cols = s.num_cols;
  m.activation_scale_ub = activation_scale_ub_;
  // Values: one byte each, so whole rows are a view and a column range is a strided copy.
  if (s.col_begin == 0 && s.num_cols == cols_) {
    m.row_bytes = cols_;
    m.data = values_.data + s.row_begin * cols_;
  } else {
    m.row_bytes = s.num_cols;
    out.values.resize(s.num_rows * s.num_cols);
    for (int64_t r = 0; r < s.num_rows; ++r) {
      std::memcpy(out.values.data() + r * s.num_cols,
                  values_.data + (s.row_begin + r) * cols_ + s.col_begin, s.num_cols);
    }
    m.data = out.values.data();
  }
  // Scales: [scale_rows][scale_cols] of the stored grid, f32 as the engine holds them.
  const int64_t first_row = block ? s.row_begin / kTile : s.row_begin;
  const int64_t scale_rows =
      block ? CeilDiv(s.row_begin + s.num_rows, kTile) - first_row : s.num_rows;
  const int64_t first_col = block ? s.col_begin / kTile : 0;
  const int64_t scale_cols = block ? CeilDiv(s.col_begin + s.num_cols, kTile) - first_col : 1;
  const int64_t stored_cols = scales_.cols();
  m.scale_stride = scale_cols;
  if (scales_.dtype == DType::kF32 && scale_cols == stored_cols) {
    m.scales = scales_.data + first_row * stored_cols * 4;
    return out;
  }
  out.scales.resize(scale_rows * scale_cols * 4);
  for (int64_t r = 0; r < scale_rows; ++r) {
    for (int64_t c = 0; c < scale_cols; ++c) {
      const float v =
          LoadScale(scales_.dtype, scales_.data, (first_row + r) * stored_cols + first_col + c);
      std::memcpy(out.scales.data() + (r * scale_cols + c) * 4, &v, 4);
    }
  }
  m.scales = out.scales.data();
  return out;
}

}  // namespace tpserve
