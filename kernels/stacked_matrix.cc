#include "kernels/stacked_matrix.h"

#include <cstring>
#include <vector>

#include "base/str_cat.h"
#include "formats/tensor_format.h"
#include "kernels/check.h"

namespace tpserve {
namespace {

// Appends `bytes` bytes at `src` (may be null when bytes == 0).
void Append(std::vector<uint8_t>& out, const void* src, int64_t bytes) {
  if (bytes <= 0) return;
  const auto* p = static_cast<const uint8_t*>(src);
  out.insert(out.end(), p, p + bytes);
}

const void* Advance(const void* p, int64_t bytes) {
  return p == nullptr ? nullptr : static_cast<const uint8_t*>(p) + bytes;
}

}  // namespace

std::string StackRowsProblem(absl::Span<const WeightMatrix* const> parts) {
  if (parts.empty()) return "no matrices to stack";
  const WeightMatrix& first = *parts[0];
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightMatrix& w = *parts[i];
    const std::string part = StrCat("part ", i);
    if (w.prepared != nullptr) return StrCat(part, " is in a backend's own form");
    if (w.bias != nullptr) return StrCat(part, " carries a bias");
    if (!(w.format == first.format)) {
      return StrCat(part, " is ", TensorFormatName(w.format), ", part 0 ",
                    TensorFormatName(first.format));
    }
    if (w.cols != first.cols || w.row_bytes != first.row_bytes ||
        w.scale_stride != first.scale_stride) {
      return StrCat(part, " is [", w.rows, ", ", w.cols, "] with ", w.row_bytes,
                    "-byte rows and scale stride ", w.scale_stride, ", part 0 [", first.rows, ", ",
                    first.cols, "] with ", first.row_bytes, " and ", first.scale_stride);
    }
    const int64_t block = OutputBlockRows(w.format);
    if (i + 1 < parts.size() && w.rows % block != 0) {
      return StrCat(part, "'s ", w.rows, " rows end inside a ", block, "-row scale block of ",
                    TensorFormatName(w.format), ", which the next part's rows would share");
    }
    if (w.activation_scale_ub != first.activation_scale_ub) {
      return StrCat(part, "'s activation scale bound ", w.activation_scale_ub, " is not part 0's ",
                    first.activation_scale_ub);
    }
    if ((w.input_perm == nullptr) != (first.input_perm == nullptr) ||
        (w.input_perm != nullptr &&
         std::memcmp(w.input_perm, first.input_perm, w.cols * sizeof(int32_t)) != 0)) {
      return StrCat(part, "'s act-order permutation is not part 0's");
    }
  }
  return "";
}

HostMatrix StackRows(absl::Span<const WeightMatrix* const> parts) {
  TP_CHECK(StackRowsProblem(parts).empty(), "StackRows of matrices that do not stack");
  HostMatrix out;
  out.matrix = *parts[0];
  out.matrix.rows = 0;
  for (const WeightMatrix* w : parts) {
    const WeightMatrixParts bytes = WeightMatrixPartBytes(*w);
    Append(out.values, w->data, bytes.values);
    Append(out.scales, w->scales, bytes.scales);
    Append(out.zeros, w->zeros, bytes.zeros);
    out.matrix.rows += w->rows;
  }
  if (parts[0]->input_perm != nullptr) {
    out.perm.assign(parts[0]->input_perm, parts[0]->input_perm + parts[0]->cols);
  }
  WeightMatrix& m = out.matrix;
  m.data = out.values.empty() ? nullptr : out.values.data();
  m.scales = out.scales.empty() ? nullptr : out.scales.data();
  m.zeros = out.zeros.empty() ? nullptr : out.zeros.data();
  m.input_perm = out.perm.empty() ? nullptr : out.perm.data();
  return out;
}

WeightMatrix RowRange(const WeightMatrix& w, int64_t row_begin, int64_t rows) {
  TP_CHECK(row_begin >= 0 && rows >= 0 && row_begin + rows <= w.rows,
           "RowRange outside the matrix");
  TP_CHECK(row_begin % OutputBlockRows(w.format) == 0,
           "RowRange starting inside an output scale block");
  // The arrays before row_begin are those of a matrix of row_begin rows.
  WeightMatrix before = w;
  before.rows = row_begin;
  const WeightMatrixParts skip = WeightMatrixPartBytes(before);
  WeightMatrix v = w;
  v.rows = rows;
  v.prepared = nullptr;
  v.data = Advance(w.data, skip.values);
  v.scales = Advance(w.scales, skip.scales);
  v.zeros = Advance(w.zeros, skip.zeros);
  v.bias = w.bias == nullptr ? nullptr : w.bias + row_begin;
  return v;
}

}  // namespace tpserve
